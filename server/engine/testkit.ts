/**
 * Scenario runner for the engine: a fake worker answers every issued command with a function of
 * the command (step, tool config, iteration, attempt), the runner feeds the answers back as
 * `call.done` events and checks the engine's invariants after every decision:
 *   - a recorded decision begins with the incoming event; a duplicate records nothing;
 *   - `decision.state` equals the state obtained by reducing the decision's events one by one;
 *   - at the end, `fold(all events)` (also after a JSON round trip, as the server stores them)
 *     deep-equals the incrementally maintained state;
 *   - a second chain of states, each decided with `reuseSteps` (the steps map changed in place, as
 *     the server does) and, in groups of SHADOW_BATCH decisions, one `owned` set (the copies an
 *     earlier decision of a group commit made are changed in place), decides the same events and
 *     deep-equals the copy-on-write state throughout; its events, compared again at the end, were
 *     not changed by the decisions after them.
 * Used by the engine's tests; the server's tests may use it too. No test framework inside.
 */
import { deepStrictEqual, strictEqual } from 'node:assert';
import type { Json, JsonObject, Playbook } from '../../playbook/types.js';
import type { Command, Decision, EngineEvent, EngineInput } from './contract.js';
import { fold, handle, reduce, start } from './engine.js';
import type { EngineState } from './state.js';

export type WorkerReply = { response: Json; meta?: JsonObject } | { error: Json; meta?: JsonObject };

export interface WorkerCall {
  cmd: Command;
  /** 0-based count of calls already answered for this step. */
  n: number;
  /** Workload / payload, for convenience. */
  state: EngineState;
  /** How many `execution.retry` events were sent before this call. */
  retried: number;
}
export type FakeWorker = (call: WorkerCall) => WorkerReply;

export interface ScenarioOptions {
  payload?: JsonObject;
  maxInFlight?: number;
  /** Which open command the worker answers next: oldest first (default), newest first, or
   *  a deterministic shuffle. Commands not yet due are taken in due order. */
  order?: 'fifo' | 'lifo' | 'shuffle';
  /** Deliver every call.done twice (broker redelivery). */
  duplicate?: boolean;
  /** Send action_started (claim) before each call.done. */
  claim?: boolean;
  random?: () => number;
  externalVars?: JsonObject;
  /** Send execution.cancel after this many answered commands. */
  cancelAfter?: number;
  /** Extra events to inject after the n-th answer: [n, event]. */
  inject?: Array<[number, EngineEvent]>;
  /** When the execution ended failed or cancelled with nothing left to answer, send
   *  `execution.retry` with each of these payloads in turn (the worker sees `retried`). */
  retries?: JsonObject[];
  /** Safety bound on answered commands. */
  maxCalls?: number;
  /** Check the fold invariant after every decision (slower; default true). */
  foldEachStep?: boolean;
}

export interface ScenarioResult {
  state: EngineState;
  events: EngineEvent[];
  /** Every command issued, in issue order. */
  commands: Command[];
  /** Commands the worker answered, in answer order. */
  answered: Command[];
  decisions: Decision<EngineState>[];
  /** Highest number of simultaneously open call commands per step. */
  maxOpen: Record<string, number>;
  cancelled: number[];
  /** Duplicates that were delivered and ignored. */
  duplicatesIgnored: number;
}

export const T0 = 1_700_000_000_000;

/** Decisions the shadow chain makes with one `owned` set, as the server's group commit does. */
const SHADOW_BATCH = 3;

function checkDecision(prev: EngineState | undefined, d: Decision<EngineState>, incoming?: EngineEvent): void {
  if (incoming && d.events.length) {
    strictEqual(d.events[0].name, incoming.name, 'a recorded decision begins with the incoming event');
  }
  let s = prev;
  for (const ev of d.events) s = reduce(s, ev);
  if (s !== undefined) deepStrictEqual(s, d.state, 'reducing the decision events gives the decision state');
  for (const c of d.commands) {
    const issued = d.events.find((e) => e.name === 'command_issued' && e.command_id === c.command_id);
    if (!issued) throw new Error(`command ${c.command_id} has no command_issued event`);
  }
}

