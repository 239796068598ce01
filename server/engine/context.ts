/**
 * Template context the engine builds for conditions, tool config, actions and vars. Same names
 * and priority as `buildContext` of playbook/template (highest first): the loop iterator, vars,
 * step results by name, workload keys, then built-ins (workload, args, vars, results, payload,
 * execution_id, job, event, response, page, error, pages, ctx, _retry, _loop, iteration, result,
 * the step's `collect` accumulators and other per-evaluation names).
 *
 * The engine assembles it itself rather than calling `buildContext` for one reason: cost. The
 * part that depends only on the execution (step result views, vars, workload) is built once per
 * decision, and result views are cached per result object, so an evaluation costs a shallow
 * copy instead of re-deriving the view of every step result. The views themselves are the
 * template module's `resultView` (envelope `data` extracted, `.data` still reaching it).
 */
import type { Json, JsonObject, Playbook } from '../../playbook/types.js';
import { resultView as templateResultView } from '../../playbook/template/index.js';
import type { EngineState, RunState } from './state.js';

const views = new WeakMap<object, unknown>();

/** The normalised view of a result (cached per result object; results are never mutated). */
export function resultView(r: Json | undefined): unknown {
  if (r === null || typeof r !== 'object') return r;
  let v = views.get(r);
  if (v === undefined) {
    v = templateResultView(r);
    views.set(r, v);
  }
  return v;
}

/** Reads a dot path (`data.items`, `links.next`, `a.0.b`) from a value or view. */
export function getPath(value: unknown, path: string | undefined): Json {
  if (!path) return (value ?? null) as Json;
  let cur: any = value;
  for (const seg of path.split('.')) {
    if (cur === null || cur === undefined || typeof cur !== 'object') return null;
    cur = Object.prototype.hasOwnProperty.call(cur, seg) ? cur[seg] : undefined;
  }
  return (cur ?? null) as Json;
}

export interface BaseContext {
  /** Built-ins (lowest) overlaid by workload keys, step result views and vars: the part of every
   *  context that does not depend on the step run. Built once per decision, then patched. */
  full: Record<string, unknown>;
  /** Var names currently visible (engine vars and external vars), which outrank step names. */
  varNames: Set<string>;
}

const DENIED = new Set(['constructor', 'prototype', '__proto__']);
const hasOwn = Object.prototype.hasOwnProperty;

export function baseContext(state: EngineState, playbook: Playbook, externalVars: JsonObject | undefined): BaseContext {
  const vars = externalVars ? { ...state.vars, ...externalVars } : state.vars;
  const results: Record<string, unknown> = {};
  // latest result of every step that completed at least once (a re-run keeps it until it completes)
  for (const name of Object.keys(state.steps)) {
    const sum = state.steps[name];
    if (sum.result !== undefined && !DENIED.has(name)) results[name] = resultView(sum.result);
  }
  const workload = effectiveWorkload(playbook, state.payload);
  const full: Record<string, unknown> = { workload, vars, results, payload: state.payload, execution_id: state.execution_id, keychain: {} };
  for (const src of [workload, results, vars]) {
    for (const k of Object.keys(src)) if (!DENIED.has(k)) full[k] = src[k];
  }
  return { full, varNames: new Set(Object.keys(vars)) };
}

/** Names baseContext sets before the overlays; a patch of one of them may not match a fresh build. */
const BUILT_IN = new Set(['workload', 'vars', 'results', 'payload', 'execution_id', 'keychain']);

/**
 * A step completed: its result view becomes visible by name (unless a var has that name).
 * Returns false when the patched base may differ from a fresh build (a step named as a built-in).
 */
export function patchStepResult(base: BaseContext, step: string, result: Json): boolean {
  if (DENIED.has(step)) return true;
  const view = resultView(result);
  // the base belongs to one decision and contexts built from it are used synchronously: patch in place
  (base.full.results as Record<string, unknown>)[step] = view;
  if (!base.varNames.has(step)) base.full[step] = view;
  return !BUILT_IN.has(step);
}

/** Variables were set: they outrank everything but the iterator. Returns false as patchStepResult. */
export function patchVars(base: BaseContext, vars: JsonObject, externalVars: JsonObject | undefined): boolean {
  const merged = externalVars ? { ...vars, ...externalVars } : vars;
  base.full.vars = merged;
  let clean = true;
  for (const k of Object.keys(merged)) {
    if (DENIED.has(k)) continue;
    base.full[k] = merged[k];
    base.varNames.add(k);
    if (BUILT_IN.has(k)) clean = false;
  }
  return clean;
}

interface KeptBase {
  base: BaseContext;
  vars: JsonObject;
  externalVars: string;
  playbook: Playbook;
  payload: JsonObject;
  executionId: string;
}

/**
 * Base contexts handed from one decision to the next, keyed by the `steps` map of the state the
 * decision ended with. Building a base is O(steps) (every step's result view), which made each
 * step of a long execution slower than the last; a decision patches the base it took as its
 * events complete steps and set vars, so the base it ends with is the one a fresh build would give
 * for its final state. Taking one removes it: a base is patched in place by one decision only.
 */
