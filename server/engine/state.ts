/**
 * Engine state and the reducer. The state is a plain JSON value (the server may snapshot it as
 * JSON) and is changed ONLY by `apply(draft, event)`: `handle` decides by emitting events and
 * applying each one through this same reducer, so `fold(events)` rebuilds exactly the state that
 * `handle` maintained incrementally.
 *
 * Cost: applying an event touches the execution's top-level maps (O(steps + open commands)) and
 * the one step run it concerns (O(that step)); nothing is proportional to the history length.
 * `reduce`/`handle` never mutate the state they are given (copy-on-write through `Draft`), except
 * the `steps` map when the caller hands it over (`handle(…, { reuseSteps: true })`: a copy of
 * thousands of summaries per decision made a long execution's steps O(steps));
 * `fold` owns the state it builds and mutates it in place.
 */
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import type { Command, EngineEvent, ExecutionStateView, StepSummary } from './contract.js';

export interface RenderedTarget {
  step: string;
  args: JsonObject;
}

/**
 * How one collected value is folded into an accumulator:
 *  push    — the value becomes one more element (case `collect` mode append, legacy `collect`);
 *  concat  — a list value is concatenated, anything else pushed (case `extend`, retry/legacy `append`);
 *  flatten — nested lists are flattened completely, then concatenated (legacy `extend`);
 *  replace — the value replaces the accumulator; merge — objects merged, lists concatenated.
 */
export type CollectMode = 'push' | 'concat' | 'flatten' | 'replace' | 'merge';
export interface CollectOp {
  into: string;
  mode: CollectMode;
  value: Json;
}

/** A chain of calls for one loop item (or the single call): error retries and pages. */
export interface Chain {
  /** 1-based index of the last page requested (`_retry.index`). */
  index: number;
  /** Accumulated pages (unified `collect`, legacy `merge_strategy`); absent until collected. */
  pages?: Json;
  /** Index of the unified retry policy that drove pagination in this chain. */
  policy?: number;
}

export interface LoopState {
  items: Json[];
  iterator: string;
  mode: 'sequential' | 'async';
  max_in_flight: number;
  /** Next item index to issue. */
  next: number;
  in_flight: number;
  done: number;
  /**
   * Per-item results, item order (null until done), and which items finished. With `chunk`, both
   * are lists of chunks of `chunk` items: recording an item copies one chunk and the chunk list,
   * not the whole loop (copy on write per event was O(items): quadratic over a large loop).
   * Without it (states written before chunking), flat lists.
   */
  results: Json[] | Json[][];
  finished: boolean[] | boolean[][];
  chunk?: number;
}

/** Items per chunk of a loop's results and finished flags. */
export const LOOP_CHUNK = 1024;

function chunks<T>(n: number, value: T): T[][] {
  const out: T[][] = [];
  for (let at = 0; at < n; at += LOOP_CHUNK) out.push(new Array<T>(Math.min(LOOP_CHUNK, n - at)).fill(value));
  return out;
}

export function loopFinished(loop: LoopState, i: number): boolean {
  if (!loop.chunk) return (loop.finished as boolean[])[i] === true;
  return (loop.finished as boolean[][])[Math.floor(i / loop.chunk)]?.[i % loop.chunk] === true;
}

export function loopFinishedCount(loop: LoopState): number {
  let n = 0;
  for (let i = 0; i < loop.items.length; i++) if (loopFinished(loop, i)) n++;
  return n;
}

/** Results of the finished items, item order; `finishing`: an item whose call is about to finish it, with its result. */
export function loopResults(loop: LoopState, finishing?: { item: number; result: Json }): Json[] {
  const out: Json[] = [];
  const flat = loop.chunk ? (loop.results as Json[][]).flat(1) as Json[] : (loop.results as Json[]);
  for (let i = 0; i < loop.items.length; i++) {
    if (i === finishing?.item) out.push(finishing.result);
    else if (loopFinished(loop, i)) out.push(flat[i] ?? null);
  }
  return out;
}

