/**
 * The write of one engine decision (or a group commit's several) as ONE call of the function
 * `playflow_write_decision` (migration 340): the new events, the new queue rows, the queue rows it
 * closes, the execution row, the step summaries and, when due, the snapshot; for a speculation,
 * the execution lock and the guard first, and the queue ids of the next eager claims after.
 *
 * Why one call: each statement costs a round trip plus parse/bind on both sides, and this is the
 * hot path of every step. The function's statements run in order in one transaction, so a command
 * issued and closed in the same write could be inserted and updated; it is still inserted with its
 * final status (`mergeCloses`), one row version instead of two.
 *
 * The events, the new queue rows and the summaries are inserted only once the execution row is
 * updated: these tables have no foreign key to `execution` (migration 290), and the update's row
 * lock does what the key's check did, holding off a concurrent delete, while no row is written for
 * an execution that is not there.
 *
 * The step summaries are rows of `execution_step` (migration 260), not a jsonb column of the
 * execution row: a write upserts only the summaries it changed, so its cost does not grow with the
 * number of steps the execution has run.
 *
 * A command crosses once, in the payload of the `command_issued` event that issues it: the queue
 * row takes it from there (about 350 of a python step's 2,500 characters were the second copy).
 * A large value the write holds several times crosses once too (store/shared-values.ts). With
 * `valuesBeside` (migration 280) it is stored beside the documents: in the `value` column of the
 * first event holding it, in a summary's `result_value` and in `execution_snapshot_value`, copies
 * of the parsed parameter; otherwise jsonb_set puts it inside each, which rebuilds the value every
 * time (what servers of the previous version read).
 */
import type { Json, JsonObject } from '../../playbook/types.js';
import type { Command, EngineEvent, ExecutionStatus, StepSummary } from '../engine/contract.js';
import type { InsertedCommand } from './queue.js';
import { SharedValues, without, withoutPath } from './shared-values.js';
import { sessionStatement } from '../db.js';
import type { Queryable } from './sql.js';

export type CloseStatus = 'done' | 'failed' | 'cancelled';

/** A fresh queue row (queued, never delivered) a speculative claim leases in the write. */
export interface ClaimLease {
  queue_id: string;
  worker_id: string;
  lease_token: string;
  lease_until: Date;
}

/** A new command leased to a worker as it is inserted (eager dispatch), under a reserved queue id. */
export interface EagerLease {
  queue_id: string;
  worker_id: string;
  lease_token: string;
  lease_until: Date;
}

export interface DecisionWrite {
  executionId: string;
  /** seq of events[0]; the rest follow consecutively. */
  firstSeq: number;
  events: EngineEvent[];
  /** New queue rows (a command already queued, same execution and command id, is skipped). */
  commands: Command[];
  /** Decision clock: `available_at` is taken relative to it. */
  nowMs: number;
  /** Open queue rows to close (call.done recorded → done/failed; made obsolete → cancelled). */
  closes: Array<{ command_id: number; status: CloseStatus }>;
  execution: { status: ExecutionStatus; result: Json | null; error: Json | null; steps: Record<string, StepSummary>; terminal: boolean };
  /**
   * The step summaries this write changed, when the caller knows `execution_step` holds all the
   * others already (only these rows are upserted): a step changes two summaries of thousands, and
   * serialising, sending and writing all of them made each step O(steps).
   * Omitted: `execution.steps` replaces the execution's summaries (the others are deleted).
   */
  stepsChanged?: Record<string, StepSummary>;
  /** Folded state to cache as of `seq`; omitted: the snapshot row is left as it is. */
  snapshot?: { seq: number; state: unknown };
  /** New commands inserted leased (attempt 1) instead of queued, by command id. */
  leases?: Map<number, EagerLease>;
  /**
   * Rows a speculation claims: leased (attempt 1) only if each is still queued, due and never
   * delivered; if one is not, nothing is written (`current` false), as for a stale guard.
   */
  claims?: ClaimLease[];
  /**
   * Store shared values beside the documents (migration 280) instead of inside them; only while
   * every live server reads that layout (server/executions/values-gate.ts). Default false.
   */
  valuesBeside?: boolean;
}

