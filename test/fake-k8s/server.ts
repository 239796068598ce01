/**
 * A fake Kubernetes API server for tests: plain node:http speaking the real REST, watch,
 * discovery and OpenAPI protocols for the resources Playflow uses, so the real
 * `@kubernetes/client-node` and the real kubectl run unmodified against it, and strict where the
 * operator and kubectl depend on the real server's behaviour. What it implements and where it
 * still differs from a real API server: README.md beside this file.
 *
 * Test hooks: `compact()` (expire history), `dropWatches()`, `setWatchesEnabled(false)`,
 * `requests` (every call with its bearer token), `denied` (requests RBAC refused), `failNext()`,
 * `getObject` / `putObject` / `listObjects` / `createNamespace`, `kubeConfig(token)`,
 * `writeKubeconfig(token)`, `serviceAccountToken(ns, name)`, `userToken(name)`, `adminToken`.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { KubeConfig } from '@kubernetes/client-node';
import {
  SERVER_VERSION, apiGroup, apiGroupList, apiResourceList, apiVersions, openApiV3, openApiV3Root,
} from './discovery.js';
import {
  HttpError, alreadyExists, conflict, forbidden, invalid, invalidRaw, notFound, statusOf,
} from './errors.js';
import { nameErrors } from './names.js';
import { applyPatch, checkPatchType, mediaType, parseBody } from './patch.js';
import { ADMIN_USER, RbacAuthorizer, forbiddenReason, serviceAccountUser, type Attributes, type UserInfo } from './rbac.js';
import {
  apiVersionOf, crdVersion, formatLabelSelector, isNamespaced, qualifiedResource, resKey, resourcesFor, type Obj, type ResourceDef,
} from './resources.js';
import { CrdSchema } from './schema.js';
import { toTable, wantsTable, type IncludeObject } from './table.js';
import { tlsMaterial } from './tls.js';
import { WatchHub, filterOf, getPath, matches, parseSelector, type HistoryEntry } from './watch.js';
import { ListSnapshots, byKey, decodeContinue, encodeContinue, firstAfter, parseLimit } from './paging.js';

export { DEFAULT_RESOURCES, type Obj, type ResourceDef } from './resources.js';
export { jsonPatch, mergePatch, strategicMerge } from './patch.js';
export { applyDefaultsAndPrune } from './schema.js';
export type { UserInfo } from './rbac.js';

export interface RequestRecord {
  method: string;
  path: string;
  query: string;
  contentType?: string;
  /** Bearer token of the caller ('' when none). */
  token: string;
  status: number;
}

/** A request RBAC refused. */
export interface DeniedRecord {
  user: string;
  verb: string;
  method: string;
  path: string;
  namespace: string;
  resource: string;
  name: string;
  message: string;
}

export interface FakeKubeOptions {
  /** Resource kinds served; default the built-ins plus the CRDs' kinds (or Playflow's, schema-less). */
  resources?: ResourceDef[];
  /** How often a BOOKMARK is sent on watches that allow them. Default 1000 ms. */
  bookmarkIntervalMs?: number;
  /** Mirror a StatefulSet's spec.replicas into status.replicas/readyReplicas, like its controller. Default true. */
  simulateStatefulSetController?: boolean;
  /**
   * CustomResourceDefinition documents: their kinds are served as the CRDs declare them (scope,
   * subresources, printer columns, short names), and writes are pruned, defaulted and validated
   * against the openAPIV3Schema and its x-kubernetes-validations CEL rules.
   */
  crds?: Obj[];
  /**
   * Turns RBAC on, and loads these documents first (ServiceAccounts, Roles, RoleBindings,
   * ClusterRoles, ClusterRoleBindings, Namespaces…; null documents and unknown kinds are skipped,
   * missing namespaces are created; see releaseNamespace). Requests then need a known token:
   * `serviceAccountToken()`, `userToken()` or `adminToken`; unknown tokens get 401.
   */
  rbac?: Array<Obj | null | undefined>;
  /** Namespace of `rbac` documents that name none (`helm template` leaves it out). Default 'default'. */
  releaseNamespace?: string;
  /** Namespaces to create besides default, kube-system, kube-public and kube-node-lease. */
  namespaces?: string[];
  /**
   * Serve HTTPS (self-signed; kubeconfigs skip verification). Default: on when `rbac` is set,
   * because kubectl sends a kubeconfig's token only over TLS.
   */
  tls?: boolean;
}

const clone = <T>(v: T): T => structuredClone(v);
const now = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

function setPath(obj: Obj, dotted: string, value: unknown): void {
  const parts = dotted.split('.');
  let cur: any = obj;
  for (const part of parts.slice(0, -1)) {
    if (cur[part] == null || typeof cur[part] !== 'object') cur[part] = {};
    cur = cur[part];
  }
  cur[parts[parts.length - 1]!] = value;
}

/** What generation tracks: everything but metadata (and status, when it has its own endpoint). */
function specOf(o: Obj, hasStatusEndpoint: boolean): string {
  const { metadata: _m, apiVersion: _a, kind: _k, ...rest } = o;
  if (hasStatusEndpoint) delete rest.status;
  return JSON.stringify(rest);
}

