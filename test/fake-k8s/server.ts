/**
 * A fake Kubernetes API server for the operator's tests: plain node:http speaking the real REST and
 * watch protocol for the handful of resources the operator uses, so the real
 * `@kubernetes/client-node` (typed APIs, `Watch`) runs unmodified against it.
 *
 * What it implements (and what a real API server does the same way):
 * - namespaced resources under `/api/v1/namespaces/{ns}/{plural}` and
 *   `/apis/{group}/{version}/namespaces/{ns}/{plural}`, plus the all-namespaces list/watch paths;
 * - list (collection `metadata.resourceVersion`), get, create (POST, `generateName`), update (PUT,
 *   409 Conflict on a stale `metadata.resourceVersion`), delete, patch with JSON patch, merge patch,
 *   strategic merge (treated as merge) and server-side apply (treated as merge, creates when
 *   missing);
 * - one global, monotonically increasing resourceVersion; `metadata.generation` bumped only when
 *   something outside metadata/status changes (for resources with a status subresource, the main
 *   endpoint ignores status and `/status` ignores everything but status);
 * - finalizers: delete with finalizers only sets `deletionTimestamp`; removing the last finalizer of
 *   a deleting object deletes it (DELETED event);
 * - `/scale` (autoscaling/v1 Scale) for StatefulSets and WorkerPools;
 * - watch (`?watch=true&resourceVersion=…`): ADDED for existing objects when no resourceVersion is
 *   given, then ADDED/MODIFIED/DELETED as they happen, BOOKMARK with `allowWatchBookmarks=true`,
 *   `timeoutSeconds`, and an ERROR event with a 410 Expired Status followed by close when the
 *   resourceVersion is older than the retained history (see `compact()`);
 * - Secrets: `stringData` folded into base64 `data` on write, as the real server does;
 * - errors as `Status` objects with `reason` and `code`.
 *
 * Test hooks: `compact()` (expire history), `dropWatches()`, `setWatchesEnabled(false)` (new watch
 * requests fail with 503 until re-enabled), `requests` (a log of every call with the bearer token,
 * so tests can tell which client wrote), `failNext()` (inject an error response), direct
 * `getObject` / `putObject` helpers, and `kubeConfig(token)`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { KubeConfig } from '@kubernetes/client-node';
import { Ajv, type ValidateFunction } from 'ajv';

export type Obj = Record<string, any>;

export interface ResourceDef {
  group: string; // '' for core
  version: string;
  plural: string;
  kind: string;
  /** The object has a status subresource (`/status`). */
  status?: boolean;
  /** The object has a scale subresource. Paths are dot paths. */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
  /** Generation is bumped on changes outside metadata (and outside status when `status`). */
  generation?: boolean;
}

