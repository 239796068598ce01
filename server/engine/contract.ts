/**
 * The engine's contract with the rest of the server. The engine is pure:
 *   handle(state, playbook, event, input) → { state, events, commands }
 *   fold(events) → state
 * No SQL, HTTP, clock or randomness inside `server/engine/`: time and jitter come in `EngineInput`,
 * and everything the fold needs is carried by the recorded events (a `command_issued` event holds
 * the whole command, a `step_completed` event the step's result, and so on).
 *
 * The server, per execution and inside one transaction holding pg_advisory_xact_lock(execution_id):
 *   1. loads the execution's events (or a cached snapshot) and folds them into state,
 *   2. calls `handle` with the incoming event,
 *   3. appends `decision.events` to the event log (in order; the incoming event is the first of
 *      them when it is recorded, none at all when it was a duplicate),
 *   4. inserts one queue row per `decision.commands` entry (unique on execution_id + command_id),
 *   5. commits, then publishes notifications (transactional outbox).
 */
import type { Json, JsonObject, Playbook, Tool } from '../../playbook/types.js';

export type ExecutionStatus = 'started' | 'running' | 'completed' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: readonly ExecutionStatus[] = ['completed', 'failed', 'cancelled'];

/**
 * An event as the engine sees it: inbound (from a worker, from the server on behalf of a child
 * execution or an expired lease) or emitted by the engine itself. The server adds event_id,
 * execution_id and created_at when it stores one.
 *
 * Inbound names: `call.done` (payload `{response}` or `{error}` plus `meta`), `step.enter` /
 * `step.exit` sent by a worker are accepted and ignored when the engine already recorded them
 * (the engine owns step boundaries: only it knows when a loop starts and ends),
 * `execution.cancel` (a user cancelled), `action_started` (a worker claimed a command).
 * Emitted names: `execution_started`, `step.enter`, `command_issued`, `call.done` (recorded),
 * `action_completed`, `step.exit`, `step_completed`, `vars_set`, `step_skipped`, `step_failed`,
 * `execution_completed`, `execution_failed`, `execution_cancelled`, and any other the fold needs.
 */
export interface EngineEvent {
  name: string;
  step?: string | null;
  /** Per-execution command sequence number; set on every event about one command. */
  command_id?: number;
  payload: JsonObject;
}

/** What a worker runs. Stored in the queue row's `command` column (no secrets in clear text). */
export interface Command {
  /** 1, 2, 3… within the execution; with execution_id the queue row's natural key. */
  command_id: number;
  step: string;
  /** Tool config with templates rendered, except secret references (`keychain.*`, `auth`
   *  credential names), which the worker resolves through the server at run time. */
  tool: Tool;
  /** The step's rendered args (after next-action args and vars). */
  args: JsonObject;
  /** 1-based attempt of this call (error-side retry increments it). */
  attempt: number;
  /** Loop item index (0-based) or pagination page index (1-based `_retry.index`); absent otherwise. */
  iteration?: number;
  /** Unix ms; later than the event time for a backoff delay. The queue publishes it when due. */
  available_at: number;
  /** How many times the queue may hand this command to a worker before giving up (lease expiry). */
  max_deliveries: number;
  /** Worker pool that runs it (the step's, else the playbook's); absent: `default`. */
  pool?: string;
  /** Set for `tool.kind === 'playbook'`: what the worker asks the server to start. */
  child?: { path: string; payload: JsonObject };
  /** True for a `sink` side effect (case `sink` action, retry `sink` / `per_iteration.sink`):
   *  its call.done never re-triggers the step's rules, and a failed sink fails the execution. */
  sink?: boolean;
}

export interface EngineInput {
  /** Unix ms of this decision; every timestamp and `available_at` is derived from it. */
  now: number;
  /** [0, 1); used only for backoff jitter. */
  random: () => number;
  /** Variables written outside the engine (the vars API), overlaid on the engine's own. */
  externalVars?: JsonObject;
  /** Async loop bound (default 16). */
  maxInFlight?: number;
}

export interface StartInput {
  execution_id: string;
  path: string;
  version: number;
  catalog_id: string;
  payload: JsonObject;
  parent_execution_id?: string | null;
  root_execution_id?: string | null;
}

export interface StepSummary {
  /** `cancelled`: still running when the execution was cancelled or failed (a retry runs it again). */
  status: 'pending' | 'running' | 'completed' | 'failed' | 'skipped' | 'cancelled';
  /** How many times the step was entered (a fan-in step runs once per arriving transition). */
  runs: number;
  result?: Json;
  error?: Json;
}

/** The parts of the state the server reads; the engine may keep more. */
export interface ExecutionStateView {
  execution_id: string;
  status: ExecutionStatus;
  steps: Record<string, StepSummary>;
  result?: Json;
  error?: Json;
  /** Commands issued and not yet finished (call.done recorded). */
  open_commands: number[];
  vars: JsonObject;
}

export interface Decision<S extends ExecutionStateView = ExecutionStateView> {
  state: S;
  events: EngineEvent[];
  commands: Command[];
  /** Commands this decision made obsolete (early loop break, step failure or skip, execution
   *  failure or cancellation): the server marks their queue rows cancelled; a late call.done
   *  for one of them is ignored by the engine. Absent when empty. */
  cancelled_commands?: number[];
  /** Names of the step summaries this decision added or replaced (each `state.steps[name]` is a new
   *  object; the others are the input's). Lets the server write only those. Absent: unknown. */
  changed_steps?: string[];
}

/**
 * `reuseSteps`: the caller hands over `state.steps` (the map, not the summaries in it): the new
 * state's map is that same object, changed in place, instead of a copy — copying a map of 10,000
 * summaries on every decision made a step O(steps). The caller must not use `state.steps` as the
 * old map afterwards (the server keeps only the newest state; it drops its cache entry when a
 * transaction fails). Every summary the decision changes is still a new object.
 *
 * `owned`: the copies earlier decisions of a batch made (each decision adds its own), which this
 * one may change in place instead of copying again. Pass one Set along decisions that each start
 * from the previous one's state, and nothing else: the earlier states share those copies and are
 * changed with them (a batch of loop items copied the loop's open commands and result chunk once
 * per item).
 */
export interface HandleOptions {
  reuseSteps?: boolean;
  owned?: Set<object>;
}

export interface Engine<S extends ExecutionStateView = ExecutionStateView> {
  start(playbook: Playbook, init: StartInput, input: EngineInput): Decision<S>;
  handle(state: S, playbook: Playbook, event: EngineEvent, input: EngineInput, opts?: HandleOptions): Decision<S>;
  reduce(state: S | undefined, event: EngineEvent): S;
  fold(events: EngineEvent[]): S;
}

export type { Json, JsonObject };
