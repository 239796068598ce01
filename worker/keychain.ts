/**
 * Keychain references on the worker: finishes a tool config whose `{{ keychain.<name>.<field> }}`
 * templates the server left unrendered (secrets never travel in queue rows or events).
 *
 * For each keychain name the tool config references:
 *   1. the playbook's keychain def (ClaimedCommand.context.keychain_defs) gives scope and kind;
 *      GET /api/keychain/{catalog_id}/{name} with scope_type and execution_id (the command's
 *      execution for `local`, the root execution for `shared`). Without a def the entry is looked
 *      up local → shared → global (entries stored by the `secret` tool).
 *   2. `success` → token_data.
 *      `not_found` → acquire per kind and store it:
 *        oauth2 / http: call the token endpoint (method default POST, headers, data) → store the
 *          JSON answer, ttl from the def's ttl_seconds, else the answer's `expires_in`, else 3600;
 *          with auto_renew the request is stored (sealed) as renew_config;
 *        secret_manager: fetch each `map` entry (field → secret path) from the provider with the
 *          def's `auth` credential → store `{field: value}`;
 *        env / file: read environment variables / mounted files on this worker; never stored.
 *      No def (nothing to acquire with) → `KEYCHAIN: Entry '<name>' not found`.
 *      `expired` without auto_renew → `KEYCHAIN: Entry '<name>' expired`.
 *      `expired` with auto_renew → call renew_config (spec state table): HTTP 200 → POST fresh
 *        token_data (the answer), ttl from ttl_field (fallback 3600), auto_renew true, the same
 *        renew_config; non-200 or failure → the entry is an empty object, rendering fails, and the
 *        step fails with `KEYCHAIN: Failed to renew '<name>'` (no automatic retry).
 *   3. renders the keychain templates with `keychain` bound to the entries (and workload, vars,
 *      args, execution_id for mixed templates).
 * KEYCHAIN failures are `KeychainError` (a ToolConfigError): the runtime must report them as the
 * step's error outcome (call.done with error), not redeliver.
 */
import type { Json, JsonObject, KeychainDef, Tool } from '../playbook/types.js';
import { TemplateError, referencesName, renderValue } from '../playbook/template/index.js';
import type { KeychainGetResponse, KeychainSetResponse } from '../client/secrets.js';
import { fetchSecret, type ProviderOptions } from './providers/index.js';
import { ToolConfigError, type ResolveAuth } from './tools/types.js';
import { createAuthResolver, leaseOf, type CredentialReader } from './auth.js';
import { type Logger } from '../common/logger.js';
import { redactUrlsIn } from '../common/redact-url.js';
import type { SecretMask } from './secret-mask.js';

export const DEFAULT_RENEW_TTL = 3600;

export class KeychainError extends ToolConfigError {
  readonly code = 'keychain';
  constructor(message: string, readonly keychainName: string) {
    super(message);
    this.name = 'KeychainError';
  }
}

type IdLike = string | number;
type Scope = 'local' | 'global' | 'shared';

/** The part of SecretsClient the resolver uses. */
export interface KeychainClient {
  getKeychain(catalogId: IdLike, name: string, scope?: { scope_type?: Scope; execution_id?: IdLike | null }): Promise<KeychainGetResponse>;
  setKeychain(catalogId: IdLike, name: string, body: Record<string, unknown>): Promise<KeychainSetResponse>;
}

/** What of a claimed command the resolver needs (ClaimedCommand satisfies it). */
export interface KeychainCommand {
  catalog_id: IdLike;
  execution_id: IdLike;
  root_execution_id?: IdLike | null;
  parent_execution_id?: IdLike | null;
  args?: JsonObject;
  /** The command's lease: credentials a def's `auth` names are read under it (server checks holder and scope). */
  queue_id?: IdLike;
  worker_id?: string;
  lease_token?: string;
  context?: { workload?: JsonObject; vars?: JsonObject; keychain_defs?: JsonObject[]; [k: string]: unknown };
}

export interface KeychainResolverOptions {
  client: KeychainClient & Partial<CredentialReader>;
  /** Resolves a secret_manager def's `auth`; default: through the client's credential read path. */
  resolveAuth?: ResolveAuth;
  providerOptions?: ProviderOptions;
  /** Token endpoint timeout; default 30 s. */
  timeoutMs?: number;
  logger?: Logger;
  env?: Record<string, string | undefined>;
}