function recordLoopItem(d: Draft, loop: LoopState, i: number, result: Json): void {
  const results = d.mut<Json[] | Json[][]>(loop, 'results');
  const finished = d.mut<boolean[] | boolean[][]>(loop, 'finished');
  if (!loop.chunk) {
    (results as Json[])[i] = result;
    (finished as boolean[])[i] = true;
    return;
  }
  const c = Math.floor(i / loop.chunk);
  d.mut<Json[]>(results, c)[i % loop.chunk] = result;
  d.mut<boolean[]>(finished, c)[i % loop.chunk] = true;
}

export interface RunState {
  run: number;
  args: JsonObject;
  /** Step-local context (`set` actions). */
  ctx: JsonObject;
  /** Step-local accumulators (`collect` actions), exposed in templates by name. */
  acc: JsonObject;
  /** Explicit result (`result` action). */
  result?: Json;
  has_result?: boolean;
  /** Transitions chosen by a case `next` action (they replace the structural next). */
  next?: RenderedTarget[];
  loop?: LoopState;
  /** Keyed by loop item index, or `-` outside loops. */
  chains: Record<string, Chain>;
  /** Result of the single call of a non-loop step. */
  last?: Json;
  /** Open call commands of this run. */
  calls: number;
}

export interface CommandRecord {
  command_id: number;
  step: string;
  run: number;
  kind: 'call' | 'sink';
  item: number | null;
  attempt: number;
  chain_index: number;
  tool: Tool;
  args: JsonObject;
  status: 'queued' | 'running';
}

export interface EngineState extends ExecutionStateView {
  /** State format version. */
  v: 1;
  path: string;
  version: number;
  catalog_id: string;
  payload: JsonObject;
  parent_execution_id: string | null;
  root_execution_id: string | null;
  /** Last command_id issued. */
  seq: number;
  /** Open commands by id. */
  commands: Record<string, CommandRecord>;
  /** Active step runs by step name. */
  runs: Record<string, RunState>;
  /** Fan-in: transitions that arrived while their target was running. */
  pending: Record<string, RenderedTarget[]>;
  /** Last step whose completion issued no transition; its result is the execution result. */
  terminal_step: string | null;
  /**
   * Set when the execution failed or was cancelled: the step runs that did not finish (the failed
   * step, and those running when the execution ended) and the fan-in transitions that waited, so
   * `execution.retry` can resume them in place. Cleared by `execution_retried`.
   */
  resume?: Record<string, RunState>;
  resume_pending?: Record<string, RenderedTarget[]>;
}

/** One step `execution_retried` starts again: a loop run continuing (`resume`) or a fresh entry. */
export interface RetriedStep {
  step: string;
  args: JsonObject;
  /** The loop run continues: finished items keep their results, the others run again. */
  resume: boolean;
}

/** Effects of one rule evaluation / call outcome, applied to the step's run. */
export interface Effects {
  ctx?: JsonObject;
  collect?: CollectOp[];
  result?: Json;
  has_result?: boolean;
  next?: RenderedTarget[];
  /** Chain bookkeeping: page index, page accumulation, policy. */
  chain?: { key: string; index?: number; policy?: number; op?: { mode: CollectMode; value: Json } };
  /** The call (or loop item) is finished with this result. */
  done?: { item: number | null; result: Json };
}

/** Copy-on-write helper: `mut(parent, key)` returns a child this draft may mutate. */
export class Draft {
  /** Steps whose summary this draft added or replaced (Decision.changed_steps). */
  readonly touchedSteps = new Set<string>();
  /**
   * Objects this draft (or, with HandleOptions.owned, an earlier decision of the batch) created:
   * free to change in place. A Set, not a WeakSet: a draft lives for one decision or one batch,
   * and WeakSet insertions were most of the cost of starting one.
   */
  constructor(
    public s: EngineState,
    private readonly inPlace: boolean,
    private readonly owned = new Set<object>(),
  ) {
    this.owned.add(s);
  }

  /**
   * `reuseSteps`: the caller gave up `state.steps`; the draft changes that map in place. `owned`:
   * copies earlier decisions made, changed in place too. See HandleOptions.
   */
  static from(state: EngineState, reuseSteps = false, owned?: Set<object>): Draft {
    const d = new Draft(copyState(state), false, owned);
    if (reuseSteps && state.steps) d.owned.add(state.steps);
    return d;
  }

  mut<T>(parent: any, key: string | number): T {
    const child = parent[key];
    if (this.inPlace || child === null || typeof child !== 'object' || this.owned.has(child)) return child;
    const copy = Array.isArray(child) ? child.slice() : { ...child };
    this.owned.add(copy);
    parent[key] = copy;
    return copy as T;
  }

