/**
 * The engine: decides what an event means for an execution. Every decision is expressed as
 * events, each applied to the state through the reducer of `state.ts` as soon as it is emitted;
 * commands are exactly the `command_issued` events' payloads. See README.md for the semantics.
 */
import { DEFAULT_POOL, type Json, type JsonObject, type Playbook, type Step, type Tool } from '../../playbook/types.js';
import { referencesName, renderValue } from '../../playbook/template/index.js';
import type { Command, Decision, EngineEvent, EngineInput, HandleOptions, StartInput } from './contract.js';
import { TERMINAL_STATUSES } from './contract.js';
import { asCompleted, baseContext, keepBase, patchStepResult, patchVars, resultView, stepContext, takeBase, type BaseContext } from './context.js';
import { caseEnding, evalCase, hasCase, type Acts, type CaseEnding } from './case-actions.js';
import { backoffDelay, legacyPage, mergeTool, numbers, retryPolicies, BACKOFF_KEYS, DEFAULT_RETRY_ATTEMPTS, type CallView, type FollowUp, type ItemBinding } from './call-chain.js';
import { ExecutionError, StepError, errMsg, render, renderTool } from './render.js';
import { indexPlaybook, type PlaybookIndex } from './rules.js';
import {
  apply, Draft, initialState, isObject, loopFinished, loopFinishedCount, loopResults,
  type Chain, type CommandRecord, type Effects, type EngineState, type RenderedTarget, type RetriedStep, type RunState,
} from './state.js';

export const DEFAULT_MAX_DELIVERIES = 3;
export const DEFAULT_MAX_IN_FLIGHT = 16;
/** Guard against routing cycles that would never reach the queue. */
export const MAX_STEP_ENTRIES_PER_DECISION = 10_000;

/** The `action_completed` digest of a call (`effects` include `done` when the item finished), and the sinks it issues. */
interface CallReport {
  ok: boolean;
  entry?: number;
  exhausted?: JsonObject;
  followUp?: FollowUp['reason'];
  effects: Effects;
  sinks: Tool[];
}

/**
 * What one finished call means for its step, decided by `Builder.callOutcome` and applied by
 * `Builder.finishCall`:
 *  follow — the chain goes on with another call (retry, page, case `call`/`retry`);
 *  fail   — the step fails (unhandled error, exhausted retries, case `fail`), maybe handled by a case `next`;
 *  skip   — a case `skip`;
 *  break  — a case `next`: the item is finished and the step exits now, breaking off a loop;
 *  done   — the item (or the single call) is finished; the loop or the step goes on.
 */
type CallOutcome = CallReport & (
  | { kind: 'follow'; call: FollowUp }
  | { kind: 'fail'; error: JsonObject; handledBy?: RenderedTarget[] }
  | { kind: 'skip'; targets?: RenderedTarget[] }
  | { kind: 'break' }
  | { kind: 'done' }
);

class Builder {
  readonly events: EngineEvent[] = [];
  readonly commands: Command[] = [];
  readonly cancelled: number[] = [];
  private entries = 0;
  /** Step entries waiting to run (iterative, so long routing chains never grow the stack). */
  private agenda: Array<() => void> = [];
  /** Steps with an entry on the agenda: a transition arriving meanwhile is queued (fan-in). */
  private scheduled = new Map<string, number>();
  readonly idx: PlaybookIndex;

  constructor(
    readonly d: Draft,
    readonly pb: Playbook,
    readonly input: EngineInput,
  ) {
    this.idx = indexPlaybook(pb);
    // the base the decision that produced this state ended with, patched from here on
    this.baseCache = takeBase(d.s, pb, input.externalVars) ?? null;
  }

  get s(): EngineState {
    return this.d.s;
  }

  emit(ev: EngineEvent): void {
    apply(this.d, ev);
    if (this.baseCache) {
      if (ev.name === 'step_completed' && ev.step) this.baseClean = patchStepResult(this.baseCache, ev.step, (ev.payload.result as Json) ?? null) && this.baseClean;
      else if (ev.name === 'vars_set') this.baseClean = patchVars(this.baseCache, this.s.vars, this.input.externalVars) && this.baseClean;
      else if (ev.name === 'execution_started' || ev.name === 'execution_retried') this.baseCache = null;
    }
    this.events.push(ev);
    if (ev.name === 'command_issued') this.commands.push(ev.payload.command as unknown as Command);
    for (const key of ['superseded', 'cancelled_commands'] as const) {
      const ids = ev.payload[key];
      if (Array.isArray(ids)) this.cancelled.push(...(ids as number[]));
    }
  }