const isObj = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keychain names a value's templates refer to (`keychain.x`, `keychain['x']`, `keychain["x"]`). */
export function keychainRefs(value: Json | undefined): string[] {
  const names = new Set<string>();
  const walk = (v: Json | undefined) => {
    if (typeof v === 'string') {
      if (!referencesName(v, 'keychain')) return;
      for (const part of v.match(/\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\}/g) ?? []) {
        for (const m of part.matchAll(/(?:^|[^\w.])keychain\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(['"])(.+?)\2\s*\])/g)) names.add(m[1] ?? m[3]);
      }
    } else if (Array.isArray(v)) v.forEach(walk);
    else if (isObj(v)) Object.values(v).forEach(walk);
  };
  walk(value);
  return [...names];
}

function defsOf(cmd: KeychainCommand): KeychainDef[] {
  const defs = cmd.context?.keychain_defs;
  return Array.isArray(defs) ? (defs.filter((d) => isObj(d) && typeof d.name === 'string') as unknown as KeychainDef[]) : [];
}

function templateContext(cmd: KeychainCommand): Record<string, unknown> {
  const c = cmd.context ?? {};
  return { ...c, workload: c.workload ?? {}, vars: c.vars ?? {}, args: cmd.args ?? {}, execution_id: String(cmd.execution_id) };
}

/** The def with its own templates (e.g. `{{ workload.client_id }}`) rendered; keychain references left alone. */
function renderDef(def: KeychainDef, cmd: KeychainCommand): KeychainDef {
  try {
    return renderValue(def as unknown as Json, templateContext(cmd), { field: `keychain.${def.name}`, defer: (t) => referencesName(t, 'keychain') }) as unknown as KeychainDef;
  } catch (err) {
    throw new KeychainError(`KEYCHAIN: Cannot render the definition of '${def.name}': ${(err as Error).message}`, def.name);
  }
}

function scopeArgs(scope: Scope, cmd: KeychainCommand): { scope_type: Scope; execution_id?: string } {
  if (scope === 'global') return { scope_type: 'global' };
  if (scope === 'local') return { scope_type: 'local', execution_id: String(cmd.execution_id) };
  return { scope_type: 'shared', execution_id: String(cmd.root_execution_id ?? cmd.execution_id) };
}

interface TokenRequest {
  endpoint: string;
  method: string;
  headers: Record<string, string>;
  data?: Json;
}

/** Body encoding: the Content-Type header decides; else form for oauth2 (RFC 6749), JSON for http. */
function encodeRequest(req: TokenRequest, kind: string): { url: string; init: RequestInit; headers: Record<string, string> } {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers ?? {})) headers[k] = String(v);
  const ctKey = Object.keys(headers).find((k) => k.toLowerCase() === 'content-type');
  const method = (req.method || 'POST').toUpperCase();
  let url = req.endpoint;
  let body: string | undefined;
  if (req.data !== undefined && req.data !== null) {
    if (method === 'GET' || method === 'HEAD') {
      const u = new URL(url);
      if (isObj(req.data)) for (const [k, v] of Object.entries(req.data)) u.searchParams.set(k, typeof v === 'string' ? v : JSON.stringify(v));
      url = u.toString();
    } else {
      const ct = ctKey ? headers[ctKey].toLowerCase() : kind === 'http' ? 'application/json' : 'application/x-www-form-urlencoded';
      if (!ctKey) headers['content-type'] = ct;
      if (typeof req.data === 'string') body = req.data;
      else if (ct.includes('x-www-form-urlencoded') && isObj(req.data)) {
        body = new URLSearchParams(Object.entries(req.data).map(([k, v]): [string, string] => [k, typeof v === 'string' ? v : JSON.stringify(v)])).toString();
      } else body = JSON.stringify(req.data);
    }
  }
  if (!Object.keys(headers).some((k) => k.toLowerCase() === 'accept')) headers.accept = 'application/json';
  return { url, init: { method, headers, body }, headers };
}

async function callTokenEndpoint(req: TokenRequest, kind: string, timeoutMs: number): Promise<{ status: number; body: unknown }> {
  const { url, init } = encodeRequest(req, kind);
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    /* a non-JSON answer stays text */
  }
  return { status: res.status, body };
}

