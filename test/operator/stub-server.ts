/**
 * A stand-in for the Playflow server with only the endpoints the operator calls, for controller
 * tests that need to steer the server precisely (queue depth, failures). The acceptance suite
 * (operator.acceptance.test.ts) uses the real server instead.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse } from 'yaml';
import type { QueueStats } from '../../client/protocol.js';

interface Entry {
  path: string;
  version: number;
  content: string;
}

export class StubPlayflowServer {
  private readonly server: http.Server;
  url = '';
  readonly catalog = new Map<string, Entry[]>();
  readonly deleted = new Set<string>();
  readonly credentials = new Map<string, any>();
  stats: QueueStats = { queued: 0, leased: 0, delayed: 0, oldest_age_seconds: 0 };
  readonly calls: string[] = [];

  constructor() {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
        const path = decodeURI((req.url ?? '/').split('?')[0]!);
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
          if (req.method === 'GET' && path === '/api/queue/stats') return send(200, this.stats);
          if (req.method === 'POST' && path === '/api/credentials') {
            if (!body?.name || !body?.type || typeof body.data !== 'object') return send(400, { error: { code: 'bad_request', message: 'name, type and data are required' } });
            const required: string[] = body.schema?.required ?? [];
            const errs = required.filter((f) => !(f in body.data)).map((f) => `Missing required field: ${f}`);
            if (errs.length) return send(400, { error: { code: 'credential_invalid', message: 'Credential validation failed', details: errs } });
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
            return send(200, { name: c.name, type: c.type });
          }
          if (req.method === 'DELETE' && path.startsWith('/api/credentials/')) {
            const n = path.slice('/api/credentials/'.length);
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

  private register(body: { content: string; path?: string }): [number, unknown] {
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
    this.deleted.delete(path);
    const last = versions[versions.length - 1];
    if (last && last.content === body.content) return [200, { catalog_id: String(last.version), path, version: last.version, created: false, warnings: [] }];
    const e = { path, version: versions.length + 1, content: body.content };
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
