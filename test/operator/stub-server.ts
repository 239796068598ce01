/**
 * A stand-in for the Playflow server with only the endpoints the operator calls, for controller
 * tests that need to steer the server precisely (queue depth, failures). The acceptance suite
 * (operator.acceptance.test.ts) uses the real server instead.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse } from 'yaml';
import type { QueueStats } from '../../common/protocol.js';

interface Entry {
  path: string;
  version: number;
  content: string;
  owner?: Owner;
}

interface Owner {
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

/** The server's ownership rule (server/ownership.ts): same kind/namespace/name, or both none. */
function sameOwner(a: Owner | undefined, b: Owner | undefined): boolean {
  if (!a || !b) return !a && !b;
  return a.kind === b.kind && a.namespace === b.namespace && a.name === b.name;
}

const ownedByOther = (what: string, o: Owner | undefined): [number, unknown] => [409, {
  error: { code: 'owned_by_other', message: `${what} is owned by ${o ? `${o.kind} ${o.namespace}/${o.name}` : 'an API client (no owner)'}`, details: { owner: o ?? null } },
}];

export class StubPlayflowServer {
  private readonly server: http.Server;
  url = '';
  readonly catalog = new Map<string, Entry[]>();
  readonly deleted = new Set<string>();
  readonly credentials = new Map<string, any>();
  stats: QueueStats = { queued: 0, leased: 0, delayed: 0, oldest_age_seconds: 0 };
  /** Depth of one pool (GET /api/queue/stats?pool=); pools not listed answer `stats`. */
  poolStats: Record<string, QueueStats> = {};
  readonly calls: string[] = [];

