/**
 * The template context of the spec's "Template context" table, built by the engine (and the
 * server's render endpoint) for every evaluation.
 *
 * Top-level names resolve, highest first:
 *   1. the loop iterator variable (per item; deliberately above everything else: a workload key
 *      or var that happens to share the iterator's name must not replace the current item),
 *   2. vars (execution variables),
 *   3. step results by step name,
 *   4. workload keys,
 *   5. built-ins: workload, args, vars, results, execution_id, job, payload, event, response,
 *      error, page, pages, ctx, keychain, _retry, _loop, iteration, result.
 * So `{{ foo }}` finds a var named foo before a step named foo before a workload key foo before a
 * built-in named foo; the namespaced forms (`vars.foo`, `workload.foo`) always reach their source.
 *
 * Step results, `response`, `page`, `error` and `result` are exposed as result views (see
 * `resultView`): the one `.data` rule of the README, the same for every tool kind.
 */
import type { Json, JsonObject } from '../types.js';
import { isDeniedName } from './sandbox.js';

export interface ContextParts {
  /** Playbook workload (global, read-only after start). */
  workload?: JsonObject;
  /** Args of the current step. */
  args?: JsonObject;
  /** Execution variables (vars blocks and the vars API). */
  vars?: JsonObject;
  /** Results of previous steps by step name, as recorded (HTTP envelopes or any JSON). */
  steps?: Record<string, Json | undefined>;
  execution_id?: string | number;
  /** Job / command metadata (built-in `job`). */
  job?: Json;
  /** Payload given when the execution was started. */
  payload?: JsonObject;
  /** The event under evaluation (case `when`). `response`/`error` default to its payload's. */
  event?: { name: string; payload?: JsonObject | null; [k: string]: Json | undefined };
  /** call.done on success: the raw tool response (an HTTP envelope is unwrapped to its body). */
  response?: Json;
  /** call.done on failure (has `status` for HTTP). */
  error?: Json;
  /** Step-local context written by `set` actions. */
  ctx?: JsonObject;
  /** Resolved keychain entries by name (`keychain.<name>.<field>`). */
  keychain?: JsonObject;
  /** Retry/pagination counters: `_retry.index` (1-based), `_retry.count`. */
  retry?: { index: number; count: number };
  /** Accumulated pages when a retry policy's `collect.into` is set. */
  pages?: Json;
  /** Pagination iteration (defaults to `retry.index`) or legacy 0-based iteration. */
  iteration?: number;
  /** Loop iterator: `{{ <iterator> }}` is the current item. */
  loop?: { iterator: string; item: Json; index?: number };
  /** The current step's result, for the step's `vars` block (`{{ result.x }}`). */
  result?: Json;
  /** Further built-in names (e.g. legacy pagination's `accumulated`); lowest priority. */
  extra?: Record<string, Json | undefined>;
}

/** The object passed to renderValue/evalCondition. Plain data; treat as read-only. */
export type TemplateContext = Record<string, unknown>;

const ENVELOPE_KEYS = new Set(['id', 'status', 'data', 'headers', 'meta', 'url', 'elapsed', 'reason', 'status_code', 'duration', 'execution_id', 'step', 'encoding']);

