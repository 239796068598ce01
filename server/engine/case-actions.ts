/**
 * Case actions: what the `then` of the first matching `case` entry does (README, semantic
 * decisions 1–3). Evaluating an entry only renders and records: the returned `Acts` hold the
 * state effects (recorded in `case_applied` or `action_completed` and applied by the reducer),
 * the sinks to issue and how the step ends, so the Builder alone emits events and the reducer
 * alone changes state.
 */
import type { Action, Json, JsonObject, Step, Tool } from '../../playbook/types.js';
import { forkContext, resultView } from './context.js';
import { cond, render, renderFrom, renderTool } from './render.js';
import { caseEvents } from './rules.js';
import { combine, isObject, type CollectMode, type Effects, type RenderedTarget } from './state.js';

export type RetryAction = Extract<Action, { action: 'retry' }>;

/** The rendered effect of one case entry's actions. */
export interface Acts {
  /** The entry's index in `case`, recorded as `entry`. */
  index: number;
  effects: Effects;
  sinks: Tool[];
  call?: JsonObject;
  retry?: RetryAction;
  next?: RenderedTarget[];
  fail?: string;
  skip?: boolean;
  /** Actions that mean nothing on this event (`call`/`retry` outside call.done), recorded so an author sees them dropped. */
  ignored: string[];
}

/**
 * How the entry ends the step. Several ending actions may share one `then`; the strongest wins
 * (fail > skip > next > retry > call) so the outcome does not depend on the order they are written in.
 */
export type CaseEnding =
  | { kind: 'fail'; message: string; next?: RenderedTarget[] }
  | { kind: 'skip'; next?: RenderedTarget[] }
  | { kind: 'next'; next: RenderedTarget[] }
  | { kind: 'retry'; retry: RetryAction }
  | { kind: 'call'; overrides: JsonObject }
  | { kind: 'none' };

export function caseEnding(acts: Acts): CaseEnding {
  if (acts.fail !== undefined) return { kind: 'fail', message: acts.fail, next: acts.next };
  if (acts.skip) return { kind: 'skip', next: acts.next };
  if (acts.next) return { kind: 'next', next: acts.next };
  if (acts.retry) return { kind: 'retry', retry: acts.retry };
  if (acts.call) return { kind: 'call', overrides: acts.call };
  return { kind: 'none' };
}

/** Whether the step has case entries for this event (so contexts are only built when needed). */
export function hasCase(def: Step, on: string): boolean {
  return (def.case ?? []).some((e) => caseEvents(e, def).has(on));
}

/**
 * Where a `next` that ends the step renders its args: the spec orders a step's transitions after
 * step_completed and its vars, so they see the step's result by name and the variables its vars
 * block renders from it (engine.ts builds this from the entry's effects: a `result` action of the
 * entry sets that result). Given for call.done, where a `next` ends the step early.
 */
export type AtStepEnd = (ctx: Record<string, unknown>, effects: Effects) => Record<string, unknown>;

/** The first entry for `on` whose `when` holds, evaluated; null when none matches. */
export function evalCase(def: Step, on: string, ctx: Record<string, unknown>, atStepEnd?: AtStepEnd): Acts | null {
  const entries = def.case ?? [];
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (!caseEvents(entry, def).has(on)) continue;
    if (!cond(entry.when, ctx, `case[${i}].when`)) continue;
    return runActions(def, i, entry.then, ctx, on, atStepEnd);
  }
  return null;
}

/**
 * Each action sees the effects of the ones before it (`set` → `ctx`, `collect` → the accumulator,
 * `result` → `result`), on a fork of the context so the caller's stays as the event found it.
 * A render error throws `StepError`, naming the action's field.
 */
function runActions(def: Step, index: number, actions: Action[], ctx0: Record<string, unknown>, on: string, atStepEnd?: AtStepEnd): Acts {
  const ctx = forkContext(ctx0);
  const acts: Acts = { index, effects: {}, sinks: [], ignored: [] };
  const e = acts.effects;
  // with atStepEnd, a next renders once every action ran: the step's result may come after it
  const atEnd: Array<{ targets: NextTargets; ctx: Record<string, unknown>; field: string }> = [];
  actions.forEach((a, j) => {
    const field = `case[${index}].then[${j}]`;
    switch (a.action) {
      case 'set': {
        const patch = render(a.ctx, ctx, `${field}.set.ctx`);
        if (isObject(patch)) {
          e.ctx = { ...(e.ctx ?? {}), ...patch };
          ctx.ctx = { ...(ctx.ctx as JsonObject), ...patch };
        }
        break;
      }
      case 'collect': {
        const value = renderFrom(a.from, ctx, `${field}.collect.from`);
        const mode: CollectMode = a.mode === 'extend' ? 'concat' : 'push';
        (e.collect ??= []).push({ into: a.into, mode, value });
        ctx[a.into] = combine(mode, ctx[a.into] as Json | undefined, value);
        // collected values are readable as `<into>` and as `ctx.<into>`
        ctx.ctx = { ...(ctx.ctx as JsonObject), [a.into]: ctx[a.into] as Json };
        break;
      }
      case 'result':
        e.result = renderFrom(a.from, ctx, `${field}.result.from`);
        e.has_result = true;
        ctx.result = resultView(e.result);
        break;
      case 'sink':
        acts.sinks.push(renderTool(a.tool, ctx, `${field}.sink`));
        break;
      case 'call':
        if (on === 'call.done') acts.call = { ...(acts.call ?? {}), ...(render(a.overrides, ctx, `${field}.call`) as JsonObject) };
        else acts.ignored.push('call');
        break;
      case 'retry':
        if (on === 'call.done') acts.retry = a;
        else acts.ignored.push('retry');
        break;
      case 'next':
        if (atStepEnd) atEnd.push({ targets: a.targets, ctx: forkContext(ctx), field });
        else addNext(acts, def, a.targets, ctx, field);
        break;
      case 'fail':
        acts.fail = a.message !== undefined ? String(render(a.message, ctx, `${field}.fail.message`)) : 'Failed by case rule';
        break;
      case 'skip':
        acts.skip = true;
        break;
    }
  });
  // a fail or skip ends the step without step_completed and its vars: its next sees what it saw
  const completes = acts.fail === undefined && !acts.skip;
  for (const n of atEnd) addNext(acts, def, n.targets, completes ? atStepEnd!(n.ctx, e) : n.ctx, n.field);
  return acts;
}

type NextTargets = Extract<Action, { action: 'next' }>['targets'];

/** A next action's targets, their args rendered in `ctx`, added to the entry's. */
function addNext(acts: Acts, def: Step, targets: NextTargets, ctx: Record<string, unknown>, field: string): void {
  // next args never see the loop iterator (README rule 3): the target runs once, not per item
  const nctx = forkContext(ctx);
  const iter = def.loop?.iterator;
  if (iter) delete nctx[iter];
  delete nctx.loop_index;
  acts.next = [
    ...(acts.next ?? []),
    ...targets.map((t, k) => {
      const args = t.args ? render(t.args, nctx, `${field}.next[${k}].args`) : {};
      return { step: t.step, args: isObject(args) ? args : {} };
    }),
  ];
  acts.effects.next = acts.next;
}