  decision(): Decision<EngineState> {
    if (this.baseCache && this.baseClean) keepBase(this.baseCache, this.s, this.pb, this.input.externalVars);
    const out: Decision<EngineState> = { state: this.s, events: this.events, commands: this.commands, changed_steps: [...this.d.touchedSteps] };
    if (this.cancelled.length) out.cancelled_commands = this.cancelled;
    return out;
  }

  running(): boolean {
    return !TERMINAL_STATUSES.includes(this.s.status);
  }

  /** Built on first use in a decision (or carried from the previous one), then patched by step_completed / vars_set. */
  private baseCache: BaseContext | null = null;
  /** Whether the patched base still equals a fresh build, so the next decision may take it. */
  private baseClean = true;

  base(): BaseContext {
    if (!this.baseCache) {
      this.baseCache = baseContext(this.s, this.pb, this.input.externalVars);
      this.baseClean = true;
    }
    return this.baseCache;
  }

  /** Runs fn; a StepError fails the step, an ExecutionError fails the execution. */
  guard(step: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (e instanceof StepError && this.running()) {
        if (this.s.runs[step]) this.failStep(step, e.error);
        else this.failExecution({ ...e.error, step });
      } else if (e instanceof ExecutionError && this.running()) {
        this.failExecution(e.error);
      } else if (!(e instanceof StepError || e instanceof ExecutionError)) {
        throw e;
      }
    }
  }

  // ---------------------------------------------------------------- lifecycle

  /** Runs the agenda, then checks for quiescence. */
  settle(): void {
    while (this.agenda.length) this.agenda.shift()!();
    const s = this.s;
    if (!this.running()) return;
    if (s.open_commands.length === 0 && Object.keys(s.runs).length === 0 && Object.keys(s.pending).length === 0) {
      const result = s.terminal_step !== null ? (s.steps[s.terminal_step]?.result ?? null) : null;
      this.emit({ name: 'execution_completed', step: null, payload: { result, terminal_step: s.terminal_step } });
    }
  }

  failExecution(error: JsonObject): void {
    if (!this.running()) return;
    this.emit({ name: 'execution_failed', step: null, payload: { error, cancelled_commands: [...this.s.open_commands] } });
  }

  /**
   * `execution.retry` of a failed or cancelled execution: the runs kept in `state.resume` start
   * again in place. A loop run that finished some items continues with the others; any other run
   * is entered afresh with its args (overridden per step by `payload.args[step]`). Completed steps
   * keep their results; `payload.payload` replaces the execution payload.
   */
  retry(ev: EngineEvent): void {
    const kept = this.s.resume ?? {};
    const overrides = isObject(ev.payload?.args) ? ev.payload.args : {};
    const steps: RetriedStep[] = Object.entries(kept).map(([step, run]) => {
      const o = overrides[step];
      const args = isObject(o) ? { ...run.args, ...o } : run.args;
      return { step, args, resume: Boolean(run.loop && loopFinishedCount(run.loop) > 0) };
    });
    const payload: JsonObject = { steps: steps as unknown as Json, reason: (ev.payload?.reason as Json) ?? 'retried' };
    if (isObject(ev.payload?.payload)) payload.payload = ev.payload.payload;
    this.emit({ name: ev.name, step: null, payload: ev.payload ?? {} }); // the request, as for a cancel
    this.emit({ name: 'execution_retried', step: null, payload });
    for (const r of steps) {
      const def = this.idx.steps.get(r.step);
      if (!def) continue;
      if (!r.resume) {
        this.schedule(r.step, () => this.enterStep(r.step, r.args, null, false));
        continue;
      }
      this.guard(r.step, () => {
        const loop = this.s.runs[r.step]?.loop;
        if (loop && loop.done >= loop.items.length) this.exitStep(r.step, false);
        else this.fillLoop(def);
      });
    }
  }

  cancel(ev: EngineEvent): void {
    this.emit({ name: ev.name, step: ev.step ?? null, payload: ev.payload ?? {} });
    this.emit({
      name: 'execution_cancelled', step: null,
      payload: { reason: (ev.payload?.reason as Json) ?? 'cancelled', cancelled_commands: [...this.s.open_commands] },
    });
  }

  // ---------------------------------------------------------------- steps

  openCalls(step: string, run: number): number[] {
    const out: number[] = [];
    for (const id of this.s.open_commands) {
      const c = this.s.commands[id];
      if (c && c.kind === 'call' && c.step === step && c.run === run) out.push(id);
    }
    return out;
  }

  enterStep(name: string, incoming: JsonObject, from: string | null, queued: boolean): void {
    if (!this.running()) return;
    const def = this.idx.steps.get(name);
    if (!def) {
      this.failExecution({ message: `Transition to unknown step '${name}'`, step: from, target: name });
      return;
    }
    if (++this.entries > MAX_STEP_ENTRIES_PER_DECISION) {
      this.failExecution({ message: `More than ${MAX_STEP_ENTRIES_PER_DECISION} step entries in one decision (routing cycle?)`, step: name });
      return;
    }
    const s = this.s;
    const runNo = (s.steps[name]?.runs ?? 0) + 1;
    let args: JsonObject = incoming;
    let items: Json[] | undefined;
    let failure: JsonObject | undefined;
    try {
      if (def.args) {
        // a loop step's args that read the iterator are rendered per item (issueCall)
        const eager = def.loop ? withoutIterator(def.args, def.loop.iterator, false) : def.args;
        const defaults = render(eager, stepContext(this.base(), s, { step: name, args: incoming }), 'args');
        args = { ...(isObject(defaults) ? defaults : {}), ...incoming };
      }
      if (def.loop && hasItems(def)) {
        const raw = render(def.loop.in, stepContext(this.base(), s, { step: name, args }), 'loop.in');
        if (raw === null || raw === undefined || raw === '') items = [];
        else if (Array.isArray(raw)) items = raw;
        else if (isObject(raw)) items = Object.entries(raw).map(([key, value]) => ({ key, value }));
        else throw new StepError({ message: `loop.in did not render to a list (got ${typeof raw})`, field: 'loop.in' });
      }
    } catch (e) {
      if (!(e instanceof StepError)) throw e;
      failure = e.error;
    }
    const payload: JsonObject = { run: runNo, args, from };
    if (queued) payload.queued = true;
    if (items && def.loop) {
      const bound = def.loop.mode === 'async' ? (def.loop.max_in_flight ?? this.input.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT) : 1;
      payload.loop = { items, iterator: def.loop.iterator, mode: def.loop.mode, max_in_flight: Math.max(1, bound) };
    }
    this.emit({ name: 'step.enter', step: name, payload });
    if (failure) {
      this.failStep(name, failure);
      return;
    }
    this.guard(name, () => {
      if (hasCase(def, 'step.enter')) {
        const ctx = stepContext(this.base(), this.s, { run: s.runs[name], step: name, event: { name: 'step.enter', payload: { args } } });
        const acts = evalCase(def, 'step.enter', ctx);
        if (acts && this.applyActs(def, acts, 'step.enter', null)) return;
      }
      if (!def.tool) {
        this.exitStep(name, false);
      } else if (items) {
        if (items.length === 0) this.exitStep(name, false);
        else this.fillLoop(def);
      } else {
        this.issueCall(def, { item: null, raw: def.tool, attempt: 1, chainIndex: 1, delay: 0, startItem: false });
      }
    });
  }

  /** Records rule effects and runs fail/skip; returns true when the step ended. */
  applyActs(def: Step, acts: Acts, on: 'step.enter' | 'step.exit', item: number | null): boolean {
    const name = def.step;
    const payload: JsonObject = { on, entry: acts.index, effects: acts.effects as unknown as JsonObject };
    if (acts.ignored.length) payload.ignored = acts.ignored;
    this.emit({ name: 'case_applied', step: name, payload });
    for (const tool of acts.sinks) this.issueSink(def, tool, item);
    // `next` is remembered by the reducer for the step's completion; `call`/`retry` were ignored
    const end = caseEnding(acts);
    if (end.kind === 'fail') {
      this.failStep(name, { message: end.message, step: name, by: 'case' }, end.next);
      return true;
    }
    if (end.kind === 'skip') {
      this.skipStep(name, end.next);
      return true;
    }
    return false;
  }

  fillLoop(def: Step): void {
    const run = this.s.runs[def.step];
    const loop = run?.loop;
    if (!run || !loop) return;
    while (this.running() && this.s.runs[def.step]?.run === run.run) {
      const cur = this.s.runs[def.step]!.loop!;
      let item = cur.next;
      while (item < cur.items.length && loopFinished(cur, item)) item++; // finished before a retry
      if (item >= cur.items.length || cur.in_flight >= cur.max_in_flight) break;
      this.issueCall(def, { item, raw: def.tool!, attempt: 1, chainIndex: 1, delay: 0, startItem: true });
    }
  }

  itemBinding(run: RunState, item: number | null): ItemBinding | undefined {
    if (item === null || !run.loop) return undefined;
    return { name: run.loop.iterator, value: run.loop.items[item], index: item };
  }

  issueCall(
    def: Step,
    o: { item: number | null; raw?: Tool; tool?: Tool; attempt: number; chainIndex: number; delay: number; startItem: boolean },
  ): void {
    const name = def.step;
    const run = this.s.runs[name];
    if (!run) return;
    let tool = o.tool;
    const args = o.item === null ? run.args : this.itemArgs(def, run, o.item);
    if (!tool) {
      const chain = run.chains[o.item === null ? '-' : String(o.item)];
      const ctx = stepContext(this.base(), this.s, {
        run, step: name, item: this.itemBinding(run, o.item), args,
        _retry: { index: o.chainIndex, count: o.chainIndex - 1 }, iteration: o.chainIndex, pages: chain?.pages,
      });
      tool = renderTool(o.raw!, ctx);
    }
    const command: Command = {
      command_id: this.s.seq + 1, step: name, tool, args, attempt: o.attempt,
      available_at: this.input.now + o.delay, max_deliveries: DEFAULT_MAX_DELIVERIES,
    };
    this.routeToPool(command, def);
    if (o.item !== null) command.iteration = o.item;
    else if (def.retry?.length || def.loop?.pagination) command.iteration = o.chainIndex;
    if (tool.kind === 'playbook') {
      const payload = isObject(tool.args) ? tool.args : isObject(tool.with) ? tool.with : {};
      command.child = { path: String(tool.path ?? ''), payload };
    }
    const payload: JsonObject = { command: command as unknown as JsonObject, run: run.run, kind: 'call', item: o.item, chain_index: o.chainIndex };
    if (o.startItem) payload.start_item = true;
    this.emit({ name: 'command_issued', step: name, command_id: command.command_id, payload });
  }

  /** Commands of the default pool carry no `pool`, so their events are as before pools existed. */
  routeToPool(command: Command, def: Step): void {
    const pool = def.pool ?? this.pb.pool;
    if (pool !== undefined && pool !== DEFAULT_POOL) command.pool = pool;
  }

  /** A loop item's args: the step's args that read the iterator, rendered for this item. */
  itemArgs(def: Step, run: RunState, item: number): JsonObject {
    if (!def.args || !def.loop) return run.args;
    const lazy = withoutIterator(def.args, def.loop.iterator, true);
    const keys = Object.keys(lazy).filter((k) => !(k in run.args));
    if (!keys.length) return run.args;
    const ctx = stepContext(this.base(), this.s, { run, step: def.step, item: this.itemBinding(run, item) });
    const out: JsonObject = {};
    for (const k of keys) out[k] = render(lazy[k], ctx, `args.${k}`);
    return { ...out, ...run.args };
  }

  issueSink(def: Step, tool: Tool, item: number | null): void {
    const run = this.s.runs[def.step];
    const command: Command = {
      command_id: this.s.seq + 1, step: def.step, tool, args: run?.args ?? {}, attempt: 1,
      available_at: this.input.now, max_deliveries: DEFAULT_MAX_DELIVERIES, sink: true,
    };
    this.routeToPool(command, def);
    if (item !== null) command.iteration = item;
    this.emit({
      name: 'command_issued', step: def.step, command_id: command.command_id,
      payload: { command: command as unknown as JsonObject, run: run?.run ?? 0, kind: 'sink', item, chain_index: 1 },
    });
  }

  /**
   * The step's result: a `result` action's, else its loop's finished items', else its call's.
   * `finishing`: the call of `item` (null: no loop) finishes with `result`, not applied yet.
   */
  stepResult(run: RunState, finishing?: { item: number | null; result: Json }): Json {
    if (run.has_result) return run.result ?? null;
    if (finishing && (!run.loop || finishing.item === null)) return finishing.result;
    if (run.loop) return loopResults(run.loop, finishing && { item: finishing.item!, result: finishing.result });
    return run.last ?? null;
  }

  exitStep(name: string, broken: boolean): void {
    const run = this.s.runs[name];
    const def = this.idx.steps.get(name)!;
    if (!run) return;
    const superseded = this.openCalls(name, run.run);
    const computed = this.stepResult(run);
    const payload: JsonObject = { run: run.run, result: computed, superseded };
    if (broken) payload.broken = true;
    this.emit({ name: 'step.exit', step: name, payload });
    let ended = false;
    this.guard(name, () => {
      if (hasCase(def, 'step.exit')) {
        // The rule decides the step's transitions, which the spec orders after step_completed and
        // the step's vars: it sees both as they will be (from the computed result; a `result`
        // action of the rule itself changes what step_completed and vars_set then record).
        const ctx = this.asStepEnds(def, computed, stepContext(this.base(), this.s, {
          run: this.s.runs[name], step: name, event: { name: 'step.exit', payload: { result: computed } }, result: resultView(computed),
        }));
        const acts = evalCase(def, 'step.exit', ctx);
        if (acts) ended = this.applyActs(def, acts, 'step.exit', null);
      }
      if (!ended) this.completeStep(name);
    });
  }

  /**
   * `ctx` as the step's transitions will see it once it completed with `result`: that result by
   * name and the variables its vars block renders from it (step_completed, then vars_set, then the
   * transitions, in the spec's order).
   */
  asStepEnds(def: Step, result: Json, ctx: Record<string, unknown>): Record<string, unknown> {
    const base = this.base();
    const completed = (c: Record<string, unknown>, vars: JsonObject) => asCompleted(c, base, def.step, result, vars, this.input.externalVars);
    const vars = def.vars ? this.renderVars(def, completed(stepContext(base, this.s, { step: def.step, result: resultView(result) }), {})).variables : {};
    return completed(ctx, vars);
  }

  completeStep(name: string): void {
    const run = this.s.runs[name]!;
    const def = this.idx.steps.get(name)!;
    const result = this.stepResult(run);
    this.emit({ name: 'step_completed', step: name, payload: { run: run.run, result } });
    if (def.vars && Object.keys(def.vars).length) this.processVars(def, result);
    const targets = run.next ?? this.structuralTargets(def, run, result);
    this.transition(name, targets);
  }

  processVars(def: Step, result: Json): void {
    // step_completed has patched the base: the step's result is visible by name
    const { variables, errors } = this.renderVars(def, stepContext(this.base(), this.s, { step: def.step, result: resultView(result) }));
    const payload: JsonObject = { variables, source_step: def.step, var_type: 'step_result' };
    if (errors.length) payload.errors = errors;
    this.emit({ name: 'vars_set', step: def.step, payload });
  }

  /** The step's vars block rendered in `ctx`. A var that fails to render is left out, with its error. */
  renderVars(def: Step, ctx: Record<string, unknown>): { variables: JsonObject; errors: JsonObject[] } {
    const variables: JsonObject = {};
    const errors: JsonObject[] = [];
    for (const [key, tpl] of Object.entries(def.vars ?? {})) {
      try {
        variables[key] = renderValue(tpl, ctx, { field: `vars.${key}` });
      } catch (e) {
        errors.push({ name: key, message: `Failed to render var '${key}': ${errMsg(e)}` });
      }
    }
    return { variables, errors };
  }

  structuralTargets(def: Step, run: RunState, result: Json): RenderedTarget[] {
    if (!def.next?.length) return [];
    if (!def.next.some((t) => t.args)) return def.next.map((t) => ({ step: t.step, args: {} }));
    const ctx = stepContext(this.base(), this.s, { run, step: def.step, result: resultView(result) });
    return def.next.map((t, i) => {
      try {
        const args = t.args ? render(t.args, ctx, `next[${i}].args`) : {};
        return { step: t.step, args: isObject(args) ? args : {} };
      } catch (e) {
        throw new ExecutionError({ ...(e instanceof StepError ? e.error : { message: errMsg(e) }), step: def.step });
      }
    });
  }

  schedule(step: string, fn: () => void): void {
    this.scheduled.set(step, (this.scheduled.get(step) ?? 0) + 1);
    this.agenda.push(() => {
      const n = this.scheduled.get(step)! - 1;
      if (n) this.scheduled.set(step, n);
      else this.scheduled.delete(step);
      fn();
    });
  }

  transition(from: string, targets: RenderedTarget[]): void {
    if (!this.running()) return;
    const marked = targets.map((t) => {
      const queued = Boolean(this.s.runs[t.step]) || Boolean(this.s.pending[t.step]?.length) || this.scheduled.has(t.step);
      if (!queued) this.schedule(t.step, () => this.enterStep(t.step, t.args, from, false));
      return { step: t.step, args: t.args, queued };
    });
    this.emit({ name: 'transition', step: from, payload: { from, targets: marked as unknown as Json } });
    this.drainPending(from);
  }

  /** Fan-in: a step that was running when a transition arrived runs again once it has ended. */
  drainPending(name: string): void {
    if (!this.running() || this.s.runs[name] || this.scheduled.has(name) || !this.s.pending[name]?.length) return;
    this.schedule(name, () => {
      const next = this.s.pending[name]?.[0];
      if (next && !this.s.runs[name]) this.enterStep(name, next.args, null, true);
    });
  }

  failStep(name: string, error: JsonObject, handledBy?: RenderedTarget[]): void {
    const run = this.s.runs[name];
    const superseded = run ? this.openCalls(name, run.run) : [];
    const payload: JsonObject = { run: run?.run ?? 0, error: { ...error, step: name }, superseded };
    if (handledBy) payload.handled = true;
    this.emit({ name: 'step_failed', step: name, payload });
    if (handledBy) {
      this.transition(name, handledBy);
      this.drainPending(name);
    } else {
      this.failExecution({ ...error, message: `Step '${name}' failed: ${String(error.message ?? 'error')}`, step: name });
    }
  }

  skipStep(name: string, targets?: RenderedTarget[]): void {
    const run = this.s.runs[name]!;
    const def = this.idx.steps.get(name)!;
    const superseded = this.openCalls(name, run.run);
    this.emit({ name: 'step_skipped', step: name, payload: { run: run.run, superseded } });
    const t = targets ?? this.structuralTargets(def, run, null);
    this.transition(name, t);
    this.drainPending(name);
  }

  // ---------------------------------------------------------------- call.done

  onCallDone(rec: CommandRecord, ev: EngineEvent): void {
    const payload = ev.payload ?? {};
    this.emit({ name: 'call.done', step: rec.step, command_id: rec.command_id, payload });
    const ok = payload.error === undefined || payload.error === null;
    if (rec.kind === 'sink') {
      this.emit({ name: 'action_completed', step: rec.step, command_id: rec.command_id, payload: { kind: 'sink', outcome: ok ? 'ok' : 'error', effects: {} } });
      if (!ok) this.failExecution({ message: `Sink of step '${rec.step}' failed`, step: rec.step, command_id: rec.command_id, error: payload.error });
      return;
    }
    const def = this.idx.steps.get(rec.step);
    const run = this.s.runs[rec.step];
    if (!def || !run || run.run !== rec.run) return;
    this.guard(rec.step, () => this.processCall(def, run, rec, payload, ok));
  }

  /**
   * A finished call of the current run. Its outcome is decided before anything is emitted, so a
   * render error while deciding fails the step with no digest recorded; `finishCall` applies it.
   */
  processCall(def: Step, run: RunState, rec: CommandRecord, payload: JsonObject, ok: boolean): void {
    this.finishCall(def, rec, this.callOutcome(def, run, rec, payload, ok));
  }

  /**
   * The retry policies (or legacy pagination) go first: when they continue the chain, the case
   * rules wait for its last call. Otherwise the case rules for call.done decide, by the precedence
   * of `caseEnding`; with no matching entry an error fails the step and a success finishes the item.
   */
  callOutcome(def: Step, run: RunState, rec: CommandRecord, payload: JsonObject, ok: boolean): CallOutcome {
    const call = this.callView(def, run, rec, payload, ok);
    const chain = def.loop?.pagination ? legacyPage(def, call, ok) : retryPolicies(def, call, ok, this.input.random);
    const { effects, sinks, pages, into, exhausted } = chain;
    if (chain.follow) return { kind: 'follow', call: chain.follow, ok, followUp: chain.follow.reason, effects, sinks };

    // the item's result, when the call finishes it (a handled error's is `{error}`)
    const itemResult = (): Json => (ok ? (pages !== undefined ? pages : (call.raw ?? null)) : { error: (call.error ?? null) as Json });
    let acts: Acts | null = null;
    if (hasCase(def, 'call.done')) {
      const cctx = call.ctx(pages, into);
      if (ok && pages !== undefined) cctx.result = pages;
      // a next here ends the step: its args see the step as it will complete (README rule 3)
      acts = evalCase(def, 'call.done', cctx, (ctx, e) => this.asStepEnds(def, e.has_result ? e.result ?? null : this.stepResult(run, { item: rec.item, result: itemResult() }), ctx));
    }
    // one digest records the chain's effects and the entry's
    const report: CallReport = { ok, effects, sinks };
    if (acts) {
      const ae = acts.effects;
      if (ae.ctx) effects.ctx = ae.ctx;
      if (ae.collect) effects.collect = ae.collect;
      if (ae.has_result) {
        effects.has_result = true;
        effects.result = ae.result;
      }
      if (ae.next) effects.next = ae.next;
      sinks.push(...acts.sinks);
      report.entry = acts.index;
    }
    if (exhausted) report.exhausted = exhausted;
    const error = call.error;
    const cause: JsonObject = error !== undefined ? { error: error as Json } : {};
    // a handled error finishes the item too, with `{error}` as its result
    const finished = (kind: 'break' | 'done'): CallOutcome => {
      effects.done = { item: rec.item, result: itemResult() };
      return { ...report, kind };
    };

    const end: CaseEnding = acts ? caseEnding(acts) : { kind: 'none' };
    switch (end.kind) {
      case 'fail':
        return { ...report, kind: 'fail', error: { message: end.message, by: 'case', ...cause }, handledBy: end.next };
      case 'skip':
        return { ...report, kind: 'skip', targets: end.next };
      case 'next':
        return finished('break');
      case 'retry': {
        const a = numbers(end.retry, BACKOFF_KEYS, call.ctx(pages, into), `case[${acts!.index}].then.retry`);
        const max = a.max_attempts ?? DEFAULT_RETRY_ATTEMPTS;
        if (rec.attempt >= max) {
          // the digest still says a retry was asked for: the step fails because none is left
          return { ...report, followUp: 'retry', kind: 'fail', error: { message: `Retry attempts exhausted (${max})`, attempts: rec.attempt, ...cause } };
        }
        const delay = backoffDelay(a, rec.attempt, this.input.random);
        const next: FollowUp = { tool: rec.tool, attempt: rec.attempt + 1, chainIndex: call.chain.index, delay, reason: 'retry' };
        return { ...report, followUp: 'retry', kind: 'follow', call: next };
      }
      case 'call': {
        const next: FollowUp = { tool: mergeTool(rec.tool, end.overrides), attempt: 1, chainIndex: call.chain.index, delay: 0, reason: 'call' };
        return { ...report, followUp: 'call', kind: 'follow', call: next };
      }
      case 'none':
        if (ok || acts) return finished('done');
        return {
          ...report, kind: 'fail',
          error: exhausted ? { ...exhausted, error: (error ?? null) as Json } : { message: errorMessage(error), error: (error ?? null) as Json },
        };
    }
  }

  /**
   * The one place a call's outcome takes effect, whatever it is: the `action_completed` digest
   * (so a fold sees every effect the outcome had), the sinks, then the chain or the step moves on.
   */
  finishCall(def: Step, rec: CommandRecord, o: CallOutcome): void {
    const name = def.step;
    const payload: JsonObject = { outcome: o.ok ? 'ok' : 'error' };
    if (o.entry !== undefined) payload.entry = o.entry;
    if (o.exhausted) payload.exhausted = o.exhausted;
    if (o.followUp) payload.follow_up = o.followUp;
    payload.effects = o.effects as unknown as JsonObject;
    this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload });
    for (const tool of o.sinks) this.issueSink(def, tool, rec.item);
    switch (o.kind) {
      case 'follow': {
        const { tool, attempt, chainIndex, delay } = o.call;
        this.issueCall(def, { item: rec.item, tool, attempt, chainIndex, delay, startItem: false });
        return;
      }
      case 'fail':
        this.failStep(name, o.error, o.handledBy);
        return;
      case 'skip':
        this.skipStep(name, o.targets);
        return;
      case 'break': {
        // items still unfinished are broken off: step.exit says so
        const loop = this.s.runs[name]?.loop;
        this.exitStep(name, Boolean(loop && loop.done < loop.items.length));
        return;
      }
      case 'done': {
        const cur = this.s.runs[name];
        if (!cur) return;
        if (cur.loop) {
          if (cur.loop.done >= cur.loop.items.length) this.exitStep(name, false);
          else this.fillLoop(def);
        } else if (cur.calls === 0) {
          this.exitStep(name, false);
        }
        return;
      }
    }
  }

  /** What a finished call shows to the retry policies and the case rules. */
  callView(def: Step, run: RunState, rec: CommandRecord, payload: JsonObject, ok: boolean): CallView {
    const name = def.step;
    const key = rec.item === null ? '-' : String(rec.item);
    const chain: Chain = run.chains[key] ?? { index: 1 };
    const raw = ok ? ((payload.response ?? null) as Json) : undefined;
    // the README's one `.data` rule, the same for every tool kind
    const view = ok ? resultView(raw) : undefined;
    const error = ok ? undefined : payload.error;
    const item = this.itemBinding(run, rec.item);
    const scope = (extra: Record<string, unknown>): Record<string, unknown> => stepContext(this.base(), this.s, extra);
    const ctx = (pages: Json | undefined, into?: string): Record<string, unknown> => {
      const extra: Record<string, unknown> = {
        run, step: name, item, args: rec.args, event: { name: 'call.done', payload }, response: view, page: view, error,
        result: view, _retry: { index: chain.index, count: chain.index }, iteration: chain.index, pages,
      };
      if (into && pages !== undefined) extra[into] = pages;
      return scope(extra);
    };
    return { rec, run, key, chain, payload, raw, view, error, item, scope, ctx };
  }
}