/** `?dryRun=All`: validate and answer as if written, store nothing (kubectl diff, apply --dry-run=server). */
const isDryRun = (url: URL | undefined): boolean => url?.searchParams.getAll('dryRun').includes('All') ?? false;

const storeKey = (namespace: string | undefined, name: string): string => `${namespace ?? ''}/${name}`;

interface Route {
  def: ResourceDef;
  namespace?: string;
  name?: string;
  sub?: string;
}

type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

export class FakeKubeServer {
  readonly resources: ResourceDef[];
  /** Every request, in order. */
  readonly requests: RequestRecord[] = [];
  /** Requests RBAC refused, in order (empty unless the `rbac` option is set). */
  readonly denied: DeniedRecord[] = [];
  /** With RBAC on, this token is system:admin (system:masters): everything is allowed. */
  readonly adminToken = 'fake-admin-token';
  private readonly server: http.Server | https.Server;
  /** Folders writeKubeconfig made (temporary; removed by stop()). */
  private readonly kubeconfigDirs: string[] = [];
  private readonly tls: boolean;
  private readonly objects = new Map<string, Map<string, Obj>>(); // resKey -> "ns/name" -> obj
  private rv = 1;
  private readonly hub: WatchHub;
  /** Collections as of the first page of each paginated list (paging.ts). */
  private readonly snapshots = new ListSnapshots();
  private injected: Array<{ match: (method: string, path: string, token: string) => boolean; code: number; times: number }> = [];
  private readonly simulateSts: boolean;
  private readonly schemas = new Map<string, CrdSchema>();
  private readonly rbac?: RbacAuthorizer;
  private readonly tokens = new Map<string, UserInfo>();
  url = '';