export function runScenario(playbook: Playbook, worker: FakeWorker, opts: ScenarioOptions = {}): ScenarioResult {
  let now = T0;
  let seed = 42;
  const random = opts.random ?? (() => 0.5);
  const input = (): EngineInput => ({ now, random, maxInFlight: opts.maxInFlight, externalVars: opts.externalVars });
  const first = start(
    playbook,
    { execution_id: '1001', path: playbook.metadata.path ?? playbook.metadata.name, version: 1, catalog_id: '7', payload: opts.payload ?? {} },
    input(),
  );
  checkDecision(undefined, first);
  const res: ScenarioResult = {
    state: first.state, events: [...first.events], commands: [...first.commands], answered: [], decisions: [first],
    maxOpen: {}, cancelled: [...(first.cancelled_commands ?? [])], duplicatesIgnored: 0,
  };
  let queue: Command[] = [...first.commands];
  // the chain the server keeps: each state handed to the next decision with its steps map
  let shadow = JSON.parse(JSON.stringify(first.state)) as EngineState;
  let shadowOwned = new Set<object>();
  let shadowDecisions = 0;
  const shadowEvents: EngineEvent[] = [...first.events];
  const perStep: Record<string, number> = {};
  const trackOpen = (): void => {
    const counts: Record<string, number> = {};
    for (const id of res.state.open_commands) {
      const c = res.state.commands[id];
      if (c?.kind === 'call') counts[c.step] = (counts[c.step] ?? 0) + 1;
    }
    for (const [k, v] of Object.entries(counts)) res.maxOpen[k] = Math.max(res.maxOpen[k] ?? 0, v);
  };
  trackOpen();
  const apply = (ev: EngineEvent): Decision<EngineState> => {
    const prev = res.state;
    // handle() must not mutate the state it is given (the server caches it): freeze it.
    deepFreeze(prev);
    const d = handle(prev, playbook, ev, input());
    checkDecision(prev, d, ev);
    // the server may cache the state as JSON: a snapshot must decide exactly the same
    const again = handle(JSON.parse(JSON.stringify(prev)) as EngineState, playbook, ev, input());
    deepStrictEqual(again.events, d.events, 'a JSON snapshot of the state decides the same events');
    const shadowMap = shadow.steps;
    if (shadowDecisions++ % SHADOW_BATCH === 0) shadowOwned = new Set();
    const reused = handle(shadow, playbook, ev, input(), { reuseSteps: true, owned: shadowOwned });
    deepStrictEqual(reused.events, d.events, 'deciding with reuseSteps (and a batch\'s owned copies) gives the same events');
    deepStrictEqual(reused.state, d.state, 'deciding with reuseSteps (and a batch\'s owned copies) gives the same state');
    shadowEvents.push(...reused.events);
    if (d.events.length) strictEqual(reused.state.steps, shadowMap, 'reuseSteps changes the steps map in place');
    for (const name of Object.keys(d.state.steps)) {
      if (!(reused.changed_steps ?? []).includes(name) && prev.steps[name] === undefined) throw new Error(`summary ${name} added but not named changed`);
    }
    shadow = reused.state;
    res.decisions.push(d);
    res.state = d.state;
    res.events.push(...d.events);
    res.commands.push(...d.commands);
    queue.push(...d.commands);
    if (d.cancelled_commands?.length) {
      res.cancelled.push(...d.cancelled_commands);
      const gone = new Set(d.cancelled_commands);
      queue = queue.filter((c) => !gone.has(c.command_id));
    }
    trackOpen();
    if (opts.foldEachStep !== false) deepStrictEqual(fold(res.events), res.state, 'fold(events) equals the state after each decision');
    return d;
  };
  const max = opts.maxCalls ?? 500;
  let answered = 0;
  let retried = 0;
  const retries = [...(opts.retries ?? [])];
  for (;;) {
    if (!queue.length) {
      if (!retries.length || (res.state.status !== 'failed' && res.state.status !== 'cancelled')) break;
      retried++;
      apply({ name: 'execution.retry', step: null, payload: retries.shift()! });
      continue;
    }
    if (answered >= max) break;
    let idx: number;
    const due = Math.min(...queue.map((c) => c.available_at));
    const candidates = queue.map((c, i) => [c, i] as const).filter(([c]) => c.available_at <= Math.max(now, due));
    if (opts.order === 'lifo') idx = candidates[candidates.length - 1][1];
    else if (opts.order === 'shuffle') {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      idx = candidates[seed % candidates.length][1];
    } else idx = candidates[0][1];
    const cmd = queue.splice(idx, 1)[0];
    now = Math.max(now, cmd.available_at) + 10;
    if (opts.claim) apply({ name: 'action_started', step: cmd.step, command_id: cmd.command_id, payload: { worker_id: 'w1' } });
    const n = perStep[cmd.step] ?? 0;
    perStep[cmd.step] = n + 1;
    const reply = worker({ cmd, n, state: res.state, retried });
    res.answered.push(cmd);
    const ev: EngineEvent = {
      name: 'call.done', step: cmd.step, command_id: cmd.command_id,
      payload: { ...reply, meta: { duration_ms: 5, attempt: cmd.attempt, iteration: cmd.iteration ?? null, ...(reply.meta ?? {}) } } as JsonObject,
    };
    apply(ev);
    answered++;
    if (opts.duplicate) {
      const before = res.state;
      const d = handle(before, playbook, ev, input());
      strictEqual(d.events.length, 0, 'a duplicate call.done records nothing');
      strictEqual(d.commands.length, 0, 'a duplicate call.done issues nothing');
      strictEqual(d.state, before, 'a duplicate call.done leaves the state as is');
      res.duplicatesIgnored++;
    }
    for (const [at, extra] of opts.inject ?? []) if (at === answered) apply(extra);
    if (opts.cancelAfter === answered) apply({ name: 'execution.cancel', step: null, payload: { reason: 'user' } });
  }
  deepStrictEqual(shadowEvents, res.events, 'later decisions left the events of earlier ones (owned copies) as they were');
  deepStrictEqual(fold(res.events), res.state, 'fold(all events) equals the incremental state');
  deepStrictEqual(fold(JSON.parse(JSON.stringify(res.events)) as EngineEvent[]), res.state, 'fold survives a JSON round trip');
  return res;
}

function deepFreeze(v: unknown): void {
  if (v === null || typeof v !== 'object' || Object.isFrozen(v)) return;
  Object.freeze(v);
  for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
}

/** Event names of a run (optionally for one step), for compact assertions. */
export function names(events: EngineEvent[], step?: string): string[] {
  return events.filter((e) => step === undefined || e.step === step).map((e) => e.name);
}
