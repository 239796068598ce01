/**
 * The engine: decides what an event means for an execution. Every decision is expressed as
 * events, each applied to the state through the reducer of `state.ts` as soon as it is emitted;
 * commands are exactly the `command_issued` events' payloads. See README.md for the semantics.
 */
import type { Action, Json, JsonObject, Playbook, RetryThen, Step, Tool } from '../../playbook/types.js';
import { deferKeychain, evalCondition, renderValue } from '../../playbook/template/index.js';
import type { Command, Decision, EngineEvent, EngineInput, StartInput } from './contract.js';
import { TERMINAL_STATUSES } from './contract.js';
import { baseContext, forkContext, getPath, patchStepResult, patchVars, resultView, stepContext, type BaseContext } from './context.js';
import { caseEvents, indexPlaybook, type PlaybookIndex } from './rules.js';
import {
  apply, combine, Draft, initialState, isObject,
  type Chain, type CollectMode, type CommandRecord, type Effects, type EngineState, type RenderedTarget, type RunState,
} from './state.js';

export const DEFAULT_MAX_DELIVERIES = 3;
export const DEFAULT_MAX_IN_FLIGHT = 16;
/** Case `retry` and error-side retry policies without max_attempts. */
export const DEFAULT_RETRY_ATTEMPTS = 3;
/** Success-side (pagination/polling) policies without max_attempts. */
export const DEFAULT_MAX_PAGES = 1000;
export const DEFAULT_INITIAL_DELAY_S = 1;
export const DEFAULT_BACKOFF_MULTIPLIER = 2;
/** Default jitter: ±20 % of the delay. */
export const DEFAULT_JITTER = 0.2;
/** Guard against routing cycles that would never reach the queue. */
export const MAX_STEP_ENTRIES_PER_DECISION = 10_000;

/** A failure of the current step (render error, unhandled call error, exhausted retries). */
class StepError extends Error {
  constructor(readonly error: JsonObject) {
    super(String(error.message));
  }
}
class ExecutionError extends Error {
  constructor(readonly error: JsonObject) {
    super(String(error.message));
  }
}

interface Acts {
  index: number;
  effects: Effects;
  sinks: Tool[];
  call?: JsonObject;
  retry?: Extract<Action, { action: 'retry' }>;
  next?: RenderedTarget[];
  fail?: string;
  skip?: boolean;
  ignored: string[];
}

interface FollowUp {
  tool: Tool;
  attempt: number;
  chainIndex: number;
  delay: number;
  reason: 'retry' | 'page' | 'call';
}