  fresh<T extends object>(o: T): T {
    this.owned.add(o);
    return o;
  }
}

/**
 * A shallow copy of the state, of one shape. `{...state}` met states of several shapes (parsed
 * snapshots, earlier decisions' copies, optional keys) and V8 then copied them at runtime, key by
 * key: about 12 µs a decision under bench/fibo, two decisions a step; this takes about 1 µs. Keys
 * outside the interface (none today; an older snapshot's) are kept.
 */
function copyState(s: EngineState): EngineState {
  const c: EngineState = {
    v: s.v, execution_id: s.execution_id, status: s.status, steps: s.steps, open_commands: s.open_commands, vars: s.vars,
    path: s.path, version: s.version, catalog_id: s.catalog_id, payload: s.payload, parent_execution_id: s.parent_execution_id,
    root_execution_id: s.root_execution_id, seq: s.seq, commands: s.commands, runs: s.runs, pending: s.pending, terminal_step: s.terminal_step,
  };
  for (const k in s) if (!Object.hasOwn(c, k)) (c as unknown as Record<string, unknown>)[k] = (s as unknown as Record<string, unknown>)[k];
  return c;
}

export function initialState(): EngineState {
  return {
    v: 1, execution_id: '', status: 'started', steps: {}, open_commands: [], vars: {}, path: '', version: 0,
    catalog_id: '', payload: {}, parent_execution_id: null, root_execution_id: null, seq: 0, commands: {}, runs: {},
    pending: {}, terminal_step: null,
  };
}

function summary(d: Draft, step: string): StepSummary {
  const steps = d.mut<Record<string, StepSummary>>(d.s, 'steps');
  d.touchedSteps.add(step);
  if (!steps[step]) steps[step] = d.fresh({ status: 'pending', runs: 0 });
  return d.mut<StepSummary>(steps, step);
}

export function runOf(d: Draft, step: string): RunState | undefined {
  if (!d.s.runs[step]) return undefined;
  const runs = d.mut<Record<string, RunState>>(d.s, 'runs');
  return d.mut<RunState>(runs, step);
}

function removeCommands(d: Draft, ids: readonly number[]): void {
  if (ids.length === 0) return;
  const commands = d.mut<Record<string, CommandRecord>>(d.s, 'commands');
  const open = d.mut<number[]>(d.s, 'open_commands');
  for (const id of ids) {
    const rec = commands[id];
    if (!rec) continue;
    delete commands[id];
    const i = open.indexOf(id);
    if (i >= 0) open.splice(i, 1);
    if (rec.kind === 'call') {
      const run = runOf(d, rec.step);
      if (run && run.run === rec.run) run.calls--;
    }
  }
}

/** Keeps an unfinished run for a later retry (only its JSON; its open calls are gone). */
function keepForRetry(d: Draft, step: string): void {
  const run = d.s.runs[step];
  if (!run) return;
  if (!d.s.resume) d.s.resume = d.fresh({});
  const resume = d.mut<Record<string, RunState>>(d.s, 'resume');
  if (!resume[step]) resume[step] = run;
}

function endRun(d: Draft, step: string): void {
  if (!d.s.runs[step]) return;
  const runs = d.mut<Record<string, RunState>>(d.s, 'runs');
  delete runs[step];
}

export function combine(mode: CollectMode, prev: Json | undefined, value: Json): Json {
  switch (mode) {
    case 'replace':
      return value;
    case 'push':
      return [...asList(prev), value];
    case 'concat':
      return [...asList(prev), ...(Array.isArray(value) ? value : [value])];
    case 'flatten':
      return [...asList(prev), ...(Array.isArray(value) ? ((value as unknown[]).flat(Infinity) as Json[]) : [value])];
    case 'merge':
      if (isObject(value) && (prev === undefined || prev === null)) return value;
      if (isObject(prev) && isObject(value)) return { ...prev, ...value };
      return [...asList(prev), ...(Array.isArray(value) ? value : [value])];
  }
}

function asList(v: Json | undefined): Json[] {
  if (v === undefined || v === null) return [];
  return Array.isArray(v) ? v : [v];
}