  constructor() {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
        const path = decodeURI((req.url ?? '/').split('?')[0]!);
        const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
        const ownerQuery = query.get('owner')?.split('/');
        const queryOwner = ownerQuery ? { kind: ownerQuery[0]!, namespace: ownerQuery[1]!, name: ownerQuery[2]! } : undefined;
        this.calls.push(`${req.method} ${path}`);
        const send = (status: number, obj: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(obj));
        };
        try {
          if (req.method === 'POST' && path === '/api/catalog/playbook') return send(...this.register(body));
          if (req.method === 'DELETE' && path.startsWith('/api/catalog/playbook/')) {
            const p = path.slice('/api/catalog/playbook/'.length);
            if (!this.catalog.has(p) || this.deleted.has(p)) return send(404, { error: { code: 'not_found', message: `no playbook at ${p}` } });
            const holder = this.catalog.get(p)!.at(-1)!.owner;
            if (queryOwner && !sameOwner(holder, queryOwner)) return send(...ownedByOther(`catalog path '${p}'`, holder));
            this.deleted.add(p);
            return send(200, { status: 'deleted', path: p });
          }
          if (req.method === 'GET' && path.startsWith('/api/catalog/playbook/')) {
            const p = path.slice('/api/catalog/playbook/'.length);
            const versions = this.catalog.get(p);
            if (!versions || this.deleted.has(p)) return send(404, { error: { code: 'not_found', message: 'no such playbook' } });
            const e = versions[versions.length - 1]!;
            return send(200, { catalog_id: String(e.version), path: p, version: e.version, content: e.content, playbook: parse(e.content), created_at: '' });
          }
          if (req.method === 'GET' && path === '/api/catalog/versions') {
            const versions = (query.get('paths') ?? '').split(',').filter((p) => this.catalog.has(p) && !this.deleted.has(p))
              .map((p) => {
                const e = this.catalog.get(p)!.at(-1)!;
                return { path: p, version: e.version, ...(e.owner ? { owner: e.owner } : {}) };
              });
            return send(200, { versions });
          }
          if (req.method === 'GET' && path === '/api/queue/stats') return send(200, this.poolStats[query.get('pool') ?? ''] ?? this.stats);
          if (req.method === 'POST' && path === '/api/credentials') {
            if (!body?.name || !body?.type || typeof body.data !== 'object') return send(400, { error: { code: 'bad_request', message: 'name, type and data are required' } });
            const required: string[] = body.schema?.required ?? [];
            const errs = required.filter((f) => !(f in body.data)).map((f) => `Missing required field: ${f}`);
            if (errs.length) return send(400, { error: { code: 'credential_invalid', message: 'Credential validation failed', details: errs } });
            const existing = this.credentials.get(body.name);
            // Upgrade adoption (server/store/credentials.ts): an ownerless credential whose meta
            // says the claiming resource stored it.
            const adoptable = body.adopt === true && body.owner && existing && !existing.owner && existing.meta?.source === 'kubernetes'
              && existing.meta?.namespace === body.owner.namespace && existing.meta?.resource === body.owner.name;
            if (existing && !adoptable && !sameOwner(existing.owner, body.owner)) return send(...ownedByOther(`credential '${body.name}'`, existing.owner));
            this.credentials.set(body.name, body);
            return send(200, { name: body.name });
          }
          if (req.method === 'GET' && path.startsWith('/api/credential/')) {
            const c = this.credentials.get(path.slice('/api/credential/'.length));
            if (!c) return send(404, { error: { code: 'not_found', message: 'no such credential' } });
            return send(200, { credential_key: c.name, credential_type: c.type, data: c.data });
          }
          if (req.method === 'GET' && path.startsWith('/api/credentials/')) {
            const c = this.credentials.get(path.slice('/api/credentials/'.length));
            if (!c) return send(404, { error: { code: 'not_found', message: 'no such credential' } });
            return send(200, { name: c.name, type: c.type, meta: c.meta ?? {}, ...(c.owner ? { owner: c.owner } : {}) });
          }
          if (req.method === 'DELETE' && path.startsWith('/api/credentials/')) {
            const n = path.slice('/api/credentials/'.length);
            const existing = this.credentials.get(n);
            if (existing && queryOwner && !sameOwner(existing.owner, queryOwner)) return send(...ownedByOther(`credential '${n}'`, existing.owner));
            if (!this.credentials.delete(n)) return send(404, { error: { code: 'not_found', message: 'no such credential' } });
            return send(200, { status: 'deleted' });
          }
          return send(404, { error: { code: 'not_found', message: `${req.method} ${path}` } });
        } catch (err) {
          return send(500, { error: { code: 'internal', message: String(err) } });
        }
      });
    });
  }

  private register(body: { content: string; path?: string; owner?: Owner; adopt_version?: number }): [number, unknown] {
    let doc: any;
    try {
      doc = parse(body.content);
    } catch (err) {
      return [400, { error: { code: 'bad_request', message: String(err) } }];
    }
    const problems: Array<{ path: string; message: string; severity: string }> = [];
    const steps: any[] = Array.isArray(doc?.workflow) ? doc.workflow : [];
    const names = new Set<string>();
    steps.forEach((s, i) => {
      if (names.has(s.step)) problems.push({ path: `workflow[${i}].step`, message: `duplicate step name '${s.step}'`, severity: 'error' });
      names.add(s.step);
    });
    steps.forEach((s, i) => {
      const next = typeof s.next === 'string' ? [s.next] : Array.isArray(s.next) ? s.next : [];
      next.forEach((n: any, j: number) => {
        const target = typeof n === 'string' ? n : n?.step;
        if (!names.has(target)) problems.push({ path: `workflow[${i}].next[${j}]`, message: `step '${target}' does not exist`, severity: 'error' });
      });
    });
    if (problems.length) return [422, { error: { code: 'playbook_invalid', message: 'playbook is invalid', details: problems } }];
    const path = body.path ?? doc.metadata.path;
    const versions = this.catalog.get(path) ?? [];
    const live = this.deleted.has(path) ? undefined : versions.at(-1);
    // Upgrade adoption (server/store/catalog-service.ts): an ownerless path still at the version
    // the claiming resource says it registered.
    const adopting = !!live && !!body.owner && !live.owner && body.adopt_version !== undefined && live.version === body.adopt_version;
    if (live && !adopting && !sameOwner(live.owner, body.owner)) return ownedByOther(`catalog path '${path}'`, live.owner);
    this.deleted.delete(path);
    const last = versions[versions.length - 1];
    if (last && last.content === body.content) {
      if (body.owner) last.owner = body.owner;
      return [200, { catalog_id: String(last.version), path, version: last.version, created: false, warnings: [] }];
    }
    const e = { path, version: versions.length + 1, content: body.content, owner: body.owner };
    versions.push(e);
    this.catalog.set(path, versions);
    return [201, { catalog_id: String(e.version), path, version: e.version, created: true, warnings: [] }];
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
