/**
 * `http` tool (undici). Fields (spec Tool table + legacy http.* operations):
 *   method (GET, POST, PUT, PATCH, DELETE, HEAD; legacy `operation: get|post|…` sets it),
 *   endpoint (`url` synonym), params (query; arrays repeat the key, null drops it), headers,
 *   body — requests-library semantics: `data` object → application/x-www-form-urlencoded,
 *   `data` string → raw body as given; otherwise `json` → JSON; otherwise `payload` → JSON body
 *   (for GET/HEAD/DELETE `payload` is sent as query parameters instead),
 *   timeout (seconds, default 30), verify (default true; false accepts any TLS certificate; a
 *   string is the path of a CA bundle to trust, as in requests),
 *   auth (bearer → `Authorization: Bearer`, basic → `Authorization: Basic`, api_key → header
 *   `X-API-Key` or `header`/`header_name` of the credential or auth object, or query parameter
 *   when `in: query`). Explicit headers win over auth.
 *
 * Redirects are followed (at most 10) unless `allow_redirects: false` (requests' name).
 *
 * Response: `{id, status, data, headers}`; data is parsed JSON when the content type is JSON
 * (…/json, …+json), else text (null for HEAD or an empty body); a binary body (image, archive,
 * octet-stream) is base64 in `data` with `encoding: 'base64'`. A non-2xx is an error outcome
 * `{message, status, code: 'http_error', data: <body>}`; a timeout is `code: 'timeout'`, a
 * connection/TLS/DNS failure `code: 'network'` (no status).
 */
import { randomUUID } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { Agent, buildConnector, interceptors, request, type Dispatcher } from 'undici';
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { loadAuth, pick } from './auth-ref.js';
import { isObject, str } from './json.js';
import { ToolConfigError, fail, ok, type ToolContext, type ToolOutcome } from './types.js';
import { redactUrl, redactUrlsIn } from '../../common/redact-url.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
export const DEFAULT_HTTP_TIMEOUT_S = 30;

const MAX_REDIRECTS = 10;
/** Largest response body read (WORKER_MAX_RESULT_BYTES): a bigger answer fails `too_large` instead of filling the worker's memory. */
let maxResponseBytes = 64 * 1024 * 1024;

export function configureHttp(o: { maxResponseBytes?: number; serverUrl?: string | null; allow?: string[] }): void {
  if (o.maxResponseBytes !== undefined) maxResponseBytes = o.maxResponseBytes;
  if (o.serverUrl !== undefined) {
    const u = o.serverUrl ? new URL(o.serverUrl) : null;
    ownServer = u ? { host: u.hostname.replace(/^\[|\]$/g, '').toLowerCase(), port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)) } : null;
  }
  if (o.allow !== undefined) allowed = new Set(o.allow.map((x) => x.trim().toLowerCase()).filter(Boolean));
}

/**
 * Targets the http tool refuses (SSRF): the worker's own server (a step must not reach the API
 * with whatever access the network gives it) and link-local / cloud metadata addresses, unless
 * named in WORKER_HTTP_ALLOW (`host` or `host:port`). Checked when a connection opens — after
 * DNS, and for every redirect.
 */
let ownServer: { host: string; port: number } | null = null;
let allowed = new Set<string>();
const metadata = new BlockList();
metadata.addSubnet('169.254.0.0', 16, 'ipv4');
metadata.addSubnet('fe80::', 10, 'ipv6');
metadata.addAddress('fd00:ec2::254', 'ipv6');
metadata.addAddress('100.100.100.200', 'ipv4'); // Alibaba Cloud metadata

class ForbiddenTarget extends Error {
  readonly code = 'forbidden_target';
}

async function checkTarget(hostname: string, port: number): Promise<void> {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (allowed.has(host) || allowed.has(`${host}:${port}`)) return;
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
  for (const a of addresses) {
    const family = isIP(a) === 6 ? 'ipv6' : 'ipv4';
    if (metadata.check(a, family)) throw new ForbiddenTarget(`the http tool may not reach ${host} (${a}): link-local / metadata address (WORKER_HTTP_ALLOW to permit)`);
  }
  if (ownServer && port === ownServer.port) {
    const own = isIP(ownServer.host) ? [ownServer.host] : (await lookup(ownServer.host, { all: true }).catch(() => [])).map((a) => a.address);
    const loopback = (a: string) => a === '::1' || a.startsWith('127.');
    if (host === ownServer.host || addresses.some((a) => own.includes(a) || (loopback(a) && own.some(loopback)))) {
      throw new ForbiddenTarget(`the http tool may not reach the worker's own server ${host}:${port} (WORKER_HTTP_ALLOW to permit)`);
    }
  }
}

