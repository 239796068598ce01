/**
 * Cross-cutting HTTP concerns shared by every plugin: request validation (ajv), the error
 * envelope, bearer-token auth, JSON parsing and request metrics.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import { AppError, badRequest, unauthorized } from '../errors.js';
import { isConnectionError } from '../db.js';
import { metrics } from '../metrics.js';
import type { PublicEndpointGroup } from '../config.js';
import { errors, sharedSchemas } from './schemas.js';

// ---- validation -------------------------------------------------------------------------------

/**
 * Two ajv instances: bodies are validated as sent (no type coercion: `"path": 5` is an error, not
 * "5"); query strings and path parameters are coerced (they are text on the wire).
 */
const common = { allErrors: true, useDefaults: true, strict: false, verbose: true } as const;
// Made at the first compilation (see lazy-compilers.ts): adding the shared schemas checks each
// against the meta-schema, a sixth of a second that a process importing this module need not pay.
let ajvs: { body: Ajv; text: Ajv } | undefined;
function validators(): { body: Ajv; text: Ajv } {
  if (ajvs) return ajvs;
  const body = new Ajv({ ...common, coerceTypes: false, removeAdditional: false });
  const text = new Ajv({ ...common, coerceTypes: 'array', removeAdditional: false });
  // Request schemas may `$ref` the shared schemas (`{$ref: 'PlaybookIssue#'}`) like responses do.
  for (const s of sharedSchemas) {
    body.addSchema(s);
    text.addSchema(s);
  }
  return (ajvs = { body, text });
}

export function validatorCompiler({ schema, httpPart }: { schema: unknown; httpPart?: string }): ValidateFunction {
  const ajv = httpPart === 'body' ? validators().body : validators().text;
  return ajv.compile(boundNumbers(schema));
}

/**
 * Numbers no route can use (1e20 seconds, offset 1e99) become 400s, not database errors: a
 * number or integer schema without a bound gets ±MAX_SAFE_INTEGER. The route's own bounds win.
 * A copy: the OpenAPI document shows the schemas as written.
 */
function boundNumbers(schema: unknown): object {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (!node || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) out[k] = k === 'default' || k === 'enum' || k === 'const' ? v : walk(v);
    const types = Array.isArray(out.type) ? out.type : [out.type];
    if (types.includes('integer') || types.includes('number')) {
      if (out.maximum === undefined && out.exclusiveMaximum === undefined) out.maximum = Number.MAX_SAFE_INTEGER;
      if (out.minimum === undefined && out.exclusiveMinimum === undefined) out.minimum = -Number.MAX_SAFE_INTEGER;
    }
    return out;
  };
  return walk(schema) as object;
}

// ---- input guards -----------------------------------------------------------------------------

/** Nesting a request body may have (a run payload 5,000 levels deep is refused, not a 500). */
export const MAX_BODY_DEPTH = 64;

/**
 * Checks every string and key of the path parameters, the query string and the body before
 * validation: PostgreSQL cannot store a NUL character in text or jsonb, so one anywhere is a 400
 * naming the field (not a database error); a body nested deeper than MAX_BODY_DEPTH is refused
 * before anything walks it recursively.
 */
export function installInputGuards(app: FastifyInstance) {
  // A callback hook, as installRequestMetrics' and the x-request-id one: an async hook costs each
  // request a promise and a turn of the microtask queue. fastify's hook runner answers a throw
  // here as it would the error handed to done().
  app.addHook('preValidation', (req, _reply, done) => {
    checkInput(req.params, 'params');
    checkInput(req.query, 'querystring');
    checkInput(req.body, 'body');
    done();
  });
}