export function isObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function applyEffects(d: Draft, step: string, e: Effects): void {
  const run = runOf(d, step);
  if (!run) return;
  if (e.ctx) run.ctx = { ...run.ctx, ...e.ctx };
  if (e.collect?.length) {
    const acc = d.mut<JsonObject>(run, 'acc');
    for (const op of e.collect) acc[op.into] = combine(op.mode, acc[op.into], op.value);
  }
  if (e.has_result) {
    run.result = e.result ?? null;
    run.has_result = true;
  }
  if (e.next) run.next = e.next;
  if (e.chain) {
    const chains = d.mut<Record<string, Chain>>(run, 'chains');
    const chain = (chains[e.chain.key] = d.fresh({ ...(chains[e.chain.key] ?? { index: 1 }) }));
    if (e.chain.index !== undefined) chain.index = e.chain.index;
    if (e.chain.policy !== undefined) chain.policy = e.chain.policy;
    if (e.chain.op) chain.pages = combine(e.chain.op.mode, chain.pages, e.chain.op.value);
  }
  if (e.done) {
    if (e.done.item === null || !run.loop) {
      run.last = e.done.result;
    } else {
      const loop = d.mut<LoopState>(run, 'loop');
      recordLoopItem(d, loop, e.done.item, e.done.result);
      loop.done++;
      loop.in_flight--;
    }
  }
}