/** A condition; a syntax error or a refused access fails the step, naming the field. */
function cond(expr: string, ctx: object, field: string): boolean {
  try {
    return evalCondition(expr, ctx);
  } catch (e) {
    throw new StepError({ message: `Invalid condition in ${field}: ${errMsg(e)}`, field });
  }
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function render(value: Json | undefined, ctx: object, field: string): Json {
  try {
    return renderValue(value, ctx, { field, defer: deferKeychain });
  } catch (e) {
    const f = (e as { field?: string }).field || field;
    throw new StepError({ message: `Failed to render ${f}: ${errMsg(e)}`, field: f });
  }
}

/** Renders a tool config field by field so an error names the field (`tool.endpoint`). */
function renderTool(tool: Tool, ctx: object, field = 'tool'): Tool {
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(tool)) {
    if (v === undefined) continue;
    out[k] = k === 'kind' ? v : render(v, ctx, `${field}.${k}`);
  }
  return out as Tool;
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

function jitterOf(then: { jitter?: unknown }): number {
  const j = then.jitter;
  if (j === false || j === 0) return 0;
  if (typeof j === 'number' && j > 0) return Math.min(1, j);
  return DEFAULT_JITTER;
}

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
  }

  get s(): EngineState {
    return this.d.s;
  }

  emit(ev: EngineEvent): void {
    apply(this.d, ev);
    if (this.baseCache) {
      if (ev.name === 'step_completed' && ev.step) patchStepResult(this.baseCache, ev.step, (ev.payload.result as Json) ?? null);
      else if (ev.name === 'vars_set') patchVars(this.baseCache, this.s.vars, this.input.externalVars);
      else if (ev.name === 'execution_started') this.baseCache = null;
    }
    this.events.push(ev);
    if (ev.name === 'command_issued') this.commands.push(ev.payload.command as unknown as Command);
    for (const key of ['superseded', 'cancelled_commands'] as const) {
      const ids = ev.payload[key];
      if (Array.isArray(ids)) this.cancelled.push(...(ids as number[]));
    }
  }

  decision(): Decision<EngineState> {
    const out: Decision<EngineState> = { state: this.s, events: this.events, commands: this.commands };
    if (this.cancelled.length) out.cancelled_commands = this.cancelled;
    return out;
  }

  running(): boolean {
    return !TERMINAL_STATUSES.includes(this.s.status);
  }

  /** Built on first use in a decision, then patched by step_completed / vars_set. */
  private baseCache: BaseContext | null = null;

  base(): BaseContext {
    return (this.baseCache ??= baseContext(this.s, this.pb, this.input.externalVars));
  }

  /** Whether the step has case entries for this event (contexts are only built when needed). */
  hasCase(def: Step, on: string): boolean {
    return (def.case ?? []).some((e) => caseEvents(e).has(on));
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
        const defaults = render(def.args, stepContext(this.base(), s, { step: name, args: incoming }), 'args');
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
      if (this.hasCase(def, 'step.enter')) {
        const ctx = stepContext(this.base(), this.s, { run: s.runs[name], step: name, event: { name: 'step.enter', payload: { args } } });
        const acts = this.evalCase(def, 'step.enter', ctx, null);
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
    if (acts.fail !== undefined) {
      this.failStep(name, { message: acts.fail, step: name, by: 'case' }, acts.next);
      return true;
    }
    if (acts.skip) {
      this.skipStep(name, acts.next);
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
      if (cur.next >= cur.items.length || cur.in_flight >= cur.max_in_flight) break;
      this.issueCall(def, { item: cur.next, raw: def.tool!, attempt: 1, chainIndex: 1, delay: 0, startItem: true });
    }
  }

  itemBinding(run: RunState, item: number | null): { name: string; value: Json; index: number } | undefined {
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
    if (!tool) {
      const chain = run.chains[o.item === null ? '-' : String(o.item)];
      const ctx = stepContext(this.base(), this.s, {
        run, step: name, item: this.itemBinding(run, o.item),
        _retry: { index: o.chainIndex, count: o.chainIndex - 1 }, iteration: o.chainIndex, pages: chain?.pages,
      });
      tool = renderTool(o.raw!, ctx);
    }
    const command: Command = {
      command_id: this.s.seq + 1, step: name, tool, args: run.args, attempt: o.attempt,
      available_at: this.input.now + o.delay, max_deliveries: DEFAULT_MAX_DELIVERIES,
    };
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

  issueSink(def: Step, tool: Tool, item: number | null): void {
    const run = this.s.runs[def.step];
    const command: Command = {
      command_id: this.s.seq + 1, step: def.step, tool, args: run?.args ?? {}, attempt: 1,
      available_at: this.input.now, max_deliveries: DEFAULT_MAX_DELIVERIES, sink: true,
    };
    if (item !== null) command.iteration = item;
    this.emit({
      name: 'command_issued', step: def.step, command_id: command.command_id,
      payload: { command: command as unknown as JsonObject, run: run?.run ?? 0, kind: 'sink', item, chain_index: 1 },
    });
  }

  stepResult(run: RunState): Json {
    if (run.has_result) return run.result ?? null;
    if (run.loop) return run.loop.results.filter((_, i) => run.loop!.finished[i]);
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
      if (this.hasCase(def, 'step.exit')) {
        const ctx = stepContext(this.base(), this.s, {
          run: this.s.runs[name], step: name, event: { name: 'step.exit', payload: { result: computed } }, result: resultView(computed),
        });
        const acts = this.evalCase(def, 'step.exit', ctx, null);
        if (acts) ended = this.applyActs(def, acts, 'step.exit', null);
      }
      if (!ended) this.completeStep(name);
    });
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
    const ctx = stepContext(this.base(), this.s, { step: def.step, result: resultView(result) });
    const variables: JsonObject = {};
    const errors: JsonObject[] = [];
    for (const [key, tpl] of Object.entries(def.vars ?? {})) {
      try {
        variables[key] = renderValue(tpl, ctx, { field: `vars.${key}` });
      } catch (e) {
        errors.push({ name: key, message: `Failed to render var '${key}': ${errMsg(e)}` });
      }
    }
    const payload: JsonObject = { variables, source_step: def.step, var_type: 'step_result' };
    if (errors.length) payload.errors = errors;
    this.emit({ name: 'vars_set', step: def.step, payload });
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

  private schedule(step: string, fn: () => void): void {
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

  // ---------------------------------------------------------------- case rules

  evalCase(def: Step, on: string, ctx: Record<string, unknown>, run: RunState | null): Acts | null {
    const entries = def.case ?? [];
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      if (!caseEvents(entry).has(on)) continue;
      if (!cond(entry.when, ctx, `case[${i}].when`)) continue;
      return this.runActions(def, i, entry.then, ctx, on, run);
    }
    return null;
  }

  runActions(def: Step, index: number, actions: Action[], ctx0: Record<string, unknown>, on: string, _run: RunState | null): Acts {
    const ctx = forkContext(ctx0);
    const acts: Acts = { index, effects: {}, sinks: [], ignored: [] };
    const e = acts.effects;
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
          const value = render(a.from, ctx, `${field}.collect.from`);
          const mode: CollectMode = a.mode === 'extend' ? 'concat' : 'push';
          (e.collect ??= []).push({ into: a.into, mode, value });
          ctx[a.into] = combine(mode, ctx[a.into] as Json | undefined, value);
          break;
        }
        case 'result':
          e.result = render(a.from, ctx, `${field}.result.from`);
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
        case 'next': {
          const nctx = forkContext(ctx);
          const iter = def.loop?.iterator;
          if (iter) delete nctx[iter];
          delete nctx.loop_index;
          acts.next = [
            ...(acts.next ?? []),
            ...a.targets.map((t, k) => {
              const args = t.args ? render(t.args, nctx, `${field}.next[${k}].args`) : {};
              return { step: t.step, args: isObject(args) ? args : {} };
            }),
          ];
          e.next = acts.next;
          break;
        }
        case 'fail':
          acts.fail = a.message !== undefined ? String(render(a.message, ctx, `${field}.fail.message`)) : 'Failed by case rule';
          break;
        case 'skip':
          acts.skip = true;
          break;
      }
    });
    return acts;
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

  processCall(def: Step, run: RunState, rec: CommandRecord, payload: JsonObject, ok: boolean): void {
    const name = def.step;
    const key = rec.item === null ? '-' : String(rec.item);
    const chain: Chain = run.chains[key] ?? { index: 1 };
    const raw = ok ? ((payload.response ?? null) as Json) : undefined;
    const view = ok ? (rec.tool.kind === 'http' ? resultView(raw) : raw) : undefined;
    const error = ok ? undefined : payload.error;
    const item = this.itemBinding(run, rec.item);
    const mkCtx = (pages: Json | undefined, into?: string): Record<string, unknown> => {
      const extra: Record<string, unknown> = {
        run, step: name, item, event: { name: 'call.done', payload }, response: view, page: view, error,
        result: view, _retry: { index: chain.index, count: chain.index }, iteration: chain.index, pages,
      };
      if (into && pages !== undefined) extra[into] = pages;
      return stepContext(this.base(), this.s, extra);
    };

    const effects: Effects = {};
    let follow: FollowUp | null = null;
    let exhausted: JsonObject | null = null;
    let pages = chain.pages;
    const sinks: Tool[] = [];
    let into: string | undefined;

    const pg = def.loop?.pagination;
    const policies = def.retry ?? [];
    if (pg) {
      // ---- legacy loop.pagination
      if (!ok) {
        if (rec.attempt < pg.retry.max_attempts) {
          const exp = pg.retry.backoff === 'exponential' ? Math.pow(2, rec.attempt - 1) : 1;
          const delay = Math.min(pg.retry.initial_delay * exp, pg.retry.max_delay) * 1000;
          follow = { tool: rec.tool, attempt: rec.attempt + 1, chainIndex: chain.index, delay, reason: 'retry' };
        } else if (pg.retry.max_attempts > 1) {
          exhausted = { message: `Pagination request failed after ${rec.attempt} attempts`, attempts: rec.attempt };
        }
      } else {
        const value = getPath(raw, pg.merge_path);
        const op = { mode: LEGACY_MERGE[pg.merge_strategy] ?? 'concat', value };
        pages = combine(op.mode, chain.pages, value);
        effects.chain = { key, op };
        const lctx = stepContext(this.base(), this.s, {
          run, step: name, item, event: { name: 'call.done', payload }, response: raw, iteration: chain.index - 1, accumulated: pages,
        });
        if (chain.index < pg.max_iterations && cond(pg.continue_while, lctx, 'loop.pagination.continue_while')) {
          let tool = rec.tool;
          const np = pg.next_page ?? {};
          if (np.params) tool = mergeTool(tool, { params: render(np.params, lctx, 'loop.pagination.next_page.params') });
          if (np.headers) tool = mergeTool(tool, { headers: render(np.headers, lctx, 'loop.pagination.next_page.headers') });
          if (np.body) {
            const bodyField = isObject(tool.data) && tool.json === undefined ? 'data' : 'json';
            tool = mergeTool(tool, { [bodyField]: render(np.body, lctx, 'loop.pagination.next_page.body') });
          }
          follow = { tool, attempt: 1, chainIndex: chain.index + 1, delay: 0, reason: 'page' };
          effects.chain.index = chain.index + 1;
        }
      }
    } else if (policies.length) {
      // ---- unified retry policies
      const pctx = mkCtx(chain.pages);
      const i = policies.findIndex((p, k) => cond(p.when, pctx, `retry[${k}].when`));
      if (i >= 0) {
        const then = policies[i].then;
        if (!ok) {
          const max = then.max_attempts ?? DEFAULT_RETRY_ATTEMPTS;
          if (rec.attempt < max) {
            const tool = then.next_call ? mergeTool(rec.tool, render(then.next_call, pctx, `retry[${i}].then.next_call`)) : rec.tool;
            const delay = backoffMs(
              then.initial_delay ?? DEFAULT_INITIAL_DELAY_S, then.backoff_multiplier ?? DEFAULT_BACKOFF_MULTIPLIER,
              rec.attempt, jitterOf(then as { jitter?: unknown }), this.input.random,
            );
            follow = { tool, attempt: rec.attempt + 1, chainIndex: chain.index, delay, reason: 'retry' };
          } else {
            exhausted = { message: `Retry attempts exhausted (${max})`, attempts: rec.attempt, policy: i };
          }
        } else {
          const col = this.collectPage(then, view, chain.pages, key, i, effects);
          pages = col.pages;
          into = col.into;
          const sink = sinkOf(then);
          if (sink) sinks.push(renderTool(sink, mkCtx(pages, into), `retry[${i}].then.sink`));
          const max = then.max_attempts ?? DEFAULT_MAX_PAGES;
          if (chain.index < max) {
            const nctx = mkCtx(pages, into);
            const tool = then.next_call ? mergeTool(rec.tool, render(then.next_call, nctx, `retry[${i}].then.next_call`)) : rec.tool;
            const delay = then.initial_delay ? then.initial_delay * 1000 : 0;
            follow = { tool, attempt: 1, chainIndex: chain.index + 1, delay, reason: 'page' };
            effects.chain = { ...(effects.chain ?? { key }), index: chain.index + 1, policy: i };
          }
        }
      } else if (ok) {
        // the last page of a paginated chain is collected (and sunk) like the others
        const pi = chain.policy ?? firstCollectPolicy(def);
        if (pi !== undefined) {
          const then = policies[pi].then;
          const col = this.collectPage(then, view, chain.pages, key, pi, effects);
          pages = col.pages;
          into = col.into;
          const sink = chain.policy !== undefined ? sinkOf(then) : undefined;
          if (sink) sinks.push(renderTool(sink, mkCtx(pages, into), `retry[${pi}].then.sink`));
        }
      }
    }

    const finish = (): void => {
      for (const tool of sinks) this.issueSink(def, tool, rec.item);
    };

    if (follow) {
      this.emit({
        name: 'action_completed', step: name, command_id: rec.command_id,
        payload: { outcome: ok ? 'ok' : 'error', follow_up: follow.reason, effects: effects as unknown as JsonObject },
      });
      finish();
      this.issueCall(def, { item: rec.item, tool: follow.tool, attempt: follow.attempt, chainIndex: follow.chainIndex, delay: follow.delay, startItem: false });
      return;
    }

    // ---- final outcome of the call chain: case rules for call.done
    const final: Json = pages !== undefined ? pages : ok ? (raw ?? null) : null;
    let acts: Acts | null = null;
    if (this.hasCase(def, 'call.done')) {
      const cctx = mkCtx(pages, into);
      if (ok && pages !== undefined) cctx.result = pages;
      acts = this.evalCase(def, 'call.done', cctx, run);
    }
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
    }
    const itemResult: Json = ok ? final : { error: (error ?? null) as Json };
    const base_payload: JsonObject = { outcome: ok ? 'ok' : 'error' };
    if (acts) base_payload.entry = acts.index;
    if (exhausted) base_payload.exhausted = exhausted;

    if (acts?.fail !== undefined) {
      this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload: { ...base_payload, effects: effects as unknown as JsonObject } });
      finish();
      this.failStep(name, { message: acts.fail, by: 'case', ...(error !== undefined ? { error: error as Json } : {}) }, acts.next);
      return;
    }
    if (acts?.skip) {
      this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload: { ...base_payload, effects: effects as unknown as JsonObject } });
      finish();
      this.skipStep(name, acts.next);
      return;
    }
    if (acts?.next) {
      effects.done = { item: rec.item, result: itemResult };
      this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload: { ...base_payload, effects: effects as unknown as JsonObject } });
      finish();
      const loop = this.s.runs[name]?.loop;
      this.exitStep(name, Boolean(loop && loop.done < loop.items.length));
      return;
    }
    if (acts?.retry) {
      const a = acts.retry;
      const max = a.max_attempts ?? DEFAULT_RETRY_ATTEMPTS;
      this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload: { ...base_payload, follow_up: 'retry', effects: effects as unknown as JsonObject } });
      finish();
      if (rec.attempt >= max) {
        this.failStep(name, { message: `Retry attempts exhausted (${max})`, attempts: rec.attempt, ...(error !== undefined ? { error: error as Json } : {}) });
        return;
      }
      const delay = backoffMs(a.initial_delay ?? DEFAULT_INITIAL_DELAY_S, a.backoff_multiplier ?? DEFAULT_BACKOFF_MULTIPLIER, rec.attempt, jitterOf(a as { jitter?: unknown }), this.input.random);
      this.issueCall(def, { item: rec.item, tool: rec.tool, attempt: rec.attempt + 1, chainIndex: chain.index, delay, startItem: false });
      return;
    }
    if (acts?.call) {
      this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload: { ...base_payload, follow_up: 'call', effects: effects as unknown as JsonObject } });
      finish();
      this.issueCall(def, { item: rec.item, tool: mergeTool(rec.tool, acts.call), attempt: 1, chainIndex: chain.index, delay: 0, startItem: false });
      return;
    }
    if (!ok && !acts) {
      this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload: { ...base_payload, effects: effects as unknown as JsonObject } });
      finish();
      const e: JsonObject = exhausted ? { ...exhausted, error: (error ?? null) as Json } : { message: errorMessage(error), error: (error ?? null) as Json };
      this.failStep(name, e);
      return;
    }
    effects.done = { item: rec.item, result: itemResult };
    this.emit({ name: 'action_completed', step: name, command_id: rec.command_id, payload: { ...base_payload, effects: effects as unknown as JsonObject } });
    finish();
    const cur = this.s.runs[name];
    if (!cur) return;
    if (cur.loop) {
      if (cur.loop.done >= cur.loop.items.length) this.exitStep(name, false);
      else this.fillLoop(def);
    } else if (cur.calls === 0) {
      this.exitStep(name, false);
    }
  }

  collectPage(then: RetryThen, view: unknown, prev: Json | undefined, key: string, policy: number, effects: Effects): { pages: Json | undefined; into?: string } {
    if (!then.collect) return { pages: prev };
    const value = getPath(view, then.collect.path);
    const mode: CollectMode = then.collect.strategy === 'replace' ? 'replace' : then.collect.strategy === 'merge' ? 'merge' : 'concat';
    effects.chain = { ...(effects.chain ?? { key }), key, op: { mode, value }, policy };
    return { pages: combine(mode, prev, value), into: then.collect.into };
  }
}

const LEGACY_MERGE: Record<string, CollectMode> = { append: 'concat', extend: 'flatten', replace: 'replace', collect: 'push' };

function sinkOf(then: RetryThen): Tool | undefined {
  const per = (then as { per_iteration?: { sink?: Tool } }).per_iteration;
  return then.sink ?? per?.sink;
}

function firstCollectPolicy(def: Step): number | undefined {
  const i = (def.retry ?? []).findIndex((p) => p.then.collect && !/(?<![\w.])error\b/.test(String(p.when).replace(/'[^']*'|"[^"]*"/g, "''")));
  return i >= 0 ? i : undefined;
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

export function handle(state: EngineState, playbook: Playbook, event: EngineEvent, input: EngineInput): Decision<EngineState> {
  const noop: Decision<EngineState> = { state, events: [], commands: [] };
  if (TERMINAL_STATUSES.includes(state.status)) return noop;
  const b = new Builder(Draft.from(state), playbook, input);
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