export const DEFAULT_RESOURCES: ResourceDef[] = [
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret' },
  { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap' },
  { group: '', version: 'v1', plural: 'events', kind: 'Event' },
  { group: 'events.k8s.io', version: 'v1', plural: 'events', kind: 'Event' },
  { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease' },
  {
    group: 'apps', version: 'v1', plural: 'statefulsets', kind: 'StatefulSet', status: true, generation: true,
    scale: { specReplicasPath: 'spec.replicas', statusReplicasPath: 'status.replicas', labelSelectorPath: 'status.selector' },
  },
  { group: 'playflow.io', version: 'v1alpha1', plural: 'playbooks', kind: 'Playbook', status: true, generation: true },
  { group: 'playflow.io', version: 'v1alpha1', plural: 'credentials', kind: 'Credential', status: true, generation: true },
  {
    group: 'playflow.io', version: 'v1alpha1', plural: 'workerpools', kind: 'WorkerPool', status: true, generation: true,
    scale: { specReplicasPath: 'spec.replicas', statusReplicasPath: 'status.replicas' },
  },
];

export interface RequestRecord {
  method: string;
  path: string;
  query: string;
  contentType?: string;
  /** Bearer token of the caller ('' when none). */
  token: string;
  status: number;
}

interface HistoryEntry {
  rv: number;
  resKey: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Obj;
}

interface WatchConn {
  resKey: string;
  namespace?: string;
  fieldSelector?: Record<string, string>;
  labelSelector?: Record<string, string>;
  bookmarks: boolean;
  res: http.ServerResponse;
  timers: NodeJS.Timeout[];
  closed: boolean;
}

export interface FakeKubeOptions {
  resources?: ResourceDef[];
  /** How often a BOOKMARK is sent on watches that allow them. Default 1000 ms. */
  bookmarkIntervalMs?: number;
  /** Mirror a StatefulSet's spec.replicas into status.replicas/readyReplicas, like its controller. Default true. */
  simulateStatefulSetController?: boolean;
  /**
   * CustomResourceDefinition documents: custom resources of their kinds are then defaulted,
   * pruned of unknown fields and validated against the openAPIV3Schema on every write, as the
   * real API server does (CEL rules are not evaluated).
   */
  crds?: Obj[];
}

class HttpError extends Error {
  constructor(readonly code: number, readonly reason: string, message: string, readonly details?: Obj) {
    super(message);
  }
}

const clone = <T>(v: T): T => structuredClone(v);

function getPath(obj: Obj, path: string): any {
  let cur: any = obj;
  for (const part of path.split('.')) {
    if (cur == null || typeof cur !== 'object') return undefined;
    cur = cur[part];
  }
  return cur;
}
function setPath(obj: Obj, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur: any = obj;
  for (const part of parts.slice(0, -1)) {
    if (cur[part] == null || typeof cur[part] !== 'object') cur[part] = {};
    cur = cur[part];
  }
  cur[parts[parts.length - 1]!] = value;
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: any, patch: any): any {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch);
  const out: Obj = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function decodePointer(ptr: string): string[] {
  if (ptr === '') return [];
  if (!ptr.startsWith('/')) throw new HttpError(422, 'Invalid', `invalid JSON pointer ${ptr}`);
  return ptr.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** RFC 6902 JSON patch. */
export function jsonPatch(doc: any, ops: any[]): any {
  if (!Array.isArray(ops)) throw new HttpError(400, 'BadRequest', 'JSON patch must be an array');
  let root = clone(doc);
  const parentOf = (parts: string[]): [any, string] => {
    let cur = root;
    for (const p of parts.slice(0, -1)) {
      cur = Array.isArray(cur) ? cur[Number(p)] : cur?.[p];
      if (cur === undefined || cur === null) throw new HttpError(422, 'Invalid', `path not found: /${parts.join('/')}`);
    }
    return [cur, parts[parts.length - 1]!];
  };
  const read = (parts: string[]): any => {
    let cur = root;
    for (const p of parts) {
      if (cur === undefined || cur === null) return undefined;
      cur = Array.isArray(cur) ? cur[Number(p)] : cur[p];
    }
    return cur;
  };
  const add = (parts: string[], value: any): void => {
    if (parts.length === 0) { root = value; return; }
    const [parent, last] = parentOf(parts);
    if (Array.isArray(parent)) {
      const idx = last === '-' ? parent.length : Number(last);
      if (!(idx >= 0 && idx <= parent.length)) throw new HttpError(422, 'Invalid', `index out of range: ${last}`);
      parent.splice(idx, 0, value);
    } else parent[last] = value;
  };
  const remove = (parts: string[]): any => {
    const [parent, last] = parentOf(parts);
    if (Array.isArray(parent)) {
      const idx = Number(last);
      if (!(idx >= 0 && idx < parent.length)) throw new HttpError(422, 'Invalid', `index out of range: ${last}`);
      return parent.splice(idx, 1)[0];
    }
    if (!(last in parent)) throw new HttpError(422, 'Invalid', `path not found: /${parts.join('/')}`);
    const v = parent[last];
    delete parent[last];
    return v;
  };
  for (const op of ops) {
    const parts = decodePointer(String(op.path));
    switch (op.op) {
      case 'add': add(parts, clone(op.value)); break;
      case 'remove': remove(parts); break;
      case 'replace': remove(parts); add(parts, clone(op.value)); break;
      case 'move': { const v = remove(decodePointer(op.from)); add(parts, v); break; }
      case 'copy': add(parts, clone(read(decodePointer(op.from)))); break;
      case 'test':
        if (JSON.stringify(read(parts)) !== JSON.stringify(op.value)) {
          throw new HttpError(422, 'Invalid', `test operation failed at ${op.path}`);
        }
        break;
      default: throw new HttpError(400, 'BadRequest', `unknown JSON patch op ${String(op.op)}`);
    }
  }
  return root;
}

function parseSelector(s: string | null): Record<string, string> | undefined {
  if (!s) return undefined;
  const out: Record<string, string> = {};
  for (const part of s.split(',')) {
    const m = /^([^=!]+)==?(.*)$/.exec(part.trim());
    if (!m) throw new HttpError(400, 'BadRequest', `unsupported selector: ${part}`);
    out[m[1]!.trim()] = m[2]!.trim();
  }
  return out;
}

function stripForCompare(o: Obj, keepStatus: boolean): Obj {
  const c: Obj = { ...o };
  delete c.metadata;
  if (!keepStatus) delete c.status;
  delete c.apiVersion;
  delete c.kind;
  return c;
}

export class FakeKubeServer {
  readonly resources: ResourceDef[];
  /** Every request, in order. */
  readonly requests: RequestRecord[] = [];
  private readonly server: http.Server;
  private readonly objects = new Map<string, Map<string, Obj>>(); // resKey -> "ns/name" -> obj
  private history: HistoryEntry[] = [];
  private compactedThrough = 0;
  private rv = 1;
  private watches = new Set<WatchConn>();
  private watchesEnabled = true;
  private injected: Array<{ match: (method: string, path: string, token: string) => boolean; code: number; times: number }> = [];
  private readonly bookmarkIntervalMs: number;
  private readonly simulateSts: boolean;
  private readonly schemas = new Map<string, { schema: Obj; validate: ValidateFunction }>();
  url = '';

  constructor(opts: FakeKubeOptions = {}) {
    this.resources = opts.resources ?? DEFAULT_RESOURCES;
    this.bookmarkIntervalMs = opts.bookmarkIntervalMs ?? 1000;
    this.simulateSts = opts.simulateStatefulSetController ?? true;
    for (const r of this.resources) this.objects.set(resKey(r), new Map());
    if (opts.crds?.length) {
      const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
      for (const k of ['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-int-or-string', 'x-kubernetes-validations',
        'x-kubernetes-list-type', 'x-kubernetes-list-map-keys', 'x-kubernetes-embedded-resource']) ajv.addKeyword(k);
      for (const crd of opts.crds) {
        const version = crd.spec.versions.find((v: Obj) => v.storage) ?? crd.spec.versions[0];
        const schema = version.schema.openAPIV3Schema;
        const def = this.resources.find((r) => r.group === crd.spec.group && r.kind === crd.spec.names.kind);
        if (def) this.schemas.set(resKey(def), { schema, validate: ajv.compile(schema) });
      }
    }
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.sendError(req, res, err instanceof HttpError ? err : new HttpError(500, 'InternalError', String(err)));
      });
    });
  }

  async start(port = 0): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    const { port: p } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${p}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.dropWatches();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** A kubeconfig pointing at this server. `token` identifies the caller in `requests`. */
  kubeConfig(token = 'test-token', namespace = 'default'): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'user', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'user', namespace }],
      currentContext: 'fake',
    });
    return kc;
  }

  /** Current (latest) resourceVersion. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Forget every event so far: watches resuming from an older resourceVersion get 410 Gone. */
  compact(): void {
    this.history = [];
    this.compactedThrough = this.rv;
  }

  /** Close every open watch connection (clients see the stream end). */
  dropWatches(): void {
    for (const w of [...this.watches]) this.closeWatch(w);
  }

  /** Sends an ERROR event with a Status of `code` on every open watch, then closes them. */
  failWatches(code = 500, reason = code === 410 ? 'Expired' : 'InternalError'): void {
    for (const w of [...this.watches]) {
      w.res.write(JSON.stringify({
        type: 'ERROR',
        object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `injected ${reason}`, reason, code },
      }) + '\n');
      this.closeWatch(w);
    }
  }

  /** While disabled, new watch requests get 503 (existing ones are dropped). */
  setWatchesEnabled(enabled: boolean): void {
    this.watchesEnabled = enabled;
    if (!enabled) this.dropWatches();
  }

  get openWatches(): number {
    return this.watches.size;
  }

  /** The next `times` requests matching (method, path, bearer token) get an error Status with `code`. */
  failNext(match: (method: string, path: string, token: string) => boolean, code = 500, times = 1): void {
    this.injected.push({ match, code, times });
  }

  /** Drops every pending injected failure. */
  clearFailures(): void {
    this.injected = [];
  }

  /** Mutating requests (everything but GET), optionally only those of one token. */
  writes(token?: string): RequestRecord[] {
    return this.requests.filter((r) => r.method !== 'GET' && (token === undefined || r.token === token));
  }

  getObject(plural: string, namespace: string, name: string, group?: string): Obj | undefined {
    const r = this.findByPlural(plural, group);
    const o = this.objects.get(resKey(r))!.get(`${namespace}/${name}`);
    return o ? clone(o) : undefined;
  }

  listObjects(plural: string, namespace?: string, group?: string): Obj[] {
    const r = this.findByPlural(plural, group);
    return [...this.objects.get(resKey(r))!.values()]
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .map(clone);
  }

  /** Create or replace an object directly (no preconditions), emitting the watch event. */
  putObject(plural: string, obj: Obj, group?: string): Obj {
    const r = this.findByPlural(plural, group);
    const ns = obj.metadata?.namespace ?? 'default';
    const existing = this.objects.get(resKey(r))!.get(`${ns}/${obj.metadata.name}`);
    if (existing) {
      const next = clone(obj);
      next.metadata = { ...existing.metadata, ...next.metadata, resourceVersion: existing.metadata.resourceVersion };
      return clone(this.commitUpdate(r, existing, next, 'main'));
    }
    return clone(this.commitCreate(r, ns, clone(obj)));
  }

  // ---------------------------------------------------------------------------------------------

  private findByPlural(plural: string, group?: string): ResourceDef {
    const r = this.resources.find((x) => x.plural === plural && (group === undefined || x.group === group));
    if (!r) throw new Error(`unknown resource ${plural}`);
    return r;
  }

  private nextRv(): number {
    this.rv += 1;
    return this.rv;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const method = (req.method ?? 'GET').toUpperCase();
    const auth = req.headers.authorization ?? '';
    const rec: RequestRecord = {
      method,
      path: url.pathname,
      query: url.search,
      contentType: req.headers['content-type'],
      token: auth.startsWith('Bearer ') ? auth.slice(7) : '',
      status: 0,
    };
    this.requests.push(rec);
    res.on('finish', () => { rec.status = res.statusCode; });
    const body = await readBody(req);

    const inj = this.injected.find((i) => i.times > 0 && i.match(method, url.pathname, rec.token));
    if (inj) {
      inj.times -= 1;
      if (inj.times === 0) this.injected = this.injected.filter((i) => i !== inj);
      throw new HttpError(inj.code, inj.code === 409 ? 'Conflict' : 'InternalError', 'injected failure');
    }

    if (url.pathname === '/version') return this.sendJson(res, 200, { major: '1', minor: '33', gitVersion: 'v1.33.0-fake' });

    const route = this.route(url.pathname);
    const { def, namespace, name, sub } = route;

    if (!name) {
      if (method === 'GET') {
        if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1') {
          return this.watch(def, namespace, url, res);
        }
        return this.list(def, namespace, url, res);
      }
      if (method === 'POST') {
        if (!namespace) throw new HttpError(405, 'MethodNotAllowed', 'create needs a namespace');
        const obj = parseBody(body, rec.contentType);
        return this.sendJson(res, 201, this.create(def, namespace, obj));
      }
      throw new HttpError(405, 'MethodNotAllowed', `${method} not allowed on a collection`);
    }
    if (!namespace) throw new HttpError(404, 'NotFound', 'namespaced resource needs a namespace');
    const key = `${namespace}/${name}`;
    const store = this.objects.get(resKey(def))!;

    if (sub === 'scale') {
      if (!def.scale) throw new HttpError(404, 'NotFound', `${def.plural} has no scale subresource`);
      const existing = store.get(key);
      if (!existing) throw this.notFound(def, name);
      if (method === 'GET') return this.sendJson(res, 200, this.toScale(def, existing));
      let scale: Obj;
      if (method === 'PUT') {
        scale = parseBody(body, rec.contentType);
        const rv = scale.metadata?.resourceVersion;
        if (rv && rv !== existing.metadata.resourceVersion) throw this.conflict(def, name);
      } else if (method === 'PATCH') {
        scale = applyPatch(this.toScale(def, existing), body, rec.contentType);
      } else throw new HttpError(405, 'MethodNotAllowed', `${method} not allowed on scale`);
      const replicas = scale.spec?.replicas;
      if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
        throw new HttpError(422, 'Invalid', 'spec.replicas must be a non-negative integer');
      }
      const next = clone(existing);
      setPath(next, def.scale.specReplicasPath, replicas);
      const updated = this.commitUpdate(def, existing, next, 'main');
      return this.sendJson(res, 200, this.toScale(def, updated));
    }
    if (sub && sub !== 'status') throw new HttpError(404, 'NotFound', `unknown subresource ${sub}`);
    if (sub === 'status' && !def.status) throw new HttpError(404, 'NotFound', `${def.plural} has no status subresource`);
    const part: 'main' | 'status' = sub === 'status' ? 'status' : 'main';

    switch (method) {
      case 'GET': {
        const o = store.get(key);
        if (!o) throw this.notFound(def, name);
        return this.sendJson(res, 200, o);
      }
      case 'PUT': {
        const obj = parseBody(body, rec.contentType);
        const existing = store.get(key);
        if (!existing) {
          if (part === 'status') throw this.notFound(def, name);
          return this.sendJson(res, 201, this.create(def, namespace, { ...obj, metadata: { ...obj.metadata, name } }));
        }
        const rv = obj.metadata?.resourceVersion;
        if (rv && rv !== existing.metadata.resourceVersion) throw this.conflict(def, name);
        return this.sendJson(res, 200, this.commitUpdate(def, existing, obj, part));
      }
      case 'PATCH': {
        const ct = (rec.contentType ?? '').split(';')[0]!.trim();
        const existing = store.get(key);
        if (!existing) {
          if (ct === 'application/apply-patch+yaml' && part === 'main') {
            const obj = parseBody(body, 'application/yaml');
            return this.sendJson(res, 201, this.create(def, namespace, { ...obj, metadata: { ...obj.metadata, name } }));
          }
          throw this.notFound(def, name);
        }
        const patched = applyPatch(existing, body, ct);
        const rv = patched.metadata?.resourceVersion;
        if (rv && rv !== existing.metadata.resourceVersion) throw this.conflict(def, name);
        return this.sendJson(res, 200, this.commitUpdate(def, existing, patched, part));
      }
      case 'DELETE': {
        if (part === 'status') throw new HttpError(405, 'MethodNotAllowed', 'cannot delete status');
        const existing = store.get(key);
        if (!existing) throw this.notFound(def, name);
        const opts = body.length ? (parseBody(body, 'application/json') as Obj) : {};
        const pre = opts.preconditions ?? {};
        if (pre.resourceVersion && pre.resourceVersion !== existing.metadata.resourceVersion) throw this.conflict(def, name);
        if (pre.uid && pre.uid !== existing.metadata.uid) throw this.conflict(def, name);
        if ((existing.metadata.finalizers ?? []).length > 0) {
          if (existing.metadata.deletionTimestamp) return this.sendJson(res, 200, existing);
          const next = clone(existing);
          next.metadata.deletionTimestamp = new Date().toISOString();
          next.metadata.deletionGracePeriodSeconds = 0;
          return this.sendJson(res, 200, this.commitUpdate(def, existing, next, 'meta'));
        }
        const gone = this.commitDelete(def, existing);
        return this.sendJson(res, 200, gone);
      }
      default:
        throw new HttpError(405, 'MethodNotAllowed', `${method} not allowed`);
    }
  }

  private route(pathname: string): { def: ResourceDef; namespace?: string; name?: string; sub?: string } {
    const parts = pathname.split('/').filter(Boolean).map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (parts[0] === 'api' && parts.length >= 2) {
      group = '';
      version = parts[1]!;
      rest = parts.slice(2);
    } else if (parts[0] === 'apis' && parts.length >= 3) {
      group = parts[1]!;
      version = parts[2]!;
      rest = parts.slice(3);
    } else throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${pathname})`);
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [plural, name, sub, ...extra] = rest;
    const def = this.resources.find((r) => r.group === group && r.version === version && r.plural === plural);
    if (!def || extra.length) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${pathname})`);
    return { def, namespace, name, sub };
  }

  private apiVersion(def: ResourceDef): string {
    return def.group ? `${def.group}/${def.version}` : def.version;
  }

  private create(def: ResourceDef, namespace: string, obj: Obj): Obj {
    if (obj.metadata?.namespace && obj.metadata.namespace !== namespace) {
      throw new HttpError(400, 'BadRequest', 'the namespace of the object does not match the namespace of the request');
    }
    obj.metadata = { ...(obj.metadata ?? {}) };
    if (!obj.metadata.name) {
      if (!obj.metadata.generateName) throw new HttpError(422, 'Invalid', 'metadata.name: Required value');
      obj.metadata.name = `${obj.metadata.generateName}${randomUUID().slice(0, 5)}`;
    }
    const store = this.objects.get(resKey(def))!;
    if (store.has(`${namespace}/${obj.metadata.name}`)) {
      throw new HttpError(409, 'AlreadyExists', `${def.plural}${def.group ? '.' + def.group : ''} "${obj.metadata.name}" already exists`,
        { name: obj.metadata.name, group: def.group, kind: def.plural });
    }
    return this.commitCreate(def, namespace, obj);
  }

  private commitCreate(def: ResourceDef, namespace: string, obj: Obj): Obj {
    const rv = this.nextRv();
    obj.apiVersion = this.apiVersion(def);
    obj.kind = def.kind;
    const md = obj.metadata;
    md.namespace = namespace;
    md.uid = randomUUID();
    md.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    md.resourceVersion = String(rv);
    delete md.deletionTimestamp;
    if (def.generation) md.generation = 1;
    if (def.status && obj.status === undefined) delete obj.status;
    this.normalise(def, obj);
    this.objects.get(resKey(def))!.set(`${namespace}/${md.name}`, obj);
    this.record(def, rv, 'ADDED', obj);
    this.afterWrite(def, obj);
    return clone(obj);
  }

  /**
   * part 'main': spec etc. (status kept from the stored object when the resource has a status
   * subresource); 'status': only status taken from `incoming`; 'meta': the incoming object as is
   * (internal).
   */
  private commitUpdate(def: ResourceDef, existing: Obj, incoming: Obj, part: 'main' | 'status' | 'meta'): Obj {
    let next: Obj;
    if (part === 'status') {
      next = clone(existing);
      next.status = clone(incoming.status);
      if (next.status === undefined) delete next.status;
    } else {
      next = clone(incoming);
      if (def.status && part === 'main') {
        if (existing.status === undefined) delete next.status;
        else next.status = clone(existing.status);
      }
      const md = { ...(incoming.metadata ?? {}) };
      // Immutable or server-owned metadata.
      md.name = existing.metadata.name;
      md.namespace = existing.metadata.namespace;
      md.uid = existing.metadata.uid;
      md.creationTimestamp = existing.metadata.creationTimestamp;
      if (part !== 'meta') {
        if (existing.metadata.deletionTimestamp) md.deletionTimestamp = existing.metadata.deletionTimestamp;
        else delete md.deletionTimestamp;
      }
      if (existing.metadata.deletionTimestamp) {
        const added = (md.finalizers ?? []).filter((f: string) => !(existing.metadata.finalizers ?? []).includes(f));
        if (added.length) throw new HttpError(422, 'Forbidden', 'no new finalizers can be added if the object is being deleted');
      }
      if (!md.finalizers || md.finalizers.length === 0) delete md.finalizers;
      next.metadata = md;
    }
    next.apiVersion = this.apiVersion(def);
    next.kind = def.kind;
    this.normalise(def, next);
    if (def.generation) {
      const changed = JSON.stringify(stripForCompare(existing, !def.status)) !== JSON.stringify(stripForCompare(next, !def.status));
      next.metadata.generation = (existing.metadata.generation ?? 1) + (changed ? 1 : 0);
    }
    next.metadata.resourceVersion = existing.metadata.resourceVersion;
    const store = this.objects.get(resKey(def))!;
    const key = `${existing.metadata.namespace}/${existing.metadata.name}`;
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers) {
      return this.commitDelete(def, next);
    }
    if (JSON.stringify(next) === JSON.stringify(existing)) return clone(existing); // no-op: no new RV, no event
    const rv = this.nextRv();
    next.metadata.resourceVersion = String(rv);
    store.set(key, next);
    this.record(def, rv, 'MODIFIED', next);
    this.afterWrite(def, next);
    return clone(store.get(key)!);
  }

  private commitDelete(def: ResourceDef, obj: Obj): Obj {
    const store = this.objects.get(resKey(def))!;
    store.delete(`${obj.metadata.namespace}/${obj.metadata.name}`);
    const rv = this.nextRv();
    const gone = clone(obj);
    gone.metadata.resourceVersion = String(rv);
    this.record(def, rv, 'DELETED', gone);
    return gone;
  }

  private normalise(def: ResourceDef, obj: Obj): void {
    const crd = this.schemas.get(resKey(def));
    if (crd) {
      const { metadata } = obj;
      delete obj.metadata; // ObjectMeta is not part of the CRD schema
      applyDefaultsAndPrune(crd.schema, obj);
      obj.metadata = metadata;
      const valid: boolean = crd.validate(structuredClone(obj));
      if (!valid) {
        const causes = (crd.validate.errors ?? []).map((e) => `${e.instancePath.slice(1).replace(/\//g, '.') || '<root>'}: ${e.message}`);
        throw new HttpError(422, 'Invalid', `${def.kind}.${def.group} "${metadata?.name}" is invalid: ${causes.join(', ')}`,
          { name: metadata?.name, group: def.group, kind: def.kind, causes: causes.map((message) => ({ message })) });
      }
    }
    if (def.kind === 'Secret' && obj.stringData) {
      obj.data = { ...(obj.data ?? {}) };
      for (const [k, v] of Object.entries(obj.stringData as Record<string, string>)) {
        obj.data[k] = Buffer.from(String(v), 'utf8').toString('base64');
      }
      delete obj.stringData;
    }
  }

  /** The StatefulSet "controller": observed replicas follow the desired count. */
  private afterWrite(def: ResourceDef, obj: Obj): void {
    if (!this.simulateSts || def.kind !== 'StatefulSet') return;
    const want = obj.spec?.replicas ?? 1;
    if (obj.status?.replicas === want && obj.status?.readyReplicas === want
      && obj.status?.observedGeneration === obj.metadata.generation) return;
    const next = clone(obj);
    next.status = { ...(obj.status ?? {}), replicas: want, readyReplicas: want, currentReplicas: want, observedGeneration: obj.metadata.generation };
    queueMicrotask(() => {
      const cur = this.objects.get(resKey(def))!.get(`${obj.metadata.namespace}/${obj.metadata.name}`);
      if (cur && cur.metadata.resourceVersion === obj.metadata.resourceVersion) this.commitUpdate(def, cur, next, 'status');
    });
  }

  private toScale(def: ResourceDef, obj: Obj): Obj {
    const s = def.scale!;
    return {
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: {
        name: obj.metadata.name,
        namespace: obj.metadata.namespace,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
        creationTimestamp: obj.metadata.creationTimestamp,
      },
      spec: { replicas: getPath(obj, s.specReplicasPath) ?? 0 },
      status: {
        replicas: getPath(obj, s.statusReplicasPath) ?? 0,
        ...(s.labelSelectorPath && getPath(obj, s.labelSelectorPath) ? { selector: getPath(obj, s.labelSelectorPath) } : {}),
      },
    };
  }

  private record(def: ResourceDef, rv: number, type: HistoryEntry['type'], obj: Obj): void {
    const entry: HistoryEntry = { rv, resKey: resKey(def), type, object: clone(obj) };
    this.history.push(entry);
    if (this.history.length > 10_000) {
      const dropped = this.history.splice(0, 5_000);
      this.compactedThrough = dropped[dropped.length - 1]!.rv;
    }
    for (const w of this.watches) this.deliver(w, entry);
  }

  private matches(w: Pick<WatchConn, 'resKey' | 'namespace' | 'fieldSelector' | 'labelSelector'>, k: string, obj: Obj): boolean {
    if (w.resKey !== k) return false;
    if (w.namespace && obj.metadata.namespace !== w.namespace) return false;
    for (const [f, v] of Object.entries(w.fieldSelector ?? {})) if (String(getPath(obj, f) ?? '') !== v) return false;
    for (const [l, v] of Object.entries(w.labelSelector ?? {})) if ((obj.metadata.labels ?? {})[l] !== v) return false;
    return true;
  }

  private deliver(w: WatchConn, e: HistoryEntry): void {
    if (w.closed || !this.matches(w, e.resKey, e.object)) return;
    w.res.write(JSON.stringify({ type: e.type, object: e.object }) + '\n');
  }

  private list(def: ResourceDef, namespace: string | undefined, url: URL, res: http.ServerResponse): void {
    const filter = {
      resKey: resKey(def),
      namespace,
      fieldSelector: parseSelector(url.searchParams.get('fieldSelector')),
      labelSelector: parseSelector(url.searchParams.get('labelSelector')),
    };
    const items = [...this.objects.get(resKey(def))!.values()]
      .filter((o) => this.matches(filter, resKey(def), o))
      .sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`));
    this.sendJson(res, 200, {
      apiVersion: this.apiVersion(def),
      kind: `${def.kind}List`,
      metadata: { resourceVersion: String(this.rv) },
      items,
    });
  }

  private watch(def: ResourceDef, namespace: string | undefined, url: URL, res: http.ServerResponse): void {
    if (!this.watchesEnabled) throw new HttpError(503, 'ServiceUnavailable', 'watches are disabled (test hook)');
    const rvParam = url.searchParams.get('resourceVersion') ?? '';
    const w: WatchConn = {
      resKey: resKey(def),
      namespace,
      fieldSelector: parseSelector(url.searchParams.get('fieldSelector')),
      labelSelector: parseSelector(url.searchParams.get('labelSelector')),
      bookmarks: url.searchParams.get('allowWatchBookmarks') === 'true',
      res,
      timers: [],
      closed: false,
    };
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache' });
    res.flushHeaders();
    if (rvParam === '' || rvParam === '0') {
      // "Get State and Start at Most Recent": synthetic ADDED for everything that exists.
      for (const o of this.objects.get(resKey(def))!.values()) {
        if (this.matches(w, w.resKey, o)) res.write(JSON.stringify({ type: 'ADDED', object: o }) + '\n');
      }
    } else {
      const from = Number(rvParam);
      if (!Number.isFinite(from) || from < this.compactedThrough) {
        res.write(JSON.stringify({
          type: 'ERROR',
          object: {
            kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
            message: `too old resource version: ${rvParam} (${this.compactedThrough})`, reason: 'Expired', code: 410,
          },
        }) + '\n');
        res.end();
        return;
      }
      for (const e of this.history) if (e.rv > from) this.deliver(w, e);
    }
    this.watches.add(w);
    res.on('close', () => this.closeWatch(w));
    const timeout = Number(url.searchParams.get('timeoutSeconds') ?? '0');
    if (timeout > 0) w.timers.push(setTimeout(() => this.closeWatch(w), timeout * 1000));
    if (w.bookmarks) {
      w.timers.push(setInterval(() => {
        if (w.closed) return;
        res.write(JSON.stringify({
          type: 'BOOKMARK',
          object: { kind: def.kind, apiVersion: this.apiVersion(def), metadata: { resourceVersion: String(this.rv) } },
        }) + '\n');
      }, this.bookmarkIntervalMs));
    }
  }

  private closeWatch(w: WatchConn): void {
    if (w.closed) return;
    w.closed = true;
    for (const t of w.timers) clearTimeout(t);
    this.watches.delete(w);
    w.res.end();
  }

  private notFound(def: ResourceDef, name: string): HttpError {
    return new HttpError(404, 'NotFound', `${def.plural}${def.group ? '.' + def.group : ''} "${name}" not found`,
      { name, group: def.group, kind: def.plural });
  }

  private conflict(def: ResourceDef, name: string): HttpError {
    return new HttpError(409, 'Conflict',
      `Operation cannot be fulfilled on ${def.plural}${def.group ? '.' + def.group : ''} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      { name, group: def.group, kind: def.plural });
  }

  private sendJson(res: http.ServerResponse, code: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  private sendError(_req: http.IncomingMessage, res: http.ServerResponse, err: HttpError): void {
    if (res.headersSent) {
      res.end();
      return;
    }
    this.sendJson(res, err.code, {
      kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
      message: err.message, reason: err.reason, code: err.code, ...(err.details ? { details: err.details } : {}),
    });
  }
}