const ttlFrom = (body: JsonObject, field: string): number | undefined => {
  const v = body[field];
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.floor(n) : undefined;
};

export class KeychainResolver {
  private readonly timeoutMs: number;
  private readonly authFor = new Map<string, ResolveAuth>();

  constructor(private readonly o: KeychainResolverOptions) {
    this.timeoutMs = o.timeoutMs ?? 30_000;
  }

  /** Auth resolution for one command: under its lease, so the server can check holder and scope. */
  private resolveAuth(cmd: KeychainCommand): ResolveAuth {
    if (this.o.resolveAuth) return this.o.resolveAuth;
    const lease = leaseOf(cmd);
    const key = lease ? `${lease.queue_id}:${lease.lease_token}` : '';
    let r = this.authFor.get(key);
    if (!r) {
      r = this.o.client.readCredential ? createAuthResolver(this.o.client as CredentialReader, lease) : async () => {
        throw new Error('no credential reader configured for keychain auth');
      };
      this.authFor.set(key, r);
    }
    return r;
  }

  /** Resolves the named entries: name → token data (`{}` for an entry whose renewal failed). */
  async resolve(names: string[], cmd: KeychainCommand): Promise<{ entries: Record<string, JsonObject>; failedRenewals: string[] }> {
    const defs = defsOf(cmd);
    const entries: Record<string, JsonObject> = {};
    const failedRenewals: string[] = [];
    for (const name of names) {
      const def = defs.find((d) => d.name === name);
      const r = await this.resolveOne(name, def, cmd);
      entries[name] = r.data;
      if (r.renewFailed) failedRenewals.push(name);
    }
    return { entries, failedRenewals };
  }

  private async resolveOne(name: string, def: KeychainDef | undefined, cmd: KeychainCommand): Promise<{ data: JsonObject; renewFailed?: boolean }> {
    if (def && (def.kind === 'env' || def.kind === 'file')) return { data: await this.readLocal(renderDef(def, cmd)) };
    const scopes: Scope[] = def ? [def.scope ?? 'global'] : ['local', 'shared', 'global'];
    let got: KeychainGetResponse | undefined;
    for (const scope of scopes) {
      got = await this.o.client.getKeychain(cmd.catalog_id, name, scopeArgs(scope, cmd));
      if (got.status !== 'not_found') break;
    }
    if (!got || got.status === 'not_found') {
      if (!def) throw new KeychainError(`KEYCHAIN: Entry '${name}' not found`, name);
      // The def's own templates (`{{ workload.client_id }}`) are rendered only when it is used.
      return { data: await this.acquire(renderDef(def, cmd), cmd) };
    }
    if (got.status === 'success') return { data: got.token_data };
    // expired
    if (!got.auto_renew || !got.renew_config) throw new KeychainError(`KEYCHAIN: Entry '${name}' expired`, name);
    const fresh = await this.renew(name, def, got.renew_config as unknown as TokenRequest & { token_field: string; ttl_field: string }, cmd, (got as { scope_type?: Scope }).scope_type ?? def?.scope ?? scopeOfKey(got.cache_key));
    return fresh ? { data: fresh } : { data: {}, renewFailed: true };
  }

  private async readLocal(def: KeychainDef): Promise<JsonObject> {
    const provider = def.kind === 'env' ? 'env' : 'file';
    const map = this.mapOf(def, provider === 'env' ? ['variable', 'env', 'var'] : ['path', 'file']);
    const out: JsonObject = {};
    try {
      for (const [field, path] of Object.entries(map)) out[field] = await fetchSecret(provider, path, {}, { ...this.o.providerOptions, env: this.o.env ?? this.o.providerOptions?.env });
    } catch (err) {
      throw new KeychainError(`KEYCHAIN: Cannot read '${def.name}': ${(err as Error).message}`, def.name);
    }
    return out;
  }