function isPlain(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/**
 * An HTTP tool envelope `{id, status, data, headers}`: a `data` field, a numeric `status`, and no
 * key an envelope does not have. A python or SQL result such as `{status: 'ok', data: {...}}` is
 * not one (its status is not a number), so it is never unwrapped.
 */
export function isHttpEnvelope(v: unknown): v is { data: Json; status?: Json; id?: Json } {
  if (!isPlain(v) || !hasOwn(v, 'data') || typeof v.status !== 'number') return false;
  return Object.keys(v).every((k) => ENVELOPE_KEYS.has(k));
}

/**
 * The one `.data` rule (README "Results and .data"), the same for every tool kind, for step
 * results by name, `response`, `page`, `error` and `result`:
 *   1. the value of a result is its body: the API body for an HTTP envelope, the result itself
 *      for anything else (`{{ step }}`, `tojson`, iteration and `items()` see exactly the body);
 *   2. `x.data` is the body's own `data` field when it has one, else the body itself — so
 *      `response.data.x` (the spec's envelope wording) and `step.x` reach the same field;
 *   3. a field the body lacks is looked up in the other of the two: in `x.data` when `x` has its
 *      own `data` (`x.items` for `{data: {items}}`), in the body when reading `x.data`
 *      (`response.data.paging` for a body `{data: [...], paging}`); then in the envelope
 *      (`response.status`, `error.status`).
 * The extra names are non-enumerable own properties of shallow copies: serialisation sees the
 * recorded values only, and the records are never changed.
 */
export function resultView(result: Json | undefined): unknown {
  if (result === null || typeof result !== 'object') return result;
  const envelope = isHttpEnvelope(result) ? result : undefined;
  const body = envelope ? (envelope.data as unknown) : result;
  if (body === null || typeof body !== 'object') return body;
  const view = copy(body);
  const own = hasOwn(body, 'data') ? (body as Record<string, unknown>).data : undefined;
  if (own !== null && typeof own === 'object') {
    // rule 2 + 3: `x.data` is the body's data, falling back to the body's other fields
    const inner = copy(own);
    hideMissing(inner, body);
    if (!hasOwn(inner, 'data')) hide(inner, 'data', own);
    hideMissing(inner, envelope);
    Object.defineProperty(view, 'data', { value: inner, enumerable: true, writable: false, configurable: true });
    hideMissing(view, own);
  } else if (!hasOwn(body, 'data')) {
    hide(view, 'data', view);
  }
  hideMissing(view, envelope);
  return view;
}

function copy(v: object): Record<string, unknown> | unknown[] {
  return Array.isArray(v) ? [...(v as unknown[])] : { ...(v as Record<string, unknown>) };
}

function hide(view: object, k: string, v: unknown): void {
  Object.defineProperty(view, k, { value: v, enumerable: false, writable: false, configurable: true });
}

/** Adds, hidden, every field of `from` the view does not have (never `data`, never a denied name). */
function hideMissing(view: object, from: unknown): void {
  if (!isPlain(from)) return;
  for (const k of Object.keys(from)) if (k !== 'data' && !isDeniedName(k) && !hasOwn(view, k)) hide(view, k, from[k]);
}

function spread(into: TemplateContext, from: Record<string, unknown> | undefined, map?: (v: unknown) => unknown): void {
  if (!from) return;
  for (const k of Object.keys(from)) {
    if (isDeniedName(k)) continue; // unreachable from templates anyway; never a prototype write
    const v = from[k];
    if (v === undefined) continue;
    into[k] = map ? map(v) : v;
  }
}

/** Builds the template context; see the module comment for the names and their priority. */
export function buildContext(parts: ContextParts): TemplateContext {
  const c: TemplateContext = {};
  const eventPayload = isPlain(parts.event?.payload) ? (parts.event?.payload as JsonObject) : undefined;
  const response = parts.response !== undefined ? parts.response : eventPayload?.response;
  const error = parts.error !== undefined ? parts.error : eventPayload?.error;
  const retry = parts.retry ? { index: parts.retry.index, count: parts.retry.count } : undefined;
  const steps: Record<string, unknown> = {};
  if (parts.steps) for (const k of Object.keys(parts.steps)) if (parts.steps[k] !== undefined && !isDeniedName(k)) steps[k] = parts.steps[k];

  // 5. built-ins (lowest): extra first so that the named built-ins win over it.
  spread(c, parts.extra);
  const builtins: Record<string, unknown> = {
    workload: parts.workload ?? {},
    args: parts.args ?? {},
    vars: parts.vars ?? {},
    results: steps,
    execution_id: parts.execution_id,
    job: parts.job,
    payload: parts.payload ?? {},
    event: parts.event ? { ...parts.event, payload: parts.event.payload ?? {} } : undefined,
    response: response === undefined ? undefined : resultView(response),
    page: response === undefined ? undefined : resultView(response),
    error: error === undefined ? undefined : resultView(error),
    pages: parts.pages,
    ctx: parts.ctx ?? {},
    keychain: parts.keychain ?? {},
    _retry: retry,
    _loop: retry,
    iteration: parts.iteration ?? retry?.index,
    result: parts.result === undefined ? undefined : resultView(parts.result),
  };
  spread(c, builtins);
  // 4. workload keys, 3. step results, 2. vars
  spread(c, parts.workload);
  spread(c, steps, (v) => resultView(v as Json));
  spread(c, parts.vars);
  // 1. loop iterator
  if (parts.loop && !isDeniedName(parts.loop.iterator)) c[parts.loop.iterator] = parts.loop.item;
  return c;
}
