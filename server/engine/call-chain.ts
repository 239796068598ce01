/**
 * A call's chain: the calls one loop item (or the single call) makes before its outcome is final.
 * Error-side retry policies re-run a failed call with backoff; success-side ones collect the page,
 * sink it and ask for the next one (pagination, polling); legacy `loop.pagination` does both its
 * own way. These functions only decide: the Builder records their effects in `action_completed`
 * and issues the follow-up call, so the chain's state changes through the reducer alone.
 */
import type { Json, JsonObject, RetryPolicy, RetryThen, Step, Tool } from '../../playbook/types.js';
import { getPath } from './context.js';
import { StepError, cond, render, renderTool } from './render.js';
import { withoutLiterals } from './rules.js';
import { combine, isObject, type Chain, type CollectMode, type CommandRecord, type Effects, type RunState } from './state.js';

/** Case `retry` and error-side retry policies without max_attempts. */
export const DEFAULT_RETRY_ATTEMPTS = 3;
/** Success-side (pagination/polling) policies without max_attempts. */
export const DEFAULT_MAX_PAGES = 1000;
export const DEFAULT_INITIAL_DELAY_S = 1;
export const DEFAULT_BACKOFF_MULTIPLIER = 2;
/** Default jitter: ±20 % of the delay. */
export const DEFAULT_JITTER = 0.2;

export interface ItemBinding {
  name: string;
  value: Json;
  index: number;
}

/** The next call of the same chain: an error retry, the next page, or a case `call`/`retry`. */
export interface FollowUp {
  tool: Tool;
  attempt: number;
  chainIndex: number;
  delay: number;
  reason: 'retry' | 'page' | 'call';
}

/** A finished call as the retry policies and case rules see it. */
export interface CallView {
  rec: CommandRecord;
  run: RunState;
  /** The chain's key in `run.chains`: the loop item, or `-`. */
  key: string;
  chain: Chain;
  payload: JsonObject;
  raw: Json | undefined;
  view: unknown;
  error: unknown;
  /** The loop item binding (`undefined` outside loops). */
  item: ItemBinding | undefined;
  /** A step template context with these names added. */
  scope(extra: Record<string, unknown>): Record<string, unknown>;
  /** The call.done template context, with the chain's pages so far (also under `into`). */
  ctx(pages: Json | undefined, into?: string): Record<string, unknown>;
}

/** What the retry policies or legacy pagination made of a call, before the case rules. */
export interface ChainStep {
  effects: Effects;
  sinks: Tool[];
  follow?: FollowUp;
  exhausted?: JsonObject;
  pages?: Json;
  into?: string;
}

/** Merges overrides into a tool config: objects one level deep, `url` is `endpoint`. */
export function mergeTool(tool: Tool, overrides: Json): Tool {
  const out: Record<string, Json | undefined> = { ...tool };
  if (!isObject(overrides)) return tool;
  for (const [k0, v] of Object.entries(overrides)) {
    const k = k0 === 'url' ? 'endpoint' : k0;
    const prev = out[k];
    out[k] = isObject(prev) && isObject(v) ? { ...prev, ...v } : v;
  }
  return out as Tool;
}

function backoffMs(initialS: number, multiplier: number, attempt: number, jitter: number, random: () => number): number {
  const base = initialS * 1000 * Math.pow(multiplier, Math.max(0, attempt - 1));
  return Math.max(0, Math.round(base * (1 + jitter * (2 * random() - 1))));
}

/** The reference's `max_delay` (seconds) as a cap on a backoff delay (ms). */
function capped(delayMs: number, maxDelayS: number | undefined): number {
  return typeof maxDelayS === 'number' && maxDelayS >= 0 ? Math.min(delayMs, maxDelayS * 1000) : delayMs;
}

function jitterOf(b: Backoff): number {
  const j: unknown = b.jitter;
  if (j === false || j === 0) return 0;
  if (typeof j === 'number' && j > 0) return Math.min(1, j);
  return DEFAULT_JITTER;
}

/** The settings a backoff reads: a retry policy's `then` or a case `retry` action. */
export interface Backoff {
  initial_delay?: number;
  backoff_multiplier?: number;
  jitter?: number | boolean;
  max_delay?: number;
}

/** Delay (ms) before retry number `attempt + 1`; `random` comes from the input so a decision replays. */
export function backoffDelay(b: Backoff, attempt: number, random: () => number): number {
  return capped(backoffMs(
    b.initial_delay ?? DEFAULT_INITIAL_DELAY_S, b.backoff_multiplier ?? DEFAULT_BACKOFF_MULTIPLIER,
    attempt, jitterOf(b), random,
  ), b.max_delay);
}