  /** `map` (field → path), or a single `value` from one of the given fields. */
  private mapOf(def: KeychainDef, singles: string[]): Record<string, string> {
    if (isObj(def.map)) {
      const m: Record<string, string> = {};
      for (const [k, v] of Object.entries(def.map)) if (typeof v === 'string') m[k] = v;
      if (Object.keys(m).length) return m;
    }
    for (const s of singles) if (typeof def[s] === 'string' && def[s]) return { value: def[s] as string };
    throw new KeychainError(`KEYCHAIN: Entry '${def.name}' has no map (field → secret path)`, def.name);
  }

  private async acquire(def: KeychainDef, cmd: KeychainCommand): Promise<JsonObject> {
    const name = def.name;
    const scope = scopeArgs(def.scope ?? 'global', cmd);
    const base = { ...scope, parent_execution_id: cmd.parent_execution_id ?? null };
    if (def.kind === 'secret_manager') {
      const provider = def.provider;
      if (!provider) throw new KeychainError(`KEYCHAIN: Entry '${name}' needs a provider (gcp, aws, azure)`, name);
      const map = this.mapOf(def, ['secret', 'path', 'secret_name']);
      const auth = def.auth ? await this.resolveAuth(cmd)(def.auth) : {};
      const data: JsonObject = {};
      try {
        for (const [field, path] of Object.entries(map)) {
          data[field] = await fetchSecret(provider, path, isObj(auth) ? auth : {}, { ...this.o.providerOptions, hints: def as unknown as JsonObject });
        }
      } catch (err) {
        throw new KeychainError(`KEYCHAIN: Failed to fetch '${name}' from ${provider}: ${redactUrlsIn((err as Error).message)}`, name);
      }
      await this.o.client.setKeychain(cmd.catalog_id, name, {
        ...base, token_data: data, credential_type: 'secret_manager', cache_type: 'secret',
        ...(def.ttl_seconds !== undefined ? { ttl_seconds: def.ttl_seconds } : {}),
      });
      return data;
    }
    if (def.kind === 'oauth2' || def.kind === 'http') {
      let endpoint = typeof def.endpoint === 'string' ? def.endpoint : undefined;
      let data = def.data;
      if (def.auth) {
        // oauth2 client credentials from an auth reference fill what the def leaves out.
        const cred = await this.resolveAuth(cmd)(def.auth);
        if (isObj(cred)) {
          endpoint ??= typeof cred.token_url === 'string' ? cred.token_url : undefined;
          if (def.kind === 'oauth2' && (data === undefined || isObj(data))) {
            const d: JsonObject = { ...(isObj(data) ? data : { grant_type: 'client_credentials' }) };
            for (const k of ['client_id', 'client_secret', 'scope', 'audience']) if (d[k] === undefined && cred[k] !== undefined) d[k] = cred[k];
            data = d;
          }
        }
      }
      if (!endpoint) throw new KeychainError(`KEYCHAIN: Entry '${name}' has no endpoint`, name);
      const req: TokenRequest = { endpoint, method: (def.method ?? 'POST').toUpperCase(), headers: (isObj(def.headers) ? def.headers : {}) as Record<string, string>, data };
      const tokenField = typeof def.token_field === 'string' ? def.token_field : 'access_token';
      const ttlField = typeof def.ttl_field === 'string' ? def.ttl_field : 'expires_in';
      let answer: { status: number; body: unknown };
      try {
        answer = await callTokenEndpoint(req, def.kind, this.timeoutMs);
      } catch (err) {
        throw new KeychainError(`KEYCHAIN: Failed to acquire '${name}': ${redactUrlsIn((err as Error).message)}`, name);
      }
      if (answer.status < 200 || answer.status >= 300) throw new KeychainError(`KEYCHAIN: Failed to acquire '${name}': HTTP ${answer.status}`, name);
      const token: JsonObject = isObj(answer.body) ? answer.body : { value: answer.body as Json };
      if (def.kind === 'oauth2' && token[tokenField] === undefined) throw new KeychainError(`KEYCHAIN: Failed to acquire '${name}': the answer has no '${tokenField}'`, name);
      const ttl = def.ttl_seconds ?? ttlFrom(token, ttlField) ?? DEFAULT_RENEW_TTL;
      const autoRenew = def.auto_renew === true;
      const { headers } = encodeRequest(req, def.kind);
      await this.o.client.setKeychain(cmd.catalog_id, name, {
        ...base, token_data: token, credential_type: def.kind, cache_type: 'token', ttl_seconds: ttl, auto_renew: autoRenew,
        ...(autoRenew ? { renew_config: { endpoint, method: req.method, headers, data: data ?? null, token_field: tokenField, ttl_field: ttlField } } : {}),
      });
      return token;
    }
    throw new KeychainError(`KEYCHAIN: Entry '${name}' has an unknown kind '${String(def.kind)}'`, name);
  }