function checkInput(value: unknown, location: string): void {
  const where = location === 'querystring' ? 'query parameter' : location === 'params' ? 'path parameter' : 'body';
  // The path to the value being checked, made into text only for an error: a 30 MB result of
  // small objects has millions of fields, and building every field's path cost hundreds of ms.
  const segments: Array<string | number> = [];
  const fail = (message: string): never => {
    let field = '';
    for (const s of segments) {
      if (typeof s === 'number') field += `[${s}]`;
      else field += (field ? '.' : '') + s.split('\u0000').join('\\u0000');
    }
    throw new AppError(400, 'bad_request', `${where} field '${field}' ${message}`, [{ location, field, message }]);
  };
  const walk = (v: unknown, depth: number): void => {
    if (typeof v === 'string') {
      if (v.includes('\u0000')) fail('contains a NUL character (\\u0000), which cannot be stored');
      return;
    }
    if (!v || typeof v !== 'object') return;
    if (depth > MAX_BODY_DEPTH) fail(`is nested deeper than ${MAX_BODY_DEPTH} levels`);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        segments.push(i);
        walk(v[i], depth + 1);
        segments.pop();
      }
      return;
    }
    const o = v as Record<string, unknown>;
    for (const k in o) {
      if (!Object.hasOwn(o, k)) continue;
      segments.push(k);
      if (k.includes('\u0000')) fail('is a key containing a NUL character (\\u0000), which cannot be stored');
      walk(o[k], depth + 1);
      segments.pop();
    }
  };
  walk(value, 0);
}

export interface FieldProblem {
  location: string;
  field: string;
  message: string;
}

/** `/events/0/name` → `events[0].name`. */
function fieldName(instancePath: string, extra?: string): string {
  const parts = instancePath.split('/').filter(Boolean).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extra !== undefined) parts.push(extra);
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/**
 * The schema's own wording of an error: `x-message` as a string words every refusal of that
 * schema; as an object, keyed by ajv keyword (`minLength`, `pattern`, ...), words only those.
 */
function customMessage(e: ErrorObject): string | undefined {
  const custom = (e.parentSchema as Record<string, unknown> | undefined)?.['x-message'];
  if (typeof custom === 'string') return custom;
  const byKeyword = custom && typeof custom === 'object' ? (custom as Record<string, unknown>)[e.keyword] : undefined;
  return typeof byKeyword === 'string' ? byKeyword : undefined;
}

/** ajv errors → one problem per field, naming it; `x-message` in a schema gives the wording. */
export function mapValidationErrors(errs: ErrorObject[], location: string): FieldProblem[] {
  // Errors inside a failed anyOf are noise: keep the anyOf's own error only.
  const anyOfPaths = errs.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf').map((e) => e.schemaPath + '/');
  const kept = errs.filter((e) => !anyOfPaths.some((p) => e.schemaPath.startsWith(p)));
  const out: FieldProblem[] = [];
  const seen = new Set<string>();
  for (const e of kept) {
    let field: string;
    let message: string;
    if (e.keyword === 'required') {
      field = fieldName(e.instancePath, (e.params as { missingProperty: string }).missingProperty);
      message = 'is required';
    } else if (e.keyword === 'additionalProperties') {
      field = fieldName(e.instancePath, (e.params as { additionalProperty: string }).additionalProperty);
      message = 'is not allowed';
    } else {
      field = fieldName(e.instancePath);
      message = customMessage(e) ?? e.message ?? 'is invalid';
      if (e.keyword === 'enum') message += `: ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    const key = `${field}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ location, field, message });
  }
  return out;
}

function describeProblem(p: FieldProblem): string {
  const where = p.location === 'querystring' ? 'query parameter' : p.location === 'params' ? 'path parameter' : p.location;
  return p.field ? `${where} field '${p.field}' ${p.message}` : `${where} ${p.message}`;
}

// ---- error envelope ---------------------------------------------------------------------------

export function sendError(reply: FastifyReply, status: number, code: string, message: string, details?: unknown) {
  const error: Record<string, unknown> = { code, message };
  if (details !== undefined) error.details = details;
  return reply.code(status).type('application/json').send({ error });
}

const FASTIFY_CODES: Record<string, [number, string, string?]> = {
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'invalid_json'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'invalid_json', 'request body is empty; expected JSON'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'payload_too_large'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'unsupported_media_type', 'unsupported Content-Type; send application/json'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'bad_request'],
  FST_ERR_BAD_URL: [400, 'bad_request'],
  FST_ERR_ASYNC_CONSTRAINT: [400, 'bad_request'],
};

/**
 * The app's error handler. `stopping`: whether the server is shutting down, when a lost database
 * connection is expected (`playflow dev` on Ctrl-C stops its PostgreSQL too) and not a warning.
 */