/** `T` with its `K` settings as numbers: what `numbers` makes of them. */
export type Numbered<T, K extends keyof T> = Omit<T, K> & { [P in K]: Exclude<T[P], string> };

/**
 * The settings `keys` of `o` as numbers: one written as a template is rendered in `ctx` now, when
 * it applies (a count from the workload, a delay from vars). A rendering that is no number fails
 * the step, naming the field.
 */
export function numbers<T extends object, K extends keyof T & string>(o: T, keys: readonly K[], ctx: object, field: string): Numbered<T, K> {
  let out: T = o;
  for (const k of keys) {
    const v = o[k];
    if (typeof v !== 'string') continue;
    const r = render(v, ctx, `${field}.${k}`);
    const n = typeof r === 'number' ? r : typeof r === 'string' && r.trim() !== '' ? Number(r) : NaN;
    if (!Number.isFinite(n)) throw new StepError({ message: `${field}.${k} must be a number, but '${v}' rendered to ${JSON.stringify(r)}`, field: `${field}.${k}` });
    // counts and delays: the literal forms are refused at registration (playbook/normalize.ts)
    if (n < 0) throw new StepError({ message: `${field}.${k} must not be negative, but '${v}' rendered to ${n}`, field: `${field}.${k}` });
    if (out === o) out = { ...o };
    (out as Record<string, unknown>)[k] = n;
  }
  return out as unknown as Numbered<T, K>;
}

export const BACKOFF_KEYS = ['max_attempts', 'initial_delay', 'backoff_multiplier', 'max_delay'] as const;

/** Legacy `loop.pagination`: its own retry of failed pages, merge_path and continue_while. */
export function legacyPage(def: Step, c: CallView, ok: boolean): ChainStep {
  const pg = def.loop!.pagination!;
  const { rec, chain } = c;
  const out: ChainStep = { effects: {}, sinks: [], pages: chain.pages };
  if (!ok) {
    const retry = numbers(pg.retry, ['max_attempts', 'initial_delay', 'max_delay'], c.ctx(chain.pages), 'loop.pagination.retry');
    if (rec.attempt < retry.max_attempts) {
      const exp = retry.backoff === 'exponential' ? Math.pow(2, rec.attempt - 1) : 1;
      const delay = Math.min(retry.initial_delay * exp, retry.max_delay) * 1000;
      out.follow = { tool: rec.tool, attempt: rec.attempt + 1, chainIndex: chain.index, delay, reason: 'retry' };
    } else if (retry.max_attempts > 1) {
      out.exhausted = { message: `Pagination request failed after ${rec.attempt} attempts`, attempts: rec.attempt };
    }
    return out;
  }
  const value = getPath(c.raw, pg.merge_path);
  const op = { mode: LEGACY_MERGE[pg.merge_strategy] ?? 'concat', value };
  out.pages = combine(op.mode, chain.pages, value);
  out.effects.chain = { key: c.key, op };
  const lctx = c.scope({
    run: c.run, step: def.step, item: c.item, event: { name: 'call.done', payload: c.payload }, response: c.raw, iteration: chain.index - 1, accumulated: out.pages,
  });
  const { max_iterations } = numbers(pg, ['max_iterations'], lctx, 'loop.pagination');
  if (chain.index < max_iterations && cond(pg.continue_while, lctx, 'loop.pagination.continue_while')) {
    let tool = rec.tool;
    const np = pg.next_page ?? {};
    if (np.params) tool = mergeTool(tool, { params: render(np.params, lctx, 'loop.pagination.next_page.params') });
    if (np.headers) tool = mergeTool(tool, { headers: render(np.headers, lctx, 'loop.pagination.next_page.headers') });
    if (np.body) {
      const bodyField = isObject(tool.data) && tool.json === undefined ? 'data' : 'json';
      tool = mergeTool(tool, { [bodyField]: render(np.body, lctx, 'loop.pagination.next_page.body') });
    }
    out.follow = { tool, attempt: 1, chainIndex: chain.index + 1, delay: 0, reason: 'page' };
    out.effects.chain.index = chain.index + 1;
  }
  return out;
}

/**
 * Unified retry policies: the first that handles the call's outcome (`handles`) and whose `when`
 * holds retries an error (backoff) or, on success, collects the page, sinks it and asks for the
 * next one (polling, pagination).
 */