/** The args whose templates read `iterator` (keep = true), or all the others (keep = false). */
function withoutIterator(args: JsonObject, iterator: string, keep: boolean): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(args)) if (readsName(v, iterator) === keep) out[k] = v;
  return out;
}

function readsName(v: Json, name: string): boolean {
  if (typeof v === 'string') return referencesName(v, name);
  if (Array.isArray(v)) return v.some((x) => readsName(x, name));
  if (isObject(v)) return Object.values(v).some((x) => readsName(x, name));
  return false;
}

function hasItems(def: Step): boolean {
  const loop = def.loop!;
  return !(loop.pagination && (loop.in === null || loop.in === undefined || loop.in === ''));
}

function errorMessage(error: unknown): string {
  if (isObject(error) && typeof error.message === 'string') return error.message;
  if (typeof error === 'string') return error;
  return 'call failed';
}

// ------------------------------------------------------------------ public API

export function start(playbook: Playbook, init: StartInput, input: EngineInput): Decision<EngineState> {
  const b = new Builder(new Draft(initialState(), true), playbook, input);
  const entry = indexPlaybook(playbook).entry;
  b.emit({
    name: 'execution_started', step: null,
    payload: {
      execution_id: init.execution_id, path: init.path, version: init.version, catalog_id: init.catalog_id, payload: init.payload ?? {},
      parent_execution_id: init.parent_execution_id ?? null, root_execution_id: init.root_execution_id ?? init.execution_id, entry,
    },
  });
  if (entry) b.enterStep(entry, {}, null, false);
  b.settle();
  return b.decision();
}