export interface DecisionWritten {
  /** Queue rows inserted (`due` only for rows left queued and due now). */
  inserted: InsertedCommand[];
  /** Rows this write cancelled (obsolete commands). */
  cancelled: number;
  updated_at: Date;
  finished_at: Date | null;
}


/**
 * The write: migration 340's `playflow_write_decision` (the execution lock, the guard, the events,
 * the queue rows inserted and closed, the execution row, the summaries, the snapshot, and queue ids
 * reserved after them). Its parameters, in order ($1..$21): execution id; events (each `{seq, name,
 * step, command_id, payload}`, and `share_path`, `share_idx`, `value_seq` for a shared value);
 * new commands; closes of existing rows; status, result (inline), error, summaries, terminal;
 * snapshot seq and state (NULL: not due); whether the summaries are only the changed ones; the
 * shared values (store/shared-values.ts), the result's and the summaries' indexes in it, the
 * snapshot's; whether shared values go beside (migration 280); the guard's last seq (NULL: not a
 * speculation), holders and API vars; queue ids to reserve; fresh rows to lease (speculative claims).
 */
export const WRITE_DECISION_SQL = 'SELECT current, updated_at, finished_at, inserted, cancelled, reserved FROM playflow_write_decision($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)';

/** The same call with its arguments inlined as SQL literals (a transaction sent in one simple query). */
export function writeDecisionSql(literals: readonly string[]): string {
  return `SELECT current, updated_at, finished_at, inserted, cancelled, reserved FROM playflow_write_decision(${literals.join(', ')})`;
}

/** The name of the write's statement: executions/lazy-tx.ts recognises the write by it. */
export const WRITE_DECISION_NAME = 'playflow.write_decision';

/**
 * The write that raises STALE_SQLSTATE instead of answering `current = false` (migration 360), for
 * a pipeline whose statements after the write must not run when it wrote nothing.
 */
export const WRITE_DECISION_OR_STALE = {
  name: 'playflow.write_decision_or_stale',
  text: WRITE_DECISION_SQL.replace('playflow_write_decision(', 'playflow_write_decision_or_stale('),
};
export const STALE_SQLSTATE = 'PF409';

/** A lease a speculative decision took as its event claimed it. */
export interface GuardedLease {
  queue_id: string;
  worker_id: string;
  lease_token: string;
}

/** What a speculative decision was made from: checked by the write, or alone by GUARD_STATEMENT. */
export interface DecisionGuard {
  lastSeq: number;
  /** The leases of the calls the decision's events report on (one per queue row). */
  holders: GuardedLease[];
  /** The API vars the decision saw (hooks.loadVars). */
  vars: JsonObject;
}

/** The guard on its own, for a speculative transaction whose first statement is not the write. */
export const GUARD_STATEMENT = sessionStatement('playflow_decision_guard', ['bigint', 'integer', 'jsonb', 'jsonb'],
  'SELECT playflow_decision_current($1, $2, $3, $4) AS current');

/** GUARD_STATEMENT's values. */
export function guardValues(executionId: string, guard: DecisionGuard): unknown[] {
  return [executionId, guard.lastSeq, JSON.stringify(guard.holders), JSON.stringify(guard.vars)];
}

/** Where the guard's parameters start in the write's values (after the execution id, $18..$20), and the reserve's ($21). */
const GUARD_AT = 17;
const RESERVE_AT = 20;

/** The write's values with `guard` in place of the NULLs writeDecision sends, and `reserve` queue ids to take. */
export function guardedValues(values: readonly unknown[], guard: DecisionGuard | null, reserve = 0): unknown[] {
  const out = values.slice();
  if (guard) out.splice(GUARD_AT, 3, ...guardValues(String(values[0]), guard).slice(1));
  out[RESERVE_AT] = reserve;
  return out;
}