export function errorHandler(stopping: () => boolean = () => false) {
  return function handle(this: FastifyInstance, err: FastifyError | AppError | Error, req: FastifyRequest, reply: FastifyReply) {
    return handleError(err, req, reply, stopping);
  };
}

function handleError(err: FastifyError | AppError | Error, req: FastifyRequest, reply: FastifyReply, stopping: () => boolean) {
  if (!(err instanceof AppError)) {
    const fe = err as FastifyError & { validationContext?: string };
    if (fe.validation) {
      const problems = mapValidationErrors(fe.validation as ErrorObject[], fe.validationContext ?? 'body');
      const message = problems.length ? problems.map(describeProblem).join('; ') : fe.message;
      return sendError(reply, 400, 'bad_request', message, problems);
    }
    const known = fe.code ? FASTIFY_CODES[fe.code] : undefined;
    if (known) {
      const [status, code, text] = known;
      return sendError(reply, status, code, text ?? fe.message);
    }
    if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
      return sendError(reply, fe.statusCode, (fe.code ?? `http_${fe.statusCode}`).toLowerCase(), fe.message);
    }
  }
  const a = errorAnswer(err, req, stopping);
  return sendError(reply, a.status, a.error.code, a.error.message, a.error.details);
}

/**
 * The answer a service's error gets: an AppError its own; a lost database connection 503 (nothing
 * was done, the caller retries); anything else 500, logged. Also the outcome of one event of an
 * independent batch (server/app/events.ts), which answers inside the batch's 200.
 */
export function errorAnswer(err: unknown, req: FastifyRequest, stopping: () => boolean = () => false): { status: number; error: { code: string; message: string; details?: unknown } } {
  const answer = (status: number, code: string, message: string, details?: unknown) => ({ status, error: details === undefined ? { code, message } : { code, message, details } });
  if (err instanceof AppError) {
    if (err.statusCode >= 500) req.log.error({ err }, err.message);
    return answer(err.statusCode, err.code, err.message, err.details);
  }
  if (err instanceof Error && isConnectionError(err)) {
    if (stopping()) req.log.debug({ err: err.message }, 'database connection lost during the request (the server is stopping)');
    else req.log.warn({ err: err.message }, 'database connection lost during the request');
    return answer(503, 'database_unavailable', 'the database connection was lost or refused; retry the request', { request_id: req.id });
  }
  req.log.error({ err }, 'unhandled error');
  return answer(500, 'internal_error', 'internal server error; see the server log', { request_id: req.id });
}

/** Errors fastify raises before routing (e.g. a malformed percent-encoding in the URL). */
export function frameworkErrors(err: FastifyError, _req: FastifyRequest, reply: FastifyReply) {
  const known = err.code ? FASTIFY_CODES[err.code] : undefined;
  const status = known?.[0] ?? (typeof err.statusCode === 'number' && err.statusCode < 500 ? err.statusCode : 400);
  return sendError(reply, status, known?.[1] ?? 'bad_request', err.message);
}

export function notFoundHandler(req: FastifyRequest, reply: FastifyReply) {
  return sendError(reply, 404, 'not_found', `no route ${req.method} ${req.url.split('?')[0]}`);
}

// ---- JSON bodies ------------------------------------------------------------------------------

/**
 * JSON parser: fastify's (prototype-poisoning safe), but an empty body is `{}` (so a POST without
 * a body still gets field-level messages) and a syntax error says where it is.
 */
export function installJsonParser(app: FastifyInstance) {
  // Any key is data: JSON.parse makes `__proto__` an own property (it never sets a prototype), so
  // an API answer carrying one is stored and returned as it came (issue 20). What reads request
  // bodies copies them with spreads or skips such names (server/engine/context.ts DENIED).
  const safeParse = app.getDefaultJsonParser('ignore', 'ignore');
  // JSON only: other bodies (fastify parses text/plain by default) answer 415.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, {});
    safeParse(req, text, (err: Error | null, value?: unknown) => {
      if (!err) return done(null, value);
      let detail = err.message;
      if ((err as FastifyError).code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
        try {
          JSON.parse(text);
        } catch (syntax) {
          detail = (syntax as Error).message;
          return done(new AppError(400, 'invalid_json', `request body is not valid JSON: ${detail}`), undefined);
        }
      }
      return done(new AppError(400, 'invalid_json', `request body rejected: ${detail}`), undefined);
    });
  });
}