const kept = new WeakMap<object, KeptBase>();

/** After a decision: its base, patched to the final `state`, for the next decision on that state. */
export function keepBase(base: BaseContext, state: EngineState, playbook: Playbook, externalVars: JsonObject | undefined): void {
  kept.set(state.steps, {
    base, vars: state.vars, externalVars: JSON.stringify(externalVars ?? null), playbook, payload: state.payload, executionId: state.execution_id,
  });
}

/** The base a previous decision ended with on this state, when everything it was built from is the same. */
export function takeBase(state: EngineState, playbook: Playbook, externalVars: JsonObject | undefined): BaseContext | undefined {
  const k = kept.get(state.steps);
  if (!k) return undefined;
  kept.delete(state.steps);
  const same = k.vars === state.vars && k.playbook === playbook && k.payload === state.payload && k.executionId === state.execution_id &&
    k.externalVars === JSON.stringify(externalVars ?? null);
  return same ? k.base : undefined;
}

const workloads = new WeakMap<object, { payload: JsonObject; workload: JsonObject }>();

/**
 * The workload templates see: the playbook's workload with the start payload deep-merged over it
 * (payload wins; objects merge key by key, anything else replaces). Fixed for the execution
 * ("read-only after the start"); the raw payload stays reachable as `payload`.
 */
export function effectiveWorkload(playbook: Playbook, payload: JsonObject): JsonObject {
  const base = playbook.workload ?? {};
  if (!payload || Object.keys(payload).length === 0) return base;
  const hit = workloads.get(playbook);
  if (hit && hit.payload === payload) return hit.workload;
  const workload = deepMerge(base, payload);
  workloads.set(playbook, { payload, workload });
  return workload;
}

function deepMerge(a: JsonObject, b: JsonObject): JsonObject {
  const out: JsonObject = { ...a };
  for (const [k, v] of Object.entries(b)) {
    if (DENIED.has(k)) continue;
    const prev = out[k];
    out[k] = isPlain(prev) && isPlain(v) ? deepMerge(prev, v) : v;
  }
  return out;
}

function isPlain(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export interface ContextExtras {
  run?: RunState;
  step?: string;
  /** Loop item binding (iterator name → item). */
  item?: { name: string; value: Json; index: number };
  [k: string]: unknown;
}

/**
 * A context for one evaluation. It is a thin object whose prototype is the shared base (the
 * template sandbox resolves top-level names through non-builtin prototypes), so building one
 * costs O(per-evaluation names), not O(steps). Per-evaluation built-ins never shadow a name of
 * the base (workload key, step, var); the iterator shadows everything.
 */
export function stepContext(base: BaseContext, state: EngineState, extras: ContextExtras): Record<string, unknown> {
  const { run, step, item, ...rest } = extras;
  const full = base.full;
  const ctx = Object.create(full) as Record<string, unknown>;
  const put = (k: string, v: unknown): void => {
    if (v !== undefined && !hasOwn.call(full, k) && !DENIED.has(k)) ctx[k] = v;
  };
  if (run) for (const k of Object.keys(run.acc)) put(k, run.acc[k]);
  put('args', run?.args ?? {});
  // collect accumulators are also readable as ctx.<into> (set values win on a name clash)
  put('ctx', run && Object.keys(run.acc).length ? { ...run.acc, ...run.ctx } : (run?.ctx ?? {}));
  put('job', { execution_id: state.execution_id, step: step ?? null, run: run?.run ?? 0, path: state.path });
  for (const k of Object.keys(rest)) put(k, rest[k]);
  if (rest._retry !== undefined) put('_loop', rest._retry);
  if (item) {
    ctx[item.name] = item.value;
    put('loop_index', item.index);
  }
  return ctx;
}

/**
 * `ctx` as it reads once `step` has completed with `result` (spec order: step_completed, then the
 * step's vars, then transitions): the step's result by name (unless a var has that name, as
 * patchStepResult) and the variables its vars block set (outranking steps; external vars still
 * outrank them, as patchVars). A fork: `ctx` is unchanged.
 */
export function asCompleted(
  ctx: Record<string, unknown>, base: BaseContext, step: string, result: Json, variables: JsonObject, externalVars: JsonObject | undefined,
): Record<string, unknown> {
  const out = forkContext(ctx);
  if (!DENIED.has(step)) {
    const view = resultView(result);
    out.results = { ...(base.full.results as Record<string, unknown>), [step]: view };
    if (!base.varNames.has(step)) out[step] = view;
  }
  const names = Object.keys(variables);
  if (names.length) {
    out.vars = { ...(base.full.vars as JsonObject), ...variables, ...externalVars };
    for (const k of names) if (!DENIED.has(k) && !(externalVars && hasOwn.call(externalVars, k))) out[k] = variables[k];
  }
  return out;
}

/** A copy of a context that may be changed without touching the original. */
export function forkContext(ctx: Record<string, unknown>): Record<string, unknown> {
  return Object.assign(Object.create(Object.getPrototypeOf(ctx) as object) as Record<string, unknown>, ctx);
}