export function retryPolicies(def: Step, c: CallView, ok: boolean, random: () => number): ChainStep {
  const { rec, chain, key } = c;
  const out: ChainStep = { effects: {}, sinks: [], pages: chain.pages };
  const policies = def.retry ?? [];
  if (!policies.length) return out;
  const pctx = c.ctx(chain.pages);
  const i = policies.findIndex((p, k) => handles(p, ok) && cond(p.when, pctx, `retry[${k}].when`));
  if (i < 0) {
    if (!ok) return out;
    // the last page of a paginated chain is collected (and sunk) like the others
    const pi = chain.policy ?? firstCollectPolicy(def);
    if (pi === undefined) return out;
    const then = policies[pi].then;
    Object.assign(out, collectPage(then, c.view, chain.pages, key, pi, out.effects));
    const sink = chain.policy !== undefined ? sinkOf(then) : undefined;
    if (sink) out.sinks.push(renderTool(sink, c.ctx(out.pages, out.into), `retry[${pi}].then.sink`));
    return out;
  }
  const then = numbers(policies[i].then, BACKOFF_KEYS, pctx, `retry[${i}].then`);
  if (!ok) {
    const max = then.max_attempts ?? DEFAULT_RETRY_ATTEMPTS;
    if (rec.attempt >= max) {
      out.exhausted = { message: `Retry attempts exhausted (${max})`, attempts: rec.attempt, policy: i };
      return out;
    }
    const tool = then.next_call ? mergeTool(rec.tool, render(then.next_call, pctx, `retry[${i}].then.next_call`)) : rec.tool;
    const delay = backoffDelay(then, rec.attempt, random);
    out.follow = { tool, attempt: rec.attempt + 1, chainIndex: chain.index, delay, reason: 'retry' };
    return out;
  }
  Object.assign(out, collectPage(then, c.view, chain.pages, key, i, out.effects));
  const sink = sinkOf(then);
  if (sink) out.sinks.push(renderTool(sink, c.ctx(out.pages, out.into), `retry[${i}].then.sink`));
  const max = then.max_attempts ?? DEFAULT_MAX_PAGES;
  if (chain.index < max) {
    const nctx = c.ctx(out.pages, out.into);
    const tool = then.next_call ? mergeTool(rec.tool, render(then.next_call, nctx, `retry[${i}].then.next_call`)) : rec.tool;
    const delay = then.initial_delay ? then.initial_delay * 1000 : 0;
    out.follow = { tool, attempt: 1, chainIndex: chain.index + 1, delay, reason: 'page' };
    out.effects.chain = { ...(out.effects.chain ?? { key }), index: chain.index + 1, policy: i };
  }
  return out;
}

/** Folds the page into the chain's accumulator (recorded as the `chain` effect). */
function collectPage(then: RetryThen, view: unknown, prev: Json | undefined, key: string, policy: number, effects: Effects): { pages: Json | undefined; into?: string } {
  if (!then.collect) return { pages: prev };
  const value = getPath(view, then.collect.path);
  const mode: CollectMode = then.collect.strategy === 'replace' ? 'replace' : then.collect.strategy === 'merge' ? 'merge' : 'concat';
  effects.chain = { ...(effects.chain ?? { key }), key, op: { mode, value }, policy };
  return { pages: combine(mode, prev, value), into: then.collect.into };
}

const LEGACY_MERGE: Record<string, CollectMode> = { append: 'concat', extend: 'flatten', replace: 'replace', collect: 'push' };

/** A policy's sink; reference-era playbooks put it under `per_iteration`. */
function sinkOf(then: RetryThen): Tool | undefined {
  const per = (then as { per_iteration?: { sink?: Tool } }).per_iteration;
  return then.sink ?? per?.sink;
}

/**
 * The policy that collects a last page no `when` matched, when the chain did not name one: the
 * first collecting policy that handles successful results.
 */
function firstCollectPolicy(def: Step): number | undefined {
  const i = (def.retry ?? []).findIndex((p) => p.then.collect && handles(p, true));
  return i >= 0 ? i : undefined;
}

type Side = 'error' | 'response' | 'either';
const sides = new WeakMap<object, Side>();
const ERROR_REFS = /(?<![\w.])error\b|\bevent\.payload\.error\b/;
const RESPONSE_REFS = /(?<![\w.])(response|page|pages|result)\b|\bevent\.payload\.response\b/;

/**
 * Whether a policy handles this outcome. Spec ("Unified retry"): policies whose condition
 * concerns `error` handle failures, those whose condition concerns `response` handle successful
 * results. Without the split, `error.status != 404` (true when there is no error) re-sent every
 * successful call as a "next page", and a polling condition retried failures. A condition reading
 * both, or neither (`_retry.index < 5`), is tried on either outcome.
 */
function handles(policy: RetryPolicy, ok: boolean): boolean {
  let side = sides.get(policy);
  if (side === undefined) {
    const code = withoutLiterals(String(policy.when));
    const onError = ERROR_REFS.test(code);
    const onResponse = RESPONSE_REFS.test(code);
    side = onError === onResponse ? 'either' : onError ? 'error' : 'response';
    sides.set(policy, side);
  }
  return side === 'either' || side === (ok ? 'response' : 'error');
}