/** undici's connector behind checkTarget. */
function guardedConnector(tls?: { rejectUnauthorized?: boolean; ca?: Buffer }): buildConnector.connector {
  const base = buildConnector({ ...(tls ?? {}) });
  return (opts, cb) => {
    const port = Number(opts.port || (opts.protocol === 'https:' ? 443 : 80));
    checkTarget(opts.hostname, port).then(() => base(opts, cb), (err: Error) => cb(err, null));
  };
}
const agentOptions = { keepAliveTimeout: 10_000, connections: 64 };

/** An agent and its redirect-following twin (requests follows redirects by default). */
function pair(connect?: { rejectUnauthorized?: boolean; ca?: Buffer }) {
  const direct = new Agent({ ...agentOptions, connect: guardedConnector(connect) });
  return { direct, follow: direct.compose(interceptors.redirect({ maxRedirections: MAX_REDIRECTS })) };
}

const agents = { secure: pair(), insecure: pair({ rejectUnauthorized: false }) };
/** `verify: <path>` (requests semantics): trust the CA bundle in that file; one agent per path. */
const caAgents = new Map<string, ReturnType<typeof pair>>();
function caAgent(path: string): ReturnType<typeof pair> {
  let a = caAgents.get(path);
  if (!a) {
    let ca: Buffer;
    try {
      ca = readFileSync(path);
    } catch (err) {
      throw new ToolConfigError(`verify: cannot read CA bundle ${path}: ${(err as Error).message}`);
    }
    a = pair({ ca });
    caAgents.set(path, a);
  }
  return a;
}

export interface HttpCall {
  method: string;
  url: string;
  params?: JsonObject | null;
  headers?: Record<string, string>;
  body?: string | Buffer;
  timeoutMs: number;
  /** true / false, or the path of a CA bundle to trust. */
  verify: boolean | string;
  /** Follow 3xx redirects (default true, at most 10). */
  followRedirects?: boolean;
  signal: AbortSignal;
}

export interface HttpResult {
  status: number;
  headers: Record<string, string>;
  data: Json;
  /** Set when a binary body is returned as base64 in `data`. */
  encoding?: 'base64';
}

/** Adds query parameters to a URL (requests semantics: list → repeated key, null → dropped). */
export function withParams(url: string, params: JsonObject | null | undefined): string {
  if (!params || Object.keys(params).length === 0) return url;
  const u = new URL(url);
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) { if (item !== null) u.searchParams.append(k, str(item)!); }
    else u.searchParams.append(k, str(v)!);
  }
  return u.toString();
}

export function formEncode(data: JsonObject): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(data)) {
    if (v === null || v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) p.append(k, str(item) ?? '');
    else p.append(k, str(v)!);
  }
  return p.toString();
}

function isJsonType(ct: string | undefined): boolean {
  return !!ct && /(^|\/|\+)json(\s*;|$)/i.test(ct.split(',')[0].trim());
}

class HttpCallError extends Error {
  constructor(message: string, readonly code: 'timeout' | 'network' | 'cancelled' | 'too_large' | 'forbidden_target') {
    super(message);
  }
}

/** One HTTP exchange. Throws HttpCallError for timeouts and network faults; any status resolves. */
export async function httpCall(call: HttpCall): Promise<HttpResult> {
  // One controller for the call's cancel and its timeout. AbortSignal.any and AbortSignal.timeout
  // did the same at several times the cost (weak references, a signal each), on every call.
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort(new DOMException(`request timed out after ${call.timeoutMs / 1000}s`, 'TimeoutError'));
  }, call.timeoutMs);
  const cancel = () => ac.abort(call.signal.reason);
  if (call.signal.aborted) cancel();
  else call.signal.addEventListener('abort', cancel, { once: true });
  try {
    return await exchange(call, ac.signal, () => timedOut);
  } finally {
    clearTimeout(timer);
    call.signal.removeEventListener('abort', cancel);
  }
}