/** The guarded write found its speculation stale: nothing was written. */
export class StaleDecision extends Error {
  constructor(executionId: string) {
    super(`execution ${executionId} changed since its cached state: the speculative write was not applied`);
  }
}

/**
 * A command both issued and closed by this write gets its final status at insertion; the other
 * closes are updates of existing rows. The first close of a command wins, as one by one.
 */
function mergeCloses(commands: Command[], closes: DecisionWrite['closes']) {
  const issued = new Set(commands.map((c) => c.command_id));
  const atInsert = new Map<number, CloseStatus>();
  const updates: DecisionWrite['closes'] = [];
  for (const c of closes) {
    if (issued.has(c.command_id)) {
      if (!atInsert.has(c.command_id)) atInsert.set(c.command_id, c.status);
    } else {
      updates.push(c);
    }
  }
  return { atInsert, updates };
}

function leaseOf(l: EagerLease | undefined) {
  return l ? { queue_id: l.queue_id, worker_id: l.worker_id, lease_token: l.lease_token, lease_until: l.lease_until.toISOString() } : {};
}

/**
 * Where an event's payload holds a step's result or a call's response: step.exit, step_completed
 * and execution_completed (`result`), call.done (`response`), action_completed (`effects.done.result`,
 * and `effects.result` when a case action set the result).
 */
const RESULT_PATHS: ReadonlyArray<readonly string[]> = [['result'], ['response'], ['effects', 'done', 'result'], ['effects', 'result']];

/** The value at `path` in an event's payload (undefined when absent): the write reads four per event. */
function at(payload: JsonObject | undefined, path: readonly string[]): unknown {
  let cur: unknown = payload;
  for (let i = 0; i < path.length; i++) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = Object.prototype.hasOwnProperty.call(cur, path[i]!) ? (cur as Record<string, unknown>)[path[i]!] : undefined;
  }
  return cur;
}

interface StateLike { result?: unknown; steps?: Record<string, StepSummary> }

/**
 * Counts every position a large value can repeat in (store/shared-values.ts): the events' result
 * keys, the execution's result, the summaries written and, in the snapshot, the state's result and
 * its steps' results.
 */
function noteAll(shared: SharedValues, w: DecisionWrite, steps: Record<string, StepSummary>, snap: StateLike | undefined): void {
  for (const e of w.events) for (const path of RESULT_PATHS) shared.note(at(e.payload, path));
  shared.note(w.execution.result);
  for (const name in steps) shared.note(steps[name]!.result);
  if (snap) {
    shared.note(snap.result);
    for (const name in snap.steps ?? {}) shared.note(snap.steps![name]!.result);
  }
}

/**
 * The snapshot's state with its shared values taken out, to be stored beside it by their path
 * (`execution_snapshot_value`): the execution's result and its steps' results. Without `beside`
 * the whole state goes inline.
 */
function snapshotParams(shared: SharedValues, state: StateLike, beside: boolean) {
  const values: Record<string, number> = {};
  if (!beside) return { state: JSON.stringify(state), values };
  let out = state;
  const top = shared.ref(state.result);
  if (top !== undefined) {
    values[JSON.stringify(['result'])] = top;
    out = without(out, 'result');
  }
  for (const name in state.steps ?? {}) {
    const idx = shared.ref(state.steps![name]!.result);
    if (idx === undefined) continue;
    values[JSON.stringify(['steps', name, 'result'])] = idx;
    out = { ...out, steps: { ...out.steps, [name]: without(state.steps![name]!, 'result') } };
  }
  return { state: JSON.stringify(out), values };
}

