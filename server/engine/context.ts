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
   *  context that does not depend on the step run. Built once per decision and version. */
  full: Record<string, unknown>;
  /** Names that outrank per-evaluation built-ins (workload keys, step names, var names). */
  names: Set<string>;
}

const DENIED = new Set(['constructor', 'prototype', '__proto__']);

export function baseContext(state: EngineState, playbook: Playbook, externalVars: JsonObject | undefined): BaseContext {
  const vars = externalVars ? { ...state.vars, ...externalVars } : state.vars;
  const results: Record<string, unknown> = {};
  for (const name of Object.keys(state.results)) if (!DENIED.has(name)) results[name] = resultView(state.results[name]);
  const workload = playbook.workload ?? {};
  const full: Record<string, unknown> = { workload, vars, results, payload: state.payload, execution_id: state.execution_id, keychain: {} };
  const names = new Set<string>();
  for (const src of [workload, results, vars]) {
    for (const k of Object.keys(src)) {
      if (DENIED.has(k)) continue;
      full[k] = src[k];
      names.add(k);
    }
  }
  return { full, names };
}

export interface ContextExtras {
  run?: RunState;
  step?: string;
  /** Loop item binding (iterator name → item). */
  item?: { name: string; value: Json; index: number };
  [k: string]: unknown;
}

export function stepContext(base: BaseContext, state: EngineState, extras: ContextExtras): Record<string, unknown> {
  const { run, step, item, ...rest } = extras;
  const ctx: Record<string, unknown> = { ...base.full };
  const names = base.names;
  const put = (k: string, v: unknown): void => {
    if (v !== undefined && !names.has(k) && !DENIED.has(k)) ctx[k] = v;
  };
  if (run) for (const k of Object.keys(run.acc)) put(k, run.acc[k]);
  put('args', run?.args ?? {});
  put('ctx', run?.ctx ?? {});
  put('job', { execution_id: state.execution_id, step: step ?? null, run: run?.run ?? 0, path: state.path });
  for (const k of Object.keys(rest)) put(k, rest[k]);
  if (rest._retry !== undefined) put('_loop', rest._retry);
  if (item) {
    ctx[item.name] = item.value;
    put('loop_index', item.index);
  }
  return ctx;
}