async function exchange(call: HttpCall, signal: AbortSignal, timedOut: () => boolean): Promise<HttpResult> {
  const agent = typeof call.verify === 'string' ? caAgent(call.verify) : call.verify ? agents.secure : agents.insecure;
  const dispatcher = call.followRedirects === false || call.method === 'HEAD' ? agent.direct : agent.follow;
  let res: Dispatcher.ResponseData;
  let raw: Buffer;
  try {
    res = await request(withParams(call.url, call.params), {
      method: call.method as Dispatcher.HttpMethod,
      headers: call.headers,
      body: call.body,
      signal,
      dispatcher,
      headersTimeout: call.timeoutMs,
      bodyTimeout: call.timeoutMs,
    });
    if (call.method === 'HEAD') {
      await res.body.dump();
      raw = Buffer.alloc(0);
    } else raw = await readLimited(res, call);
  } catch (err) {
    if (err instanceof HttpCallError) throw err;
    const forbidden = [err, (err as { cause?: unknown }).cause].find((e) => e instanceof ForbiddenTarget) as ForbiddenTarget | undefined;
    if (forbidden) throw new HttpCallError(forbidden.message, 'forbidden_target');
    if (timedOut()) throw new HttpCallError(`request timed out after ${call.timeoutMs / 1000}s`, 'timeout');
    if (call.signal.aborted) throw new HttpCallError('request cancelled', 'cancelled');
    const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
    if (e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT') throw new HttpCallError(`request timed out after ${call.timeoutMs / 1000}s`, 'timeout');
    // undici and fetch put the URL into some messages ("cannot be constructed from a URL that includes credentials").
    const detail = redactUrlsIn(e.cause?.message ?? e.message);
    const code = e.cause?.code ?? e.code;
    throw new HttpCallError(`${call.method} ${redactUrl(call.url)} failed: ${detail}${code && !detail.includes(code) ? ` (${code})` : ''}`, 'network');
  }
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
  const ct = headers['content-type'];
  let data: Json = null;
  let encoding: 'base64' | undefined;
  if (raw.length > 0 && isTextType(ct)) {
    const text = raw.toString('utf8');
    data = text;
    if (isJsonType(ct)) {
      try {
        data = JSON.parse(text) as Json;
      } catch {
        data = text;
      }
    }
  } else if (raw.length > 0) {
    data = raw.toString('base64');
    encoding = 'base64';
  }
  return { status: res.statusCode, headers, data, ...(encoding ? { encoding } : {}) };
}

async function readLimited(res: Dispatcher.ResponseData, call: HttpCall): Promise<Buffer> {
  const tooLarge = () => new HttpCallError(`the response of ${call.method} ${redactUrl(call.url)} is larger than ${maxResponseBytes} bytes (WORKER_MAX_RESULT_BYTES)`, 'too_large');
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxResponseBytes) {
    res.body.destroy();
    throw tooLarge();
  }
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > maxResponseBytes) {
      res.body.destroy();
      throw tooLarge();
    }
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts, size);
}

/** Text we can return as a string; anything else (images, archives, octet-stream) travels as base64. */
function isTextType(ct: string | undefined): boolean {
  if (!ct) return true;
  const t = ct.split(';')[0].trim().toLowerCase();
  return t.startsWith('text/') || isJsonType(t) || /(^|\/|\+)xml$/.test(t) || t === 'application/javascript' || t === 'application/x-www-form-urlencoded' || t === 'application/x-ndjson' || t === 'application/yaml' || t === 'application/x-yaml';
}

/** Runs an HttpCall and shapes the outcome as the http tool's envelope. */
export async function httpOutcome(call: HttpCall): Promise<ToolOutcome> {
  const id = randomUUID();
  try {
    const r = await httpCall(call);
    if (r.status >= 200 && r.status < 300) return ok({ id, status: r.status, data: r.data, headers: r.headers, ...(r.encoding ? { encoding: r.encoding } : {}) });
    return fail(`HTTP ${r.status} from ${call.method} ${redactUrl(call.url)}`, { status: r.status, code: 'http_error', data: r.data });
  } catch (err) {
    if (err instanceof HttpCallError) return fail(err.message, { code: err.code });
    throw err;
  }
}

/** A URL for errors and logs (common/redact-url.ts: userinfo, query values and fragment masked). */
export { redactUrl };

export function timeoutMs(v: Json | undefined, defSeconds: number): number {
  if (v === undefined || v === null || v === '') return defSeconds * 1000;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new ToolConfigError(`timeout must be a positive number of seconds, got ${JSON.stringify(v)}`);
  return Math.round(n * 1000);
}

export function boolField(v: Json | undefined, def: boolean): boolean {
  if (v === undefined || v === null) return def;
  if (typeof v === 'string') return !['false', '0', 'no', 'off'].includes(v.toLowerCase());
  return Boolean(v);
}

function headerMap(h: Json | undefined): Record<string, string> {
  if (h === undefined || h === null) return {};
  if (!isObject(h)) throw new ToolConfigError('headers must be an object');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== null && v !== undefined) out[k] = str(v)!;
  return out;
}

/**
 * requests semantics: credentials in the URL (`https://user:pass@host/`) are sent as Basic auth
 * unless an Authorization header is set already (an `auth` block wins). The URL goes on without
 * them, so no later message can show them.
 */
function userinfoToBasic(url: string, headers: Record<string, string>): string {
  const u = new URL(url);
  if (!u.username && !u.password) return url;
  if (!hasHeader(headers, 'authorization')) {
    headers.Authorization = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
  }
  u.username = '';
  u.password = '';
  return u.toString();
}

function hasHeader(h: Record<string, string>, name: string): boolean {
  const n = name.toLowerCase();
  return Object.keys(h).some((k) => k.toLowerCase() === n);
}