  /** The renewal of the state table. Returns the fresh token, or undefined when it failed. */
  private async renew(name: string, def: KeychainDef | undefined, rc: TokenRequest & { token_field: string; ttl_field: string }, cmd: KeychainCommand, scope: Scope): Promise<JsonObject | undefined> {
    let answer: { status: number; body: unknown };
    try {
      answer = await callTokenEndpoint(rc, def?.kind ?? 'oauth2', this.timeoutMs);
    } catch (err) {
      this.o.logger?.warn({ keychain: name, error: redactUrlsIn((err as Error).message) }, 'keychain renewal failed');
      return undefined;
    }
    if (answer.status !== 200 || !isObj(answer.body) || answer.body[rc.token_field ?? 'access_token'] === undefined) {
      this.o.logger?.warn({ keychain: name, status: answer.status }, 'keychain renewal failed');
      return undefined;
    }
    const token = answer.body;
    await this.o.client.setKeychain(cmd.catalog_id, name, {
      ...scopeArgs(scope, cmd), parent_execution_id: cmd.parent_execution_id ?? null,
      token_data: token, credential_type: def?.kind ?? 'oauth2', cache_type: 'token',
      ttl_seconds: ttlFrom(token, rc.ttl_field ?? 'expires_in') ?? DEFAULT_RENEW_TTL, auto_renew: true, renew_config: rc,
    });
    return token;
  }
}

function scopeOfKey(cacheKey: string): Scope {
  if (cacheKey.endsWith(':global')) return 'global';
  return cacheKey.includes(':shared:') ? 'shared' : 'local';
}

/**
 * Renders the keychain references of a tool config. Other (already rendered) fields are returned
 * as they are. Throws KeychainError for a missing / expired / unrenewable entry. The entries'
 * values go into `secrets` (masked in what is reported of the call).
 */
export async function renderKeychain(tool: Tool, cmd: KeychainCommand, resolver: KeychainResolver | (() => KeychainResolver), secrets?: SecretMask): Promise<Tool> {
  const names = keychainRefs(tool as unknown as Json);
  if (names.length === 0) return tool;
  const { entries, failedRenewals } = await (typeof resolver === 'function' ? resolver() : resolver).resolve(names, cmd);
  secrets?.add(entries);
  const ctx = { ...templateContext(cmd), keychain: entries };
  let rendered: Tool;
  try {
    rendered = renderValue(tool as unknown as Json, ctx, { field: 'tool', defer: (t) => !referencesName(t, 'keychain') }) as unknown as Tool;
  } catch (err) {
    if (failedRenewals.length) throw new KeychainError(`KEYCHAIN: Failed to renew '${failedRenewals[0]}'`, failedRenewals[0]);
    if (err instanceof TemplateError) throw new KeychainError(`KEYCHAIN: ${err.message}`, names[0]);
    throw err;
  }
  // An empty entry can still render inside a longer string (to ''): a failed renewal fails the step regardless.
  if (failedRenewals.length) throw new KeychainError(`KEYCHAIN: Failed to renew '${failedRenewals[0]}'`, failedRenewals[0]);
  return rendered;
}

/** `WorkerRuntimeOptions.prepareTool`: `(cmd, tool) => tool with keychain references rendered`. */
export function createKeychainPreparer(opts: KeychainResolverOptions): (cmd: KeychainCommand, tool: Tool, secrets?: SecretMask) => Promise<Tool> {
  // a resolver per command (its cache is the command's), made only for a tool that references the keychain
  return (cmd, tool, secrets) => renderKeychain(tool, cmd, () => new KeychainResolver(opts), secrets);
}