/** Structural-schema defaulting and pruning (what the API server does before validation). */
export function applyDefaultsAndPrune(schema: Obj, value: any): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    if (schema.items) for (const v of value) applyDefaultsAndPrune(schema.items, v);
    return;
  }
  if (schema.properties) {
    for (const [k, sub] of Object.entries(schema.properties as Record<string, Obj>)) {
      if (value[k] === undefined && sub.default !== undefined) value[k] = structuredClone(sub.default);
      if (value[k] !== undefined) applyDefaultsAndPrune(sub, value[k]);
    }
    if (!schema['x-kubernetes-preserve-unknown-fields']) {
      for (const k of Object.keys(value)) if (!(k in schema.properties)) delete value[k];
    }
  } else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
    for (const v of Object.values(value)) applyDefaultsAndPrune(schema.additionalProperties, v);
  } else if (schema.type === 'object' && !schema['x-kubernetes-preserve-unknown-fields']) {
    for (const k of Object.keys(value)) delete value[k];
  }
}

function resKey(r: ResourceDef): string {
  return `${r.group}/${r.version}/${r.plural}`;
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function parseBody(body: Buffer, contentType: string | undefined): Obj {
  const text = body.toString('utf8');
  const ct = (contentType ?? 'application/json').split(';')[0]!.trim();
  try {
    const v = ct.includes('yaml') ? parseYaml(text) : JSON.parse(text);
    if (v === null || typeof v !== 'object') throw new Error('body is not an object');
    return v as Obj;
  } catch (err) {
    throw new HttpError(400, 'BadRequest', `cannot decode body: ${(err as Error).message}`);
  }
}

function applyPatch(existing: Obj, body: Buffer, contentType: string | undefined): Obj {
  const ct = (contentType ?? '').split(';')[0]!.trim();
  switch (ct) {
    case 'application/json-patch+json':
      return jsonPatch(existing, JSON.parse(body.toString('utf8')) as any[]);
    case 'application/merge-patch+json':
    case 'application/strategic-merge-patch+json':
      return mergePatch(existing, parseBody(body, 'application/json'));
    case 'application/apply-patch+yaml':
      return mergePatch(existing, parseBody(body, 'application/yaml'));
    default:
      throw new HttpError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`);
  }
}

/** The CRD documents checked in under crds/ (for `new FakeKubeServer({crds: loadCrds()})`). */
export function loadCrds(dir = new URL('../../crds/', import.meta.url)): Obj[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => parseYaml(readFileSync(new URL(f, dir), 'utf8')) as Obj);
}