// ---- auth -------------------------------------------------------------------------------------

/** Routes never behind the token (probes). */
export const ALWAYS_PUBLIC = new Set(['/health', '/healthz', '/readyz']);

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** The console's shell and assets (server/app/ui.ts): static code, no data; its API calls carry the token. */
function isConsoleShell(route: string): boolean {
  return route === '/' || route === '/ui' || route === '/ui/*';
}

/** The group an unauthenticated route pattern may belong to (PLAYFLOW_PUBLIC_ENDPOINTS). */
function groupOf(route: string): PublicEndpointGroup | undefined {
  if (route === '/metrics') return 'metrics';
  if (route === '/redoc' || route.startsWith('/redoc/') || route === '/docs' || route.startsWith('/docs/')) return 'docs';
  return undefined;
}

/**
 * Bearer-token check on every route but the probes (and the groups opened with
 * PLAYFLOW_PUBLIC_ENDPOINTS). Without a token configured, everything is open (spec: local
 * development; production puts a token or an authenticating proxy in front).
 */
export function installAuth(app: FastifyInstance, token: string | undefined, publicGroups: PublicEndpointGroup[]) {
  if (!token) return;
  const expected = digest(token);
  app.addHook('onRequest', async (req: FastifyRequest) => {
    const route = req.routeOptions.url;
    if (route !== undefined) {
      if (ALWAYS_PUBLIC.has(route) || isConsoleShell(route)) return;
      const g = groupOf(route);
      if (g && publicGroups.includes(g)) return;
      // A route that authenticates its requests itself (webhook deliveries: an HMAC signature).
      if ((req.routeOptions.config as { publicRoute?: boolean } | undefined)?.publicRoute === true) return;
    }
    const header = req.headers.authorization;
    const m = typeof header === 'string' ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
    if (!m) throw unauthorized('missing bearer token: send Authorization: Bearer <PLAYFLOW_API_TOKEN>');
    if (!timingSafeEqual(digest(m[1].trim()), expected)) throw unauthorized('invalid bearer token');
  });
}

// ---- metrics ----------------------------------------------------------------------------------

export function installRequestMetrics(app: FastifyInstance) {
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    metrics.httpRequests.inc({ method: req.method, route, status: String(reply.statusCode) });
    metrics.httpDuration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
    req.log.debug({ method: req.method, url: req.url.split('?')[0], // a query string may carry a credential
      status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
    done();
  });
}

// ---- helpers for routes -----------------------------------------------------------------------

/** A schema with its OpenAPI tag; every route must have one so /docs groups it. */
/** Generic so a type provider (TypeBox, common/contract/) still infers the request types from it. */
export function routeSchema<S extends FastifySchema & { description?: string }>(tag: string, summary: string, schema: S): S & { tags: string[]; summary: string } {
  const response = schema.response as Record<string, Record<string, unknown>> | undefined;
  if (response) {
    for (const [code, r] of Object.entries(response)) {
      if (r && typeof r === 'object' && r.description === undefined && /^2/.test(code)) {
        response[code] = { ...r, description: code === '201' ? 'Created' : 'OK' };
      }
    }
    // every route with a body can answer these two (the body limit and the JSON-only parser)
    if (schema.body) for (const [code, r] of Object.entries(errors(413, 415))) response[code] ??= r;
  }
  return { tags: [tag], summary, ...schema };
}

const INT64_MAX = 2n ** 63n - 1n;

/** `"12"` or `12` → `"12"`; anything else (should not pass validation) → 400. */
export function toId(v: unknown, field: string): string {
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) {
    if (!Number.isSafeInteger(v)) throw badRequest(`field '${field}': ids above 2^53 lose precision as JSON numbers; send them as decimal strings`);
    return String(v);
  }
  if (typeof v === 'string' && /^[0-9]{1,19}$/.test(v)) {
    if (BigInt(v) > INT64_MAX) throw badRequest(`field '${field}' is out of range for an int64 id`);
    return v.replace(/^0+(?=\d)/, '');
  }
  throw badRequest(`field '${field}' must be an id: a decimal string or a non-negative integer`);
}