  constructor(opts: FakeKubeOptions = {}) {
    this.resources = opts.resources ?? resourcesFor(opts.crds);
    this.hub = new WatchHub(opts.bookmarkIntervalMs ?? 1000, () => this.rv);
    this.simulateSts = opts.simulateStatefulSetController ?? true;
    for (const r of this.resources) this.objects.set(resKey(r), new Map());
    if (opts.crds?.length) {
      const ajv = CrdSchema.ajv();
      for (const crd of opts.crds) {
        const def = this.resources.find((r) => r.group === crd.spec.group && r.kind === crd.spec.names.kind);
        if (def) this.schemas.set(resKey(def), new CrdSchema(crdVersion(crd).schema.openAPIV3Schema, ajv));
      }
    }
    this.createNamespace('default', 'kube-system', 'kube-public', 'kube-node-lease', ...(opts.namespaces ?? []));
    if (opts.rbac) {
      this.rbac = new RbacAuthorizer((plural, namespace) => this.listObjects(plural, namespace, 'rbac.authorization.k8s.io'));
      this.tokens.set(this.adminToken, ADMIN_USER);
      this.load(opts.rbac.filter((d): d is Obj => d != null && typeof d === 'object'), opts.releaseNamespace ?? 'default');
    }
    const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      this.handle(req, res).catch((err: unknown) => {
        this.sendError(res, err instanceof HttpError ? err : new HttpError(500, 'InternalError', String(err)));
      });
    };
    this.tls = opts.tls ?? Boolean(opts.rbac);
    this.server = this.tls ? https.createServer(tlsMaterial(), listener) : http.createServer(listener);
  }

  async start(port = 0): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', resolve);
    });
    const { port: p } = this.server.address() as AddressInfo;
    this.url = `${this.tls ? 'https' : 'http'}://127.0.0.1:${p}`;
    return this.url;
  }

  async stop(): Promise<void> {
    for (const dir of this.kubeconfigDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    this.hub.dropAll();
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

  /**
   * Writes a kubeconfig for `token` (see `kubeConfig`) to a new temporary directory and returns its
   * path, for the real kubectl (test/helpers/kubectl.ts).
   */
  writeKubeconfig(token = 'test-token', namespace = 'default'): string {
    const dir = mkdtempSync(path.join(tmpdir(), 'fake-kube-'));
    this.kubeconfigDirs.push(dir); // stop() removes them (kubectl also caches discovery under <dir>/.kube)
    const file = path.join(dir, 'kubeconfig');
    writeFileSync(file, this.kubeConfig(token, namespace).exportConfig(), { mode: 0o600 });
    return file;
  }

  /** A bearer token the server maps to `system:serviceaccount:<namespace>:<name>`. */
  serviceAccountToken(namespace: string, name: string): string {
    const token = `fake-sa.${namespace}.${name}.${randomBytes(6).toString('hex')}`;
    this.tokens.set(token, serviceAccountUser(namespace, name));
    return token;
  }

  /** A bearer token the server maps to the user `name` in `groups` (plus system:authenticated). */
  userToken(name: string, groups: string[] = []): string {
    const token = `fake-user.${name}.${randomBytes(6).toString('hex')}`;
    this.tokens.set(token, { name, groups: [...groups, 'system:authenticated'] });
    return token;
  }

  /** Current (latest) resourceVersion. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Forget every event so far: watches resuming from an older resourceVersion get 410 Gone. */
  compact(): void {
    this.hub.compact();
    this.snapshots.clear();
  }

  /** Close every open watch connection (clients see the stream end). */
  dropWatches(): void {
    this.hub.dropAll();
  }

  /** Sends an ERROR event with a Status of `code` on every open watch, then closes them. */
  failWatches(code = 500, reason = code === 410 ? 'Expired' : 'InternalError'): void {
    this.hub.failAll(code, reason);
  }

  /** While disabled, new watch requests get 503 (existing ones are dropped). */
  setWatchesEnabled(enabled: boolean): void {
    this.hub.enabled = enabled;
    if (!enabled) this.hub.dropAll();
  }

  get openWatches(): number {
    return this.hub.open;
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

  /** Creates these namespaces (Active) when they do not exist yet. */
  createNamespace(...names: string[]): void {
    const def = this.findByPlural('namespaces', '');
    for (const name of names) {
      if (!this.objects.get(resKey(def))!.has(storeKey(undefined, name))) {
        this.commitCreate(def, undefined, { metadata: { name }, spec: { finalizers: ['kubernetes'] }, status: { phase: 'Active' } }, true);
      }
    }
  }

  getObject(plural: string, namespace: string | undefined, name: string, group?: string): Obj | undefined {
    const r = this.findByPlural(plural, group);
    const o = this.objects.get(resKey(r))!.get(storeKey(isNamespaced(r) ? namespace : undefined, name));
    return o ? clone(o) : undefined;
  }

  listObjects(plural: string, namespace?: string, group?: string): Obj[] {
    const r = this.findByPlural(plural, group);
    return [...this.objects.get(resKey(r))!.values()]
      .filter((o) => namespace === undefined || !isNamespaced(r) || o.metadata.namespace === namespace)
      .map(clone);
  }

  /**
   * Creates or replaces an object directly (no preconditions, status kept), emitting the watch
   * event. The object's namespace must exist (`createNamespace`), as for any create.
   */
  putObject(plural: string, obj: Obj, group?: string): Obj {
    const r = this.findByPlural(plural, group);
    const ns = isNamespaced(r) ? obj.metadata?.namespace ?? 'default' : undefined;
    const existing = this.objects.get(resKey(r))!.get(storeKey(ns, obj.metadata.name));
    if (existing) {
      const next = clone(obj);
      next.metadata = { ...existing.metadata, ...next.metadata, resourceVersion: existing.metadata.resourceVersion };
      const updated = this.commitUpdate(r, existing, next, 'main');
      return next.status !== undefined && r.status ? this.commitUpdate(r, this.stored(r, ns, obj.metadata.name)!, next, 'status') : updated;
    }
    if (ns !== undefined) this.checkNamespace(r, ns, obj.metadata.name);
    return this.commitCreate(r, ns, clone(obj), true);
  }

  // ---------------------------------------------------------------------------------------------

  /** Loads documents as an admin would `kubectl apply` them, creating missing namespaces. */
  private load(docs: Obj[], releaseNamespace: string): void {
    for (const doc of docs) {
      const def = this.resources.find((r) => apiVersionOf(r) === doc.apiVersion && r.kind === doc.kind);
      if (!def) continue;
      const ns = isNamespaced(def) ? doc.metadata?.namespace ?? releaseNamespace : undefined;
      if (ns) this.createNamespace(ns);
      this.putObject(def.plural, { ...doc, metadata: { ...doc.metadata, ...(ns ? { namespace: ns } : {}) } }, def.group);
    }
  }

  private stored(def: ResourceDef, namespace: string | undefined, name: string): Obj | undefined {
    return this.objects.get(resKey(def))!.get(storeKey(namespace, name));
  }

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

    let user: UserInfo | undefined;
    if (this.rbac) {
      user = this.tokens.get(rec.token);
      if (!user) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
    }

    if (method === 'GET' && this.serveNonResource(url, req, res)) return;

    const route = this.route(url.pathname);
    const { def, namespace, name, sub } = route;
    const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const verb = this.verbOf(method, Boolean(name), watch);
    if (user) this.authorize(user, verb, route, url, rec);
    if (name && sub === 'scale') return this.serveScale(def, namespace, name, method, body, rec, res, url);
    if (sub && !(sub === 'status' && def.status)) {
      throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${url.pathname})`);
    }
    const part: 'main' | 'status' = sub === 'status' ? 'status' : 'main';
    const asTable = wantsTable(req.headers.accept);
    const include = (url.searchParams.get('includeObject') ?? 'Metadata') as IncludeObject;

    switch (verb) {
      case 'watch':
        return this.watch(def, namespace, url, res, name);
      case 'list':
        return this.list(def, namespace, url, res, asTable, include);
      case 'get': {
        const o = this.stored(def, namespace, name!);
        if (!o) throw notFound(def, name!);
        return this.sendJson(res, 200, asTable ? toTable(def, [o], o.metadata.resourceVersion, include) : o);
      }
      case 'create': {
        if (part !== 'main') throw new HttpError(405, 'MethodNotAllowed', 'create is not allowed on a subresource');
        const obj = parseBody(body, rec.contentType);
        const { out, warnings } = this.create(def, namespace, obj, url);
        return this.sendJson(res, 201, out, warnings);
      }
      case 'update':
        return this.update(def, namespace, name!, part, parseBody(body, rec.contentType), url, res);
      case 'patch':
        return this.patch(def, namespace, name!, part, body, rec.contentType, url, res);
      case 'delete':
        if (part !== 'main') throw new HttpError(405, 'MethodNotAllowed', 'delete is not allowed on a subresource');
        if (isDryRun(url)) {
          const o = this.stored(def, namespace, name!);
          if (!o) throw notFound(def, name!);
          return this.sendJson(res, 200, o);
        }
        return this.sendJson(res, 200, this.delete(def, namespace, name!, body));
      case 'deletecollection': {
        const items = this.select(def, namespace, url);
        if (!isDryRun(url)) for (const o of items) this.delete(def, o.metadata.namespace, o.metadata.name, Buffer.alloc(0));
        return this.sendJson(res, 200, { apiVersion: apiVersionOf(def), kind: `${def.kind}List`, metadata: { resourceVersion: String(this.rv) }, items });
      }
    }
  }

  /** Discovery, OpenAPI, version and health: answered for every authenticated caller. */
  private serveNonResource(url: URL, req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const p = url.pathname.replace(/\/+$/, '') || '/';
    const schemaOf = (r: ResourceDef): Obj | undefined => this.schemas.get(resKey(r))?.schema;
    let body: unknown;
    if (p === '/version') body = SERVER_VERSION;
    else if (p === '/healthz' || p === '/readyz' || p === '/livez') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('ok');
      return true;
    } else if (p === '/api') body = apiVersions(req.headers.host ?? '127.0.0.1');
    else if (p === '/apis') body = apiGroupList(this.resources);
    else if (p === '/openapi/v3') body = openApiV3Root(this.resources, schemaOf);
    else if (p.startsWith('/openapi/v3/')) {
      const rel = p.slice('/openapi/v3/'.length);
      body = openApiV3(this.resources, rel.replace(/^apis?\//, ''), schemaOf);
      if (!body) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${p})`);
    } else {
      const m = /^\/(?:api\/(v1)|apis\/([^/]+)(?:\/([^/]+))?)$/.exec(p);
      if (!m) return false;
      if (m[1]) body = apiResourceList(this.resources, m[1]);
      else if (m[3]) body = apiResourceList(this.resources, `${m[2]}/${m[3]}`);
      else body = apiGroup(this.resources, m[2]!);
      if (!body) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${p})`);
    }
    this.sendJson(res, 200, body);
    return true;
  }

  /** The request verb as the real server's RequestInfo computes it. */
  private verbOf(method: string, named: boolean, watch: boolean): Verb {
    switch (method) {
      case 'GET': return watch ? 'watch' : named ? 'get' : 'list';
      case 'POST':
        if (named) throw new HttpError(405, 'MethodNotAllowed', 'POST is not allowed on a named resource');
        return 'create';
      case 'PUT': case 'PATCH':
        if (!named) throw new HttpError(405, 'MethodNotAllowed', `${method} is not allowed on a collection`);
        return method === 'PUT' ? 'update' : 'patch';
      case 'DELETE': return named ? 'delete' : 'deletecollection';
      default: throw new HttpError(405, 'MethodNotAllowed', `${method} is not allowed`);
    }
  }

  private authorize(user: UserInfo, verb: Verb, route: Route, url: URL, rec: RequestRecord): void {
    const { def, namespace, sub } = route;
    let name = route.name ?? '';
    // A list or watch narrowed to one name is authorized against that name (resourceNames).
    if (!name && (verb === 'list' || verb === 'watch')) name = parseSelector(url.searchParams.get('fieldSelector'))?.['metadata.name'] ?? '';
    const a: Attributes = {
      user, verb, namespace: namespace ?? '', apiGroup: def.group, resource: def.plural, subresource: sub ?? '', name,
    };
    if (this.rbac!.authorize(a)) return;
    const err = forbidden(def, route.name, forbiddenReason(a));
    this.denied.push({
      user: user.name, verb, method: rec.method, path: rec.path, namespace: a.namespace,
      resource: sub ? `${def.plural}/${sub}` : def.plural, name, message: err.message,
    });
    throw err;
  }

  private route(pathname: string): Route {
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
    // /namespaces/{ns}/{plural}/… is a namespaced path; /namespaces/{name}[/status] the Namespace itself.
    if (rest[0] === 'namespaces' && rest.length >= 3 && rest[2] !== 'status' && rest[2] !== 'finalize') {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [plural, name, sub, ...extra] = rest;
    const def = this.resources.find((r) => r.group === group && r.version === version && r.plural === plural);
    if (!def || extra.length || (namespace !== undefined && !isNamespaced(def))) {
      throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${pathname})`);
    }
    if (name && isNamespaced(def) && namespace === undefined) {
      throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${pathname})`);
    }
    return { def, namespace, name, sub };
  }

  /** Creating in a namespace needs it to exist and not be terminating. */
  private checkNamespace(def: ResourceDef, namespace: string, name: string | undefined): void {
    const ns = this.stored(this.findByPlural('namespaces', ''), undefined, namespace);
    if (!ns) throw new HttpError(404, 'NotFound', `namespaces "${namespace}" not found`, { name: namespace, kind: 'namespaces' });
    if (ns.metadata.deletionTimestamp) {
      throw new HttpError(403, 'Forbidden',
        `${qualifiedResource(def)}${name ? ` "${name}"` : ''} is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
        { ...(name ? { name } : {}), group: def.group, kind: def.plural });
    }
  }

  private create(def: ResourceDef, namespace: string | undefined, obj: Obj, url: URL): { out: Obj; warnings: string[] } {
    if (isNamespaced(def)) {
      if (namespace === undefined) throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
      if (obj.metadata?.namespace && obj.metadata.namespace !== namespace) {
        throw new HttpError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
      }
    }
    obj.metadata = { ...(obj.metadata ?? {}) };
    if (!obj.metadata.name) {
      if (!obj.metadata.generateName) throw invalid(def, '', [{ type: 'FieldValueRequired', field: 'metadata.name', body: 'Required value: name or generateName is required' }]);
      obj.metadata.name = `${obj.metadata.generateName}${randomBytes(3).toString('hex').slice(0, 5)}`;
    }
    const errs = nameErrors(def, obj.metadata.name);
    if (errs.length) throw invalid(def, obj.metadata.name, errs);
    if (namespace !== undefined) this.checkNamespace(def, namespace, obj.metadata.name);
    if (this.stored(def, namespace, obj.metadata.name)) throw alreadyExists(def, obj.metadata.name);
    // A status subresource means the create body's status is dropped (PrepareForCreate).
    if (def.status) delete obj.status;
    const warnings = this.normalise(def, obj, undefined, url);
    if (isDryRun(url)) return { out: this.preview(def, namespace, obj), warnings };
    return { out: this.commitCreate(def, namespace, obj, false), warnings };
  }

  private update(def: ResourceDef, namespace: string | undefined, name: string, part: 'main' | 'status', obj: Obj, url: URL, res: http.ServerResponse): void {
    if (obj.metadata?.name && obj.metadata.name !== name) {
      throw new HttpError(400, 'BadRequest', `the name of the object (${obj.metadata.name}) does not match the name on the URL (${name})`);
    }
    const existing = this.stored(def, namespace, name);
    if (!existing) {
      // Only a few kinds let PUT create (AllowCreateOnUpdate); custom resources never do.
      if (!def.createOnUpdate || part !== 'main') throw notFound(def, name);
      const { out, warnings } = this.create(def, namespace, { ...obj, metadata: { ...obj.metadata, name } }, url);
      return this.sendJson(res, 201, out, warnings);
    }
    const rv = obj.metadata?.resourceVersion;
    if (!rv && (def.custom || def.kind === 'Lease')) {
      // AllowUnconditionalUpdate is false for custom resources and Leases.
      throw invalid(def, name, [invalidRaw('metadata.resourceVersion', '0x0', 'must be specified for an update')]);
    }
    if (rv && rv !== existing.metadata.resourceVersion) throw conflict(def, name);
    const { out, warnings } = this.commitUpdateChecked(def, existing, obj, part, url);
    this.sendJson(res, 200, out, warnings);
  }

  private patch(def: ResourceDef, namespace: string | undefined, name: string, part: 'main' | 'status', body: Buffer,
    contentType: string | undefined, url: URL, res: http.ServerResponse): void {
    checkPatchType(def, contentType);
    const existing = this.stored(def, namespace, name);
    if (!existing) {
      // Server-side apply creates; every other patch of a missing object is 404.
      if (mediaType(contentType) === 'application/apply-patch+yaml' && part === 'main') {
        const obj = parseBody(body, 'application/yaml');
        const { out, warnings } = this.create(def, namespace, { ...obj, metadata: { ...obj.metadata, name } }, url);
        return this.sendJson(res, 201, out, warnings);
      }
      throw notFound(def, name);
    }
    const patched = applyPatch(def, existing, body, contentType);
    const rv = patched.metadata?.resourceVersion;
    if (rv && rv !== existing.metadata.resourceVersion) throw conflict(def, name);
    const { out, warnings } = this.commitUpdateChecked(def, existing, patched, part, url);
    this.sendJson(res, 200, out, warnings);
  }

  private delete(def: ResourceDef, namespace: string | undefined, name: string, body: Buffer): Obj {
    const existing = this.stored(def, namespace, name);
    if (!existing) throw notFound(def, name);
    const opts = body.length ? parseBody(body, 'application/json') : {};
    const pre = opts.preconditions ?? {};
    if (pre.resourceVersion && pre.resourceVersion !== existing.metadata.resourceVersion) throw conflict(def, name);
    if (pre.uid && pre.uid !== existing.metadata.uid) throw conflict(def, name);
    if (def.kind === 'Namespace' && !def.group) return this.terminateNamespace(def, existing);
    if ((existing.metadata.finalizers ?? []).length > 0) return this.startDeletion(def, existing);
    return this.commitDelete(def, existing);
  }

  /** Deletion with finalizers pending: deletionTimestamp set and generation bumped, as BeforeDelete does. */
  private startDeletion(def: ResourceDef, existing: Obj): Obj {
    if (existing.metadata.deletionTimestamp) return clone(existing);
    const next = clone(existing);
    next.metadata.deletionTimestamp = now();
    next.metadata.deletionGracePeriodSeconds = 0;
    if (next.metadata.generation) next.metadata.generation += 1;
    return this.commitUpdate(def, existing, next, 'meta');
  }

  /** Namespace deletion: Terminating, its objects deleted (finalizers honoured), gone when empty. */
  private terminateNamespace(def: ResourceDef, ns: Obj): Obj {
    const name = ns.metadata.name as string;
    let out = clone(ns);
    if (!ns.metadata.deletionTimestamp) {
      const next = clone(ns);
      next.metadata.deletionTimestamp = now();
      next.status = { ...(next.status ?? {}), phase: 'Terminating' };
      out = this.commitUpdate(def, ns, next, 'meta');
    }
    for (const r of this.resources.filter(isNamespaced)) {
      for (const o of [...this.objects.get(resKey(r))!.values()]) {
        if (o.metadata.namespace !== name) continue;
        if ((o.metadata.finalizers ?? []).length) this.startDeletion(r, o);
        else this.commitDelete(r, o);
      }
    }
    this.reapNamespace(name);
    return out;
  }

  private reapNamespace(name: string): void {
    const def = this.findByPlural('namespaces', '');
    const ns = this.stored(def, undefined, name);
    if (!ns?.metadata.deletionTimestamp) return;
    const empty = this.resources.filter(isNamespaced)
      .every((r) => ![...this.objects.get(resKey(r))!.values()].some((o) => o.metadata.namespace === name));
    if (empty) this.commitDelete(def, ns);
  }

  private serveScale(def: ResourceDef, namespace: string | undefined, name: string, method: string, body: Buffer,
    rec: RequestRecord, res: http.ServerResponse, url: URL): void {
    if (!def.scale) throw new HttpError(404, 'NotFound', `the server could not find the requested resource`);
    if (method === 'PATCH') checkPatchType(def, rec.contentType);
    const existing = this.stored(def, namespace, name);
    if (!existing) throw notFound(def, name);
    if (method === 'GET') return this.sendJson(res, 200, this.toScale(def, existing));
    let scale: Obj;
    if (method === 'PUT') {
      scale = parseBody(body, rec.contentType);
      const rv = scale.metadata?.resourceVersion;
      if (rv && rv !== existing.metadata.resourceVersion) throw conflict(def, name);
    } else if (method === 'PATCH') {
      scale = applyPatch(def, this.toScale(def, existing), body, rec.contentType);
      const rv = scale.metadata?.resourceVersion;
      if (rv && rv !== existing.metadata.resourceVersion) throw conflict(def, name);
    } else throw new HttpError(405, 'MethodNotAllowed', `${method} is not allowed on scale`);
    const replicas = scale.spec?.replicas;
    if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
      throw new HttpError(422, 'Invalid', `Scale.autoscaling "${name}" is invalid: spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
        { name, group: 'autoscaling', kind: 'Scale', causes: [{ reason: 'FieldValueInvalid', field: 'spec.replicas', message: `Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0` }] });
    }
    const next = clone(existing);
    setPath(next, def.scale.specReplicasPath, replicas);
    const { out } = this.commitUpdateChecked(def, existing, next, 'main', url);
    this.sendJson(res, 200, this.toScale(def, out));
  }

  /** What a dry-run create returns: the object as it would be stored, nothing stored. */
  private preview(def: ResourceDef, namespace: string | undefined, obj: Obj): Obj {
    const out = clone(obj);
    out.apiVersion = apiVersionOf(def);
    out.kind = def.kind;
    if (namespace !== undefined) out.metadata.namespace = namespace;
    out.metadata.uid = randomUUID();
    out.metadata.creationTimestamp = now();
    if (def.generation) out.metadata.generation = 1;
    return out;
  }

  private commitCreate(def: ResourceDef, namespace: string | undefined, obj: Obj, direct: boolean): Obj {
    if (direct) this.normalise(def, obj);
    const rv = this.nextRv();
    obj.apiVersion = apiVersionOf(def);
    obj.kind = def.kind;
    const md = obj.metadata;
    if (namespace !== undefined) md.namespace = namespace;
    else delete md.namespace;
    md.uid = randomUUID();
    md.creationTimestamp = now();
    md.resourceVersion = String(rv);
    delete md.deletionTimestamp;
    if (def.generation) md.generation = 1;
    if (!md.finalizers?.length) delete md.finalizers;
    this.objects.get(resKey(def))!.set(storeKey(namespace, md.name), obj);
    this.record(def, rv, 'ADDED', obj);
    this.afterWrite(def, obj);
    return clone(obj);
  }

  /** An update through the API: schema, CEL and fieldValidation before commitUpdate. */
  private commitUpdateChecked(def: ResourceDef, existing: Obj, incoming: Obj, part: 'main' | 'status', url?: URL): { out: Obj; warnings: string[] } {
    const next = this.merged(def, existing, incoming, part);
    const warnings = this.normalise(def, next, existing, url);
    this.bumpGeneration(def, existing, next);
    if (isDryRun(url)) return { out: next, warnings };
    return { out: this.commitUpdate(def, existing, next, 'meta'), warnings };
  }

  /**
   * The object an update would store. part 'main': spec etc. (status kept from the stored object
   * when the resource has a status subresource); 'status': only status taken from `incoming`;
   * 'meta': the incoming object as is (internal).
   */
  private merged(def: ResourceDef, existing: Obj, incoming: Obj, part: 'main' | 'status' | 'meta'): Obj {
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
      if (existing.metadata.namespace !== undefined) md.namespace = existing.metadata.namespace;
      md.uid = existing.metadata.uid;
      md.creationTimestamp = existing.metadata.creationTimestamp;
      if (part !== 'meta') {
        if (existing.metadata.deletionTimestamp) md.deletionTimestamp = existing.metadata.deletionTimestamp;
        else delete md.deletionTimestamp;
      }
      if (existing.metadata.deletionTimestamp) {
        const added = (md.finalizers ?? []).filter((f: string) => !(existing.metadata.finalizers ?? []).includes(f));
        if (added.length) throw invalid(def, existing.metadata.name, [{ type: 'FieldValueForbidden', field: 'metadata.finalizers', body: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f: string) => JSON.stringify(f)).join(', ')}}` }]);
      }
      if (!md.finalizers || md.finalizers.length === 0) delete md.finalizers;
      next.metadata = md;
    }
    next.apiVersion = apiVersionOf(def);
    next.kind = def.kind;
    return next;
  }

  /** Generation moves only when what it tracks changed (after pruning and defaulting). */
  private bumpGeneration(def: ResourceDef, existing: Obj, next: Obj): void {
    if (!def.generation) return;
    const base = existing.metadata.generation ?? 1;
    next.metadata.generation = specOf(existing, Boolean(def.status)) !== specOf(next, Boolean(def.status)) ? base + 1 : base;
  }

  private commitUpdate(def: ResourceDef, existing: Obj, incoming: Obj, part: 'main' | 'status' | 'meta'): Obj {
    const next = part === 'meta' ? clone(incoming) : this.merged(def, existing, incoming, part);
    if (part !== 'meta') {
      this.normalise(def, next, existing);
      this.bumpGeneration(def, existing, next);
    }
    next.metadata.resourceVersion = existing.metadata.resourceVersion;
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length && !(def.kind === 'Namespace' && !def.group)) {
      return this.commitDelete(def, next);
    }
    if (JSON.stringify(next) === JSON.stringify(existing)) return clone(existing); // no-op: no new RV, no event
    const rv = this.nextRv();
    next.metadata.resourceVersion = String(rv);
    const key = storeKey(existing.metadata.namespace, existing.metadata.name);
    this.objects.get(resKey(def))!.set(key, next);
    this.record(def, rv, 'MODIFIED', next);
    this.afterWrite(def, next);
    return clone(next);
  }

  private commitDelete(def: ResourceDef, obj: Obj): Obj {
    this.objects.get(resKey(def))!.delete(storeKey(obj.metadata.namespace, obj.metadata.name));
    const rv = this.nextRv();
    const gone = clone(obj);
    gone.metadata.resourceVersion = String(rv);
    this.record(def, rv, 'DELETED', gone);
    if (isNamespaced(def) && obj.metadata.namespace) this.reapNamespace(obj.metadata.namespace);
    return gone;
  }

  /**
   * What the server does to a body before storing it: custom resources pruned, defaulted and
   * validated (schema and CEL; 422 Invalid), unknown fields refused or reported per
   * `fieldValidation` (Strict: 400; Warn, the default: a Warning header; Ignore); Secrets'
   * stringData folded into data. Returns the warnings.
   */
  private normalise(def: ResourceDef, obj: Obj, old?: Obj, url?: URL): string[] {
    const warnings: string[] = [];
    const schema = this.schemas.get(resKey(def));
    if (schema) {
      const { unknownFields, errors } = schema.process(obj, old);
      const mode = url?.searchParams.get('fieldValidation') ?? 'Warn';
      if (unknownFields.length && mode === 'Strict') {
        throw new HttpError(400, 'BadRequest',
          `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: strict decoding error: ${unknownFields.map((f) => `unknown field "${f}"`).join(', ')}`);
      }
      if (mode === 'Warn') warnings.push(...unknownFields.map((f) => `unknown field "${f}"`));
      if (errors.length) throw invalid(def, obj.metadata?.name ?? '', errors);
    }
    if (def.kind === 'Secret' && obj.stringData) {
      obj.data = { ...(obj.data ?? {}) };
      for (const [k, v] of Object.entries(obj.stringData as Record<string, string>)) {
        obj.data[k] = Buffer.from(String(v), 'utf8').toString('base64');
      }
      delete obj.stringData;
    }
    return warnings;
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
      const cur = this.stored(def, obj.metadata.namespace, obj.metadata.name);
      if (cur && cur.metadata.resourceVersion === obj.metadata.resourceVersion) this.commitUpdate(def, cur, next, 'status');
    });
  }

  /** autoscaling/v1 Scale; status.selector from labelSelectorPath (a LabelSelector rendered to a string). */
  private toScale(def: ResourceDef, obj: Obj): Obj {
    const s = def.scale!;
    const rawSelector = s.labelSelectorPath ? getPath(obj, s.labelSelectorPath) : undefined;
    const selector = typeof rawSelector === 'string' ? rawSelector
      : rawSelector && typeof rawSelector === 'object' ? formatLabelSelector(rawSelector) : '';
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
      status: { replicas: getPath(obj, s.statusReplicasPath) ?? 0, ...(selector ? { selector } : {}) },
    };
  }

  private record(def: ResourceDef, rv: number, type: HistoryEntry['type'], obj: Obj): void {
    this.hub.record({ rv, resKey: resKey(def), type, object: clone(obj) });
  }

  private select(def: ResourceDef, namespace: string | undefined, url: URL): Obj[] {
    const filter = filterOf(resKey(def), namespace, url);
    return [...this.objects.get(resKey(def))!.values()]
      .filter((o) => matches(filter, resKey(def), o))
      .sort((a, b) => byKey(storeKey(a.metadata.namespace, a.metadata.name), storeKey(b.metadata.namespace, b.metadata.name)));
  }

  /** One page of a list (paging.ts): everything without `limit`, else a page of a snapshot. */
  private page(def: ResourceDef, namespace: string | undefined, url: URL): { items: Obj[]; metadata: Obj } {
    const limit = parseLimit(url.searchParams.get('limit'));
    const token = url.searchParams.get('continue');
    const rvParam = url.searchParams.get('resourceVersion');
    if (token && rvParam && rvParam !== '0') {
      throw new HttpError(400, 'BadRequest', 'specifying resource version is not allowed when using continue');
    }
    if (!token && limit === 0) return { items: this.select(def, namespace, url), metadata: { resourceVersion: String(this.rv) } };
    const filter = filterOf(resKey(def), namespace, url);
    const selective = Boolean(filter.fieldSelector || filter.labelSelector);
    let rv: number;
    let snapshot;
    let from = 0;
    if (token) {
      const t = decodeContinue(token);
      rv = t.rv;
      snapshot = this.snapshots.get(rv, resKey(def), this.hub.compactedRv);
      from = firstAfter(snapshot.items, t.after);
    } else {
      rv = this.rv;
      snapshot = this.snapshots.take(rv, resKey(def), () =>
        [...this.objects.get(resKey(def))!.values()].map((obj) => ({ key: storeKey(obj.metadata.namespace, obj.metadata.name), obj })));
    }
    const items: Obj[] = [];
    let i = from;
    let lastKey = '';
    for (; i < snapshot.items.length && (limit === 0 || items.length < limit); i++) {
      const { key, obj } = snapshot.items[i]!;
      if (!matches(filter, resKey(def), obj)) continue;
      items.push(obj);
      lastKey = key;
    }
    const metadata: Obj = { resourceVersion: String(rv) };
    let remaining = 0;
    for (let j = i; j < snapshot.items.length; j++) if (matches(filter, resKey(def), snapshot.items[j]!.obj)) remaining += 1;
    if (remaining > 0) {
      metadata.continue = encodeContinue(rv, lastKey);
      if (!selective) metadata.remainingItemCount = remaining;
    }
    return { items, metadata };
  }

  private list(def: ResourceDef, namespace: string | undefined, url: URL, res: http.ServerResponse, asTable: boolean, include: IncludeObject): void {
    const { items, metadata } = this.page(def, namespace, url);
    if (asTable) {
      const table = toTable(def, items, String(metadata.resourceVersion), include);
      if (metadata.continue) table.metadata.continue = metadata.continue;
      if (metadata.remainingItemCount !== undefined) table.metadata.remainingItemCount = metadata.remainingItemCount;
      return this.sendJson(res, 200, table);
    }
    this.sendJson(res, 200, {
      apiVersion: apiVersionOf(def),
      kind: `${def.kind}List`,
      metadata,
      items,
    });
  }

  private watch(def: ResourceDef, namespace: string | undefined, url: URL, res: http.ServerResponse, name?: string): void {
    const filter = filterOf(resKey(def), namespace, url);
    // A watch of one named object (GET …/name?watch=true) is a watch narrowed by metadata.name.
    if (name) filter.fieldSelector = { ...filter.fieldSelector, 'metadata.name': name };
    this.hub.serve(filter, def.kind, apiVersionOf(def), url, res, this.objects.get(resKey(def))!.values());
  }

  private sendJson(res: http.ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
    const text = JSON.stringify(body);
    const headers: http.OutgoingHttpHeaders = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) };
    if (warnings.length) headers.Warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`);
    res.writeHead(code, headers);
    res.end(text);
  }

  private sendError(res: http.ServerResponse, err: HttpError): void {
    if (res.headersSent) {
      res.end();
      return;
    }
    this.sendJson(res, err.code, statusOf(err));
  }
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** The CRD documents checked in under crds/ (for `new FakeKubeServer({crds: loadCrds()})`). */
export function loadCrds(dir = new URL('../../crds/', import.meta.url)): Obj[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => parseYaml(readFileSync(new URL(f, dir), 'utf8')) as Obj);
}