/** Applies one event to the draft. Unknown names change nothing (they are still recorded). */
export function apply(d: Draft, ev: EngineEvent): void {
  const p = ev.payload;
  const step = ev.step ?? '';
  const s = d.s;
  switch (ev.name) {
    case 'execution_started': {
      s.execution_id = String(p.execution_id ?? '');
      s.path = String(p.path ?? '');
      s.version = Number(p.version ?? 0);
      s.catalog_id = String(p.catalog_id ?? '');
      s.payload = (p.payload as JsonObject) ?? {};
      s.parent_execution_id = (p.parent_execution_id as string | null) ?? null;
      s.root_execution_id = (p.root_execution_id as string | null) ?? s.execution_id;
      s.status = 'started';
      break;
    }
    case 'step.enter': {
      const sum = summary(d, step);
      sum.status = 'running';
      sum.runs++;
      delete sum.error;
      if (p.queued) {
        const pending = d.mut<Record<string, RenderedTarget[]>>(s, 'pending');
        const list = d.mut<RenderedTarget[]>(pending, step);
        list.shift();
        if (list.length === 0) delete pending[step];
      }
      const loop = p.loop as JsonObject | undefined;
      const run: RunState = { run: sum.runs, args: (p.args as JsonObject) ?? {}, ctx: {}, acc: {}, chains: {}, calls: 0 };
      if (loop) {
        const items = loop.items as Json[];
        run.loop = {
          items, iterator: String(loop.iterator), mode: loop.mode as LoopState['mode'], max_in_flight: Number(loop.max_in_flight),
          next: 0, in_flight: 0, done: 0, results: chunks<Json>(items.length, null), finished: chunks(items.length, false), chunk: LOOP_CHUNK,
        };
      }
      const runs = d.mut<Record<string, RunState>>(s, 'runs');
      runs[step] = d.fresh(run);
      break;
    }
    case 'case_applied':
      applyEffects(d, step, (p.effects as Effects) ?? {});
      break;
    case 'command_issued': {
      const c = p.command as unknown as Command;
      const rec: CommandRecord = {
        command_id: c.command_id, step: c.step, run: Number(p.run), kind: p.kind === 'sink' ? 'sink' : 'call',
        item: (p.item as number | null) ?? null, attempt: c.attempt, chain_index: Number(p.chain_index ?? 1),
        tool: c.tool, args: c.args, status: 'queued',
      };
      const commands = d.mut<Record<string, CommandRecord>>(s, 'commands');
      commands[c.command_id] = d.fresh(rec);
      d.mut<number[]>(s, 'open_commands').push(c.command_id);
      s.seq = Math.max(s.seq, c.command_id);
      if (rec.kind === 'call') {
        const run = runOf(d, c.step);
        if (run) {
          run.calls++;
          if (p.start_item && run.loop) {
            const loop = d.mut<LoopState>(run, 'loop');
            // items are issued in order; after a retry, finished ones are skipped
            loop.next = Math.max(loop.next, Number(p.item) + 1);
            loop.in_flight++;
          }
        }
      }
      break;
    }
    case 'action_started': {
      const id = ev.command_id;
      if (id !== undefined && s.commands[id]) {
        const commands = d.mut<Record<string, CommandRecord>>(s, 'commands');
        d.mut<CommandRecord>(commands, id).status = 'running';
      }
      if (s.status === 'started') s.status = 'running';
      break;
    }
    case 'call.done':
      if (ev.command_id !== undefined) removeCommands(d, [ev.command_id]);
      if (s.status === 'started') s.status = 'running';
      break;
    case 'action_completed':
      applyEffects(d, step, (p.effects as Effects) ?? {});
      break;
    case 'step.exit':
      removeCommands(d, (p.superseded as number[]) ?? []);
      break;
    case 'step_completed': {
      removeCommands(d, (p.superseded as number[]) ?? []);
      const sum = summary(d, step);
      sum.status = 'completed';
      sum.result = (p.result as Json) ?? null;
      endRun(d, step);
      break;
    }
    case 'step_skipped': {
      removeCommands(d, (p.superseded as number[]) ?? []);
      summary(d, step).status = 'skipped';
      endRun(d, step);
      break;
    }
    case 'step_failed': {
      removeCommands(d, (p.superseded as number[]) ?? []);
      const sum = summary(d, step);
      sum.status = 'failed';
      sum.error = (p.error as Json) ?? null;
      if (!p.handled) keepForRetry(d, step);
      endRun(d, step);
      break;
    }
    case 'vars_set':
      s.vars = { ...s.vars, ...((p.variables as JsonObject) ?? {}) };
      break;
    case 'transition': {
      const targets = (p.targets as unknown as Array<RenderedTarget & { queued?: boolean }>) ?? [];
      if (targets.length === 0) s.terminal_step = (p.from as string | null) ?? null;
      for (const t of targets) {
        if (!t.queued) continue;
        const pending = d.mut<Record<string, RenderedTarget[]>>(s, 'pending');
        if (!pending[t.step]) pending[t.step] = d.fresh([]);
        d.mut<RenderedTarget[]>(pending, t.step).push({ step: t.step, args: t.args });
      }
      break;
    }
    case 'execution_completed':
      s.status = 'completed';
      s.result = (p.result as Json) ?? null;
      break;
    case 'execution_failed':
    case 'execution_cancelled':
      s.status = ev.name === 'execution_failed' ? 'failed' : 'cancelled';
      if (p.error !== undefined) s.error = p.error;
      for (const step of Object.keys(s.runs)) {
        keepForRetry(d, step);
        // ended unfinished (a loop waiting for its items included): no longer `running`
        if (s.steps[step]?.status === 'running') summary(d, step).status = 'cancelled';
      }
      if (Object.keys(s.pending).length) s.resume_pending = s.pending;
      s.commands = {};
      s.open_commands = [];
      s.runs = {};
      s.pending = {};
      break;
    case 'execution_retried':
      retried(d, p);
      break;
    default:
      break;
  }
}

/**
 * The execution runs again from where it stopped: loop runs continue with their finished items
 * (their counters reset: nothing is in flight), the other steps are entered afresh by the
 * `step.enter` events that follow; the waiting fan-in transitions are restored.
 */
function retried(d: Draft, p: JsonObject): void {
  const s = d.s;
  s.status = 'running';
  delete s.error;
  delete s.result;
  if (isObject(p.payload)) s.payload = p.payload;
  const kept = s.resume ?? {};
  for (const r of (p.steps as unknown as RetriedStep[]) ?? []) {
    if (!r.resume || !kept[r.step]?.loop) continue;
    const old = kept[r.step];
    const loop = old.loop!;
    const runs = d.mut<Record<string, RunState>>(s, 'runs');
    runs[r.step] = d.fresh({
      ...old, args: r.args, chains: {}, calls: 0,
      loop: { ...loop, next: 0, in_flight: 0, done: loopFinishedCount(loop) },
    });
    const sum = summary(d, r.step);
    sum.status = 'running';
    delete sum.error;
  }
  s.pending = s.resume_pending ?? {};
  delete s.resume;
  delete s.resume_pending;
}