export async function writeDecision(q: Queryable, w: DecisionWrite): Promise<DecisionWritten> {
  const { atInsert, updates } = mergeCloses(w.commands, w.closes);
  const beside = w.valuesBeside ?? false;
  const x = w.execution;
  const steps = w.stepsChanged ?? x.steps;
  const snapState = w.snapshot?.state as StateLike | undefined;
  const shared = new SharedValues();
  noteAll(shared, w, steps, snapState);
  // beside: the first event holding a shared value stores it (its `value` column), the later ones name it
  const holder = new Map<number, number>();
  const events = w.events.map((e, i) => {
    const seq = w.firstSeq + i;
    let payload: JsonObject = e.payload ?? {};
    let share_path: string[] | null = null;
    let share_idx: number | null = null;
    let value_seq: number | null = null;
    // one shared value per event (one value column or jsonb_set); a second one goes inline
    for (const path of RESULT_PATHS) {
      const idx = shared.ref(at(payload, path));
      if (idx === undefined) continue;
      share_path = path as string[];
      share_idx = idx;
      value_seq = holder.get(idx) ?? null;
      if (value_seq === null) holder.set(idx, seq);
      payload = withoutPath(payload, share_path);
      break;
    }
    // absent keys are NULLs to jsonb_to_recordset: most events share nothing, and leaving the
    // three out spared a sixth of a step's write text
    const row: Record<string, unknown> = { seq, name: e.name, step: e.step ?? null, command_id: e.command_id ?? null, payload };
    if (share_path !== null) Object.assign(row, { share_path, share_idx, value_seq });
    return row;
  });
  const resultIdx = shared.ref(x.result);
  const stepShares: Record<string, number> = {};
  let sentSteps = steps;
  for (const name in steps) {
    const idx = shared.ref(steps[name]!.result);
    if (idx === undefined) continue;
    stepShares[name] = idx;
    if (sentSteps === steps) sentSteps = { ...steps };
    sentSteps[name] = without(steps[name]!, 'result');
  }
  const snap = snapState ? snapshotParams(shared, snapState, beside) : undefined;
  // a command its command_issued event carries is not sent again: the statement takes it from there
  const inEvents = new Set<unknown>();
  for (const e of w.events) if (e.name === 'command_issued') inEvents.add(e.payload?.command);
  const commands = w.commands.map((c) => ({
    command_id: c.command_id, step: c.step, cmd: inEvents.has(c) ? undefined : c, max_deliveries: c.max_deliveries,
    // relative to the decision's clock, so a skew between this host and the database cannot delay a due command
    delay_ms: Math.max(0, (c.available_at ?? w.nowMs) - w.nowMs),
    status: atInsert.get(c.command_id) ?? null,
    ...leaseOf(w.leases?.get(c.command_id)),
  }));
  const { rows } = await q.query<{ current: boolean; updated_at: Date | null; finished_at: Date | null; inserted: Array<Omit<InsertedCommand, 'execution_id'>>; cancelled: string }>({
    name: WRITE_DECISION_NAME,
    text: WRITE_DECISION_SQL,
    values: [
      w.executionId, JSON.stringify(events), JSON.stringify(commands), JSON.stringify(updates),
      x.status, x.result === null || resultIdx !== undefined ? null : JSON.stringify(x.result), x.error === null ? null : JSON.stringify(x.error),
      JSON.stringify(sentSteps), x.terminal,
      w.snapshot ? w.snapshot.seq : null, snap ? snap.state : null, w.stepsChanged !== undefined,
      shared.param(), resultIdx ?? null, JSON.stringify(stepShares), JSON.stringify(snap?.values ?? {}), beside,
      null, null, null, // the guard ($18..$20): not a speculation, unless lazy-tx.ts fills it in
      0, // queue ids to reserve ($21): lazy-tx.ts asks for them
      JSON.stringify((w.claims ?? []).map((c) => ({ ...c, lease_until: c.lease_until.toISOString() }))),
    ],
  });
  const r = rows[0];
  if (r && !r.current) throw new StaleDecision(w.executionId);
  if (!r?.updated_at) throw new Error(`execution ${w.executionId} not found while writing its decision`);
  return {
    inserted: r.inserted.map((i) => ({ ...i, execution_id: w.executionId })),
    cancelled: Number(r.cancelled),
    updated_at: r.updated_at,
    finished_at: r.finished_at,
  };
}