/** Applies resolved auth to headers (or params for api_key `in: query`). */
export async function applyAuth(tool: Tool, ctx: ToolContext, headers: Record<string, string>, params: JsonObject): Promise<void> {
  const auth = await loadAuth(tool.auth, ctx);
  if (!auth) return;
  const d = auth.data;
  const opts = isObject(tool.auth) ? tool.auth : {};
  let type = (auth.type ?? '').toLowerCase();
  if (!type) type = pick(d, 'access_token', 'token') ? 'bearer' : pick(d, 'api_key') ? 'api_key' : pick(d, 'username', 'user') ? 'basic' : '';
  if (type === 'bearer' || type === 'oauth2' || type === 'token' || type === 'oauth2_client_credentials') {
    const token = pick(d, 'access_token', 'token', 'bearer_token');
    if (token === undefined) throw new ToolConfigError(`auth of type ${type} has no access_token`);
    if (!hasHeader(headers, 'authorization')) headers.Authorization = `Bearer ${str(token)}`;
  } else if (type === 'basic') {
    const user = str(pick(d, 'username', 'user', 'login')) ?? '';
    const pass = str(pick(d, 'password', 'pass')) ?? '';
    if (!hasHeader(headers, 'authorization')) headers.Authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
  } else if (type === 'api_key' || type === 'apikey') {
    const key = pick(d, 'api_key', 'key', 'token');
    if (key === undefined) throw new ToolConfigError('auth of type api_key has no api_key');
    const where = str(pick(opts, 'in') ?? pick(d, 'in')) ?? 'header';
    const name = str(pick(opts, 'header', 'header_name', 'param', 'name') ?? pick(d, 'header', 'header_name', 'param')) ?? (where === 'query' ? 'api_key' : 'X-API-Key');
    if (where === 'query') params[name] = str(key)!;
    else if (!hasHeader(headers, name)) headers[name] = `${str(pick(d, 'prefix')) ?? ''}${str(key)}`;
  } else {
    throw new ToolConfigError(`auth type '${auth.type ?? '(unknown)'}' is not usable by the http tool (bearer, basic, api_key)`);
  }
}

export async function runHttp(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const op = typeof tool.operation === 'string' ? tool.operation.replace(/^http\./i, '') : undefined;
  const method = String(tool.method ?? op ?? 'GET').toUpperCase();
  if (!(METHODS as readonly string[]).includes(method)) throw new ToolConfigError(`unsupported http method ${method}`);
  const url = tool.endpoint ?? tool.url;
  if (typeof url !== 'string' || !url) throw new ToolConfigError('http tool needs endpoint (or url)');
  try {
    new URL(url);
  } catch {
    throw new ToolConfigError(`http endpoint is not an absolute URL: ${redactUrl(url)}`);
  }
  if (tool.params !== undefined && tool.params !== null && !isObject(tool.params)) throw new ToolConfigError('params must be an object');
  const params: JsonObject = { ...((tool.params as JsonObject | undefined) ?? {}) };
  const headers = headerMap(tool.headers);
  let body: string | undefined;
  const setType = (t: string) => {
    if (!hasHeader(headers, 'content-type')) headers['Content-Type'] = t;
  };
  const noBody = method === 'GET' || method === 'HEAD' || method === 'DELETE';
  if (tool.data !== undefined && tool.data !== null) {
    if (typeof tool.data === 'string') body = tool.data;
    else if (isObject(tool.data)) {
      body = formEncode(tool.data);
      setType('application/x-www-form-urlencoded');
    } else {
      body = JSON.stringify(tool.data);
      setType('application/json');
    }
  } else if (tool.json !== undefined && tool.json !== null) {
    body = JSON.stringify(tool.json);
    setType('application/json');
  } else if (tool.payload !== undefined && tool.payload !== null) {
    if (noBody && isObject(tool.payload)) Object.assign(params, tool.payload);
    else {
      body = typeof tool.payload === 'string' ? tool.payload : JSON.stringify(tool.payload);
      setType('application/json');
    }
  }
  await applyAuth(tool, ctx, headers, params);
  return httpOutcome({
    method,
    url: userinfoToBasic(url, headers),
    params,
    headers,
    body,
    timeoutMs: timeoutMs(tool.timeout, DEFAULT_HTTP_TIMEOUT_S),
    verify: verifyField(tool.verify ?? tool.verify_ssl),
    followRedirects: boolField(tool.allow_redirects ?? tool.follow_redirects, true),
    signal: ctx.signal,
  });
}

/** verify: boolean (default true), a boolean-like string, or a CA bundle path. */
export function verifyField(v: Json | undefined): boolean | string {
  if (typeof v === 'string' && !['true', 'false', '0', '1', 'yes', 'no', 'on', 'off', ''].includes(v.toLowerCase())) return v;
  return boolField(v, true);
}