export function handle(state: EngineState, playbook: Playbook, event: EngineEvent, input: EngineInput, opts: HandleOptions = {}): Decision<EngineState> {
  const noop: Decision<EngineState> = { state, events: [], commands: [] };
  if (event.name === 'execution.retry') {
    // only a failed or cancelled execution with unfinished runs can resume
    if ((state.status !== 'failed' && state.status !== 'cancelled') || !state.resume || Object.keys(state.resume).length === 0) return noop;
    const b = new Builder(Draft.from(state, opts.reuseSteps, opts.owned), playbook, input);
    b.retry(event);
    b.settle();
    return b.decision();
  }
  if (TERMINAL_STATUSES.includes(state.status)) return noop;
  const b = new Builder(Draft.from(state, opts.reuseSteps, opts.owned), playbook, input);
  switch (event.name) {
    case 'call.done': {
      const rec = findCommand(state, event);
      if (!rec) return noop;
      b.onCallDone(rec, event);
      break;
    }
    case 'action_started': {
      const rec = findCommand(state, event);
      if (!rec || rec.status !== 'queued') return noop;
      b.emit({ name: 'action_started', step: rec.step, command_id: rec.command_id, payload: event.payload ?? {} });
      break;
    }
    case 'execution.cancel':
      b.cancel(event);
      break;
    default:
      // step.enter / step.exit are owned by the engine (a worker's copy is a duplicate);
      // other names (worker.done, …) carry no control flow.
      return noop;
  }
  b.settle();
  return b.decision();
}

/** The open command an inbound event is about: by command_id, or the only open call of its step. */
function findCommand(state: EngineState, event: EngineEvent): CommandRecord | undefined {
  if (event.command_id !== undefined && event.command_id !== null) return state.commands[event.command_id];
  if (!event.step) return undefined;
  const open = state.open_commands.map((id) => state.commands[id]).filter((c) => c && c.step === event.step && c.kind === 'call');
  return open.length === 1 ? open[0] : undefined;
}

export function reduce(state: EngineState | undefined, event: EngineEvent): EngineState {
  const d = state ? Draft.from(state) : new Draft(initialState(), true);
  apply(d, event);
  return d.s;
}

export function fold(events: EngineEvent[]): EngineState {
  const d = new Draft(initialState(), true);
  for (const ev of events) apply(d, ev);
  return d.s;
}
