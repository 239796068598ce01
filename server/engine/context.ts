/**
 * Template context the engine builds for conditions, tool config, actions and vars.
 *
 * Resolution (spec "Template context"): bare names resolve to vars, then step results, then
 * workload, then built-ins; the namespaces `workload`, `vars`, `args`, `results`, `payload`,
 * `execution_id`, `job`, `ctx`, `event`, `response`, `error` always win over a bare name.
 *
 * Result views (DESIGN §5): a step result or an http `response` that is an envelope
 * `{id?, status?, data}` is unwrapped so that `x.field` reaches `data.field` while `x.data.field`
 * still works; when the body itself has a `data` field, `x.data` is the body's own `data`.
 * (The template module may later export `buildContext`; this engine-local view is the same rule.)
 */
import type { Json, JsonObject, Playbook } from '../../playbook/types.js';
import type { EngineState, RunState } from './state.js';
import { isObject } from './state.js';

const views = new WeakMap<object, unknown>();

/** The normalised view of a result: envelope `data` extracted, `.data` kept addressable. */
export function resultView(r: Json | undefined): unknown {
  if (!isObject(r) || !('data' in r)) return r;
  const cached = views.get(r);
  if (cached !== undefined) return cached;
  const data = r.data;
  let view: unknown;
  if (isObject(data)) {
    view = 'data' in data ? { ...data } : { ...data, data };
  } else if (Array.isArray(data)) {
    const copy = data.slice();
    Object.defineProperty(copy, 'data', { value: data, enumerable: false });
    view = copy;
  } else {
    view = data;
  }
  views.set(r, view);
  return view;
}

/** Reads a dot path (`data.items`, `links.next`, `a.0.b`) from a value or view. */
export function getPath(value: unknown, path: string | undefined): Json {
  if (!path) return (value ?? null) as Json;
  let cur: any = value;
  for (const seg of path.split('.')) {
    if (cur === null || cur === undefined) return null;
    cur = cur[seg];
  }
  return (cur ?? null) as Json;
}

export interface ContextExtras {
  run?: RunState;
  step?: string;
  /** Loop item binding (iterator name → item). */
  item?: { name: string; value: Json; index: number };
  [k: string]: unknown;
}

/** Built-ins and step results: the part of the context that does not depend on the step run. */
export function baseContext(state: EngineState, playbook: Playbook, externalVars: JsonObject | undefined): Record<string, unknown> {
  const vars = externalVars ? { ...state.vars, ...externalVars } : state.vars;
  const results: Record<string, unknown> = {};
  for (const [name, r] of Object.entries(state.results)) results[name] = resultView(r);
  const workload = playbook.workload ?? {};
  return {
    ...workload,
    ...results,
    ...vars,
    workload,
    vars,
    results,
    payload: state.payload,
    execution_id: state.execution_id,
  };
}

export function stepContext(base: Record<string, unknown>, state: EngineState, extras: ContextExtras): Record<string, unknown> {
  const { run, step, item, ...rest } = extras;
  const ctx: Record<string, unknown> = { ...base };
  if (run) {
    Object.assign(ctx, run.acc);
    ctx.args = run.args;
    ctx.ctx = run.ctx;
  } else {
    ctx.args = {};
    ctx.ctx = {};
  }
  ctx.job = { execution_id: state.execution_id, step: step ?? null, run: run?.run ?? 0, path: state.path };
  if (item) {
    ctx[item.name] = item.value;
    ctx.loop_index = item.index;
  }
  for (const [k, v] of Object.entries(rest)) if (v !== undefined) ctx[k] = v;
  return ctx;
}
