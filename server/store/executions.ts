/** SQL of the execution table. */
import type { BoundStatement } from '../pipeline.js';
import type { Json, JsonObject } from '../../playbook/types.js';
import type { ExecutionStatus, StepSummary } from '../engine/contract.js';
import type { ExecutionListItem, ExecutionRecord } from '../services.js';
import { idLiteral, iso, sqlLiterals, type Queryable } from './sql.js';
import { sessionStatement, type SessionSql } from '../db.js';

export interface ExecutionRow {
  execution_id: string;
  catalog_id: string;
  path: string;
  version: number;
  parent_execution_id: string | null;
  parent_command_id: number | null;
  parent_queue_id: string | null;
  root_execution_id: string;
  status: ExecutionStatus;
  payload: JsonObject;
  result: Json | null;
  error: Json | null;
  /** From `execution_step` (migration 260), aggregated by the reads below; absent after insert. */
  steps: Record<string, StepSummary>;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  retries: number;
  rerun_of: string | null;
  schedule_id: string | null;
  schedule_tick: Date | null;
  hook_id?: string | null;
  /** Held by a concurrency limit (migration 224). */
  waiting?: boolean;
  /** A failed child its parent's retry takes along (see markChildrenForRetry). */
  retry_with_parent: boolean;
}

/** What started an execution besides a plain run request. */
export interface ExecutionOrigin {
  rerun_of?: string | null;
  schedule_id?: string | null;
  schedule_tick?: Date | null;
  /** The webhook trigger whose delivery started it (migration 225). */
  hook_id?: string | null;
}

/** The API's list item of a summary row (list with `summary`): the record without payload, result and steps. */
export function toSummary(r: ExecutionRow): ExecutionListItem {
  const { payload: _p, result: _r, steps: _s, ...rest } = toRecord(r);
  return rest;
}

export function toRecord(r: ExecutionRow): ExecutionRecord {
  return {
    execution_id: r.execution_id,
    path: r.path,
    version: r.version,
    catalog_id: r.catalog_id,
    parent_execution_id: r.parent_execution_id,
    root_execution_id: r.root_execution_id,
    status: r.status,
    payload: r.payload,
    result: r.result,
    error: r.error,
    steps: r.steps ?? {},
    created_at: iso(r.created_at)!,
    updated_at: iso(r.updated_at)!,
    finished_at: iso(r.finished_at),
    retries: r.retries ?? 0,
    rerun_of: r.rerun_of ?? null,
    schedule_id: r.schedule_id ?? null,
    schedule_tick: iso(r.schedule_tick ?? null),
    waiting: r.waiting ?? false,
    hook_id: r.hook_id ?? null,
  };
}

/**
 * The step summaries of execution `alias` as the one `{step: summary}` object the API returns
 * (jsonb orders keys as the former `execution.steps` column did). Selected as `steps_now` and moved
 * to `steps` by `current()`: the row's own `steps` column is what servers of the previous version
 * write during a rolling upgrade, never read here.
 */
type RowWithSteps = ExecutionRow & { steps_now?: Record<string, StepSummary>; steps_results?: Record<string, Json> | null };

function current<R extends RowWithSteps | undefined>(r: R): R {
  if (r) {
    r.steps = r.steps_now ?? {};
    // results stored beside their summaries (migration 280) go back in
    for (const step in r.steps_results ?? {}) if (r.steps[step]) r.steps[step].result = r.steps_results![step]!;
    delete r.steps_now;
    delete r.steps_results;
  }
  return r;
}

/**
 * json_object_agg, not jsonb_object_agg: PostgreSQL 15's jsonb aggregate rebuilds each value
 * through its text form, 11 s for one 30 MB step result against 1 s here; node-postgres parses
 * both types alike. The ORDER BY keeps the key order jsonb gave (shorter keys first, then bytes).
 */
function stepsOf(alias: string): string {
  return `COALESCE((SELECT json_object_agg(s.step, s.summary ORDER BY length(s.step), s.step COLLATE "C") FROM execution_step s WHERE s.execution_id = ${alias}.execution_id), '{}'::json) AS steps_now,
          (SELECT json_object_agg(s.step, s.result_value) FROM execution_step s WHERE s.execution_id = ${alias}.execution_id AND s.result_value IS NOT NULL) AS steps_results`;
}

/**
 * The execution row; `steps: false` leaves the summaries out (`steps` is then `{}`): the decision
 * path takes them from the folded state, which they equal, instead of aggregating every row.
 */
export async function get(q: Queryable, executionId: string, opts: { steps?: boolean } = {}): Promise<ExecutionRow | null> {
  // named: a poll or a waiter's read runs it many times a second, and PostgreSQL plans it once per connection
  const { rows } = await q.query<RowWithSteps>(opts.steps === false
    ? { name: 'playflow.execution_outcome', text: `SELECT e.*, '{}'::jsonb AS steps_now FROM execution e WHERE e.execution_id = $1`, values: [executionId] }
    : { name: 'playflow.execution_get', text: `SELECT e.*, ${stepsOf('e')} FROM execution e WHERE e.execution_id = $1`, values: [executionId] });
  return current(rows[0]) ?? null;
}

/**
 * The execution row without its step summaries (`steps` is `{}`) and the log's last seq: for a
 * reader that holds the state as of that seq and takes the summaries from it (service.get).
 */
export async function getWithLastSeq(q: Queryable, executionId: string): Promise<(ExecutionRow & { last_seq: number | null }) | null> {
  const { rows } = await q.query<RowWithSteps & { last_seq: number | null }>({
    name: 'playflow.execution_with_last_seq',
    text: `SELECT e.*, '{}'::jsonb AS steps_now, (SELECT max(seq) FROM event WHERE execution_id = e.execution_id) AS last_seq
       FROM execution e WHERE e.execution_id = $1`,
    values: [executionId],
  });
  return current(rows[0]) ?? null;
}

/** Code points of a step name: PostgreSQL's length() and its "C" (UTF-8 byte) order. */
function codePoints(s: string): number[] {
  const out: number[] = [];
  for (const ch of s) out.push(ch.codePointAt(0)!);
  return out;
}

/** `keys` sorted by code points (shorter first, then by each), each name split once. */
function sortByCodePoints(keys: string[]): string[] {
  const cp = new Map(keys.map((k) => [k, codePoints(k)]));
  return keys.sort((a, b) => {
    const x = cp.get(a)!;
    const y = cp.get(b)!;
    if (x.length !== y.length) return x.length - y.length;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
    return 0;
  });
}

const SURROGATE = /[\uD800-\uDFFF]/;

/** The execution's lock, held until the transaction ends by every mutation of an execution. */
export async function lockExecution(q: Queryable, executionId: string): Promise<void> {
  await q.query('SELECT pg_advisory_xact_lock($1::bigint)', [executionId]);
}

/**
 * An execution's status, read under its lock: until the caller's transaction ends no terminal
 * transition, and so no cleanup of its variables and keychain entries, can commit in between.
 * null: no such row.
 */
export async function lockedStatus(q: Queryable, executionId: string): Promise<ExecutionStatus | null> {
  await lockExecution(q, executionId);
  // a statement of its own: its snapshot is taken after the lock, so it sees the last holder's commit
  const { rows } = await q.query<{ status: ExecutionStatus }>('SELECT status FROM execution WHERE execution_id = $1', [executionId]);
  return rows[0]?.status ?? null;
}

/**
 * The record of a row whose summaries come from an engine state (`steps`, by default the row's):
 * a copy keyed as GET /api/execution/{id} gives them, since the next decision changes the state's
 * map in place.
 */
export function toOrderedRecord(r: ExecutionRow, steps: Record<string, StepSummary> = r.steps ?? {}): ExecutionRecord {
  return toRecord({ ...r, steps: orderedSteps(steps) });
}

/** Step summaries keyed in the order `stepsOf` aggregates them (shorter names first, then bytes). */
export function orderedSteps(steps: Record<string, StepSummary>): Record<string, StepSummary> {
  const keys = Object.keys(steps);
  // Without surrogate pairs a string's UTF-16 units are its code points, so length and < already
  // are PostgreSQL's: no arrays to build (a status read of 40 steps spent 21 µs building them).
  if (keys.some((k) => SURROGATE.test(k))) sortByCodePoints(keys);
  else keys.sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  const out: Record<string, StepSummary> = {};
  for (const k of keys) out[k] = steps[k]!;
  return out;
}

/** A new execution id (nextval is not transactional: an id never used is a gap, nothing else). */
const NEXT_EXECUTION_ID = "nextval(pg_get_serial_sequence('execution', 'execution_id'))";

export async function insert(q: Queryable, e: {
  catalog_id: string; path: string; version: number; payload: JsonObject;
  parent_execution_id: string | null; parent_command_id: number | null; parent_queue_id: string | null; root_execution_id: string | null;
  idempotency_key?: string | null;
} & ExecutionOrigin): Promise<ExecutionRow> {
  const { rows } = await q.query<ExecutionRow>(
    `WITH id AS (SELECT ${NEXT_EXECUTION_ID} AS v)
     INSERT INTO execution (execution_id, catalog_id, path, version, payload, parent_execution_id, parent_command_id, parent_queue_id, root_execution_id,
                            rerun_of, schedule_id, schedule_tick, idempotency_key, hook_id)
     SELECT id.v, $1, $2, $3, $4, $5, $6, $7, COALESCE($8::bigint, id.v), $9, $10, $11, $12, $13 FROM id
     RETURNING *`,
    [e.catalog_id, e.path, e.version, JSON.stringify(e.payload), e.parent_execution_id, e.parent_command_id, e.parent_queue_id, e.root_execution_id,
      e.rerun_of ?? null, e.schedule_id ?? null, e.schedule_tick ?? null, e.idempotency_key ?? null, e.hook_id ?? null]);
  return rows[0];
}

/**
 * The insert of a top-level execution of the catalog row `catalogRow` selects (none: no insert,
 * and `newId` is not evaluated), under the id `newId`, taking the new execution's lock. $3 is the
 * payload, $4..$8 what started it and its Idempotency-Key; both forms below fill them alike.
 */
function insertTopLevelSql(catalogRow: string, newId: string): string {
  return `WITH c AS (${catalogRow}
  ), id AS (SELECT ${newId} AS v FROM c
  ), ins AS (
    INSERT INTO execution (execution_id, catalog_id, path, version, payload, root_execution_id, rerun_of, schedule_id, schedule_tick, idempotency_key, hook_id)
    SELECT id.v, c.catalog_id, c.path, c.version, $3::jsonb, id.v, $4::bigint, $5::bigint, $6::timestamptz, $7::text, $8::bigint
      FROM c, id
    RETURNING *
  )
  SELECT ins.* FROM ins, LATERAL (SELECT pg_advisory_xact_lock(ins.execution_id)) AS locked`;
}

/**
 * The insert of a top-level execution of the live catalog row at $1 (its latest version, or the
 * version $2), taking the new execution's lock. No row: no such playbook (no id taken).
 */
function insertLiveStatementSql(byVersion: boolean): string {
  return insertTopLevelSql(
    `SELECT catalog_id, path, version FROM catalog WHERE path = $1 AND deleted_at IS NULL${byVersion ? ' AND version = $2' : ''} ORDER BY version DESC LIMIT 1`,
    NEXT_EXECUTION_ID);
}

/**
 * Prepared once per connection: sent with BEGIN by the simple query protocol, the statement was
 * planned on every start (0.14 ms of PostgreSQL's time per start, pg_stat_statements). Two, so
 * that the latest-version start keeps its plan (the index's first row) whatever a generic plan of
 * "this version or any" would do.
 */
const INSERT_LIVE_TYPES = ['text', 'integer', 'jsonb', 'bigint', 'bigint', 'timestamptz', 'text', 'bigint'];
const INSERT_LIVE_LATEST = sessionStatement('playflow_insert_live', INSERT_LIVE_TYPES, insertLiveStatementSql(false));
const INSERT_LIVE_VERSION = sessionStatement('playflow_insert_live_version', INSERT_LIVE_TYPES, insertLiveStatementSql(true));

/**
 * The insert of a top-level execution as an EXECUTE with its values inlined, to send with BEGIN in
 * one round trip (db.ts TxOptions.begin, which PREPAREs it first where the connection lacks it).
 * Null when the values are too large to inline (sqlLiterals).
 */
export function insertLiveSql(e: { path: string; version?: number; payload: JsonObject; idempotency_key?: string | null } & ExecutionOrigin): SessionSql | null {
  const lits = sqlLiterals([e.path, e.version === undefined ? undefined : Math.trunc(e.version), JSON.stringify(e.payload),
    e.rerun_of, e.schedule_id, e.schedule_tick, e.idempotency_key, e.hook_id]);
  if (!lits) return null;
  const statement = e.version === undefined ? INSERT_LIVE_LATEST : INSERT_LIVE_VERSION;
  return { sql: statement.execute(...lits), prepare: [statement] };
}

/**
 * The insert of a top-level execution under an id taken ahead (`takeExecutionIds`, or the
 * `nextExecutionIdBound` of an earlier start), of the catalog row an earlier start found live at its
 * path, taking the new execution's lock. No row when that catalog row is no longer what the
 * request would pick: deleted, or (`latest`) a newer version registered since. The write of a
 * pipelined start (executions/starts.ts startAhead) goes with it, and finds no execution then.
 */
const INSERT_AT_SQL = insertTopLevelSql(
  `SELECT k.catalog_id, k.path, k.version FROM catalog k
    WHERE k.catalog_id = $2::bigint AND k.deleted_at IS NULL
      AND NOT ($9::boolean AND EXISTS (SELECT 1 FROM catalog n WHERE n.path = k.path AND n.deleted_at IS NULL AND n.version > k.version))`,
  '$1::bigint');

export function insertAtBound(e: { execution_id: string; catalog_id: string; latest: boolean; payload: JsonObject; idempotency_key?: string | null } & ExecutionOrigin): BoundStatement {
  return {
    name: 'playflow.insert_at', text: INSERT_AT_SQL,
    values: [e.execution_id, e.catalog_id, JSON.stringify(e.payload), e.rerun_of ?? null, e.schedule_id ?? null, e.schedule_tick ?? null,
      e.idempotency_key ?? null, e.hook_id ?? null, e.latest],
  };
}

/** In a start's pipeline, after its insert: the id of a later start, taken only if the insert was made. */
export const nextExecutionIdBound = (executionId: string): BoundStatement => ({
  name: 'playflow.next_execution_id', text: `SELECT ${NEXT_EXECUTION_ID}::text AS id FROM execution WHERE execution_id = $1::bigint`, values: [executionId],
});

/** Execution ids for starts to come. */
export async function takeExecutionIds(q: Queryable, count: number): Promise<string[]> {
  const { rows } = await q.query<{ id: string }>({ name: 'playflow.take_execution_ids', text: `SELECT ${NEXT_EXECUTION_ID}::text AS id FROM generate_series(1, $1::integer)`, values: [count] });
  return rows.map((r) => r.id);
}

/** The execution a run request with this Idempotency-Key created, if any. */
export async function findByIdempotencyKey(q: Queryable, key: string): Promise<ExecutionRow | null> {
  const { rows } = await q.query<RowWithSteps>(`SELECT e.*, ${stepsOf('e')} FROM execution e WHERE e.idempotency_key = $1`, [key]);
  return current(rows[0]) ?? null;
}

export async function findChild(q: Queryable, parentExecutionId: string, parentCommandId: number): Promise<ExecutionRow | null> {
  const { rows } = await q.query<RowWithSteps>(
    `SELECT e.*, ${stepsOf('e')} FROM execution e WHERE e.parent_execution_id = $1 AND e.parent_command_id = $2`, [parentExecutionId, parentCommandId]);
  return current(rows[0]) ?? null;
}

/** What a summary list reads: every column toRecord uses but payload and result (large, TOASTed). */
const SUMMARY_COLUMNS = `execution_id, path, version, catalog_id, parent_execution_id, root_execution_id, status, error,
  created_at, updated_at, finished_at, retries, rerun_of, schedule_id, schedule_tick, waiting, hook_id`;

/** A page of executions, newest first; `summary`: without payload, result and the step summaries. */
export async function list(
  q: Queryable,
  opts: { status?: ExecutionStatus; path?: string; parent?: string; limit: number; offset: number; summary?: boolean },
): Promise<ExecutionRow[]> {
  const params: unknown[] = [opts.limit, opts.offset];
  const where: string[] = [];
  if (opts.status) {
    params.push(opts.status);
    where.push(`status = $${params.length}`);
  }
  if (opts.path) {
    params.push(opts.path);
    where.push(`path = $${params.length}`);
  }
  if (opts.parent) {
    params.push(opts.parent);
    where.push(`parent_execution_id = $${params.length}`);
  }
  const page = `FROM execution ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY execution_id DESC LIMIT $1 OFFSET $2`;
  if (opts.summary) return (await q.query<ExecutionRow>(`SELECT ${SUMMARY_COLUMNS} ${page}`, params)).rows;
  // the summaries are aggregated for the page only, after LIMIT
  const { rows } = await q.query<RowWithSteps>(
    `SELECT e.*, ${stepsOf('e')} FROM (SELECT * ${page}) e ORDER BY e.execution_id DESC`, params);
  return rows.map(current);
}

/** Non-terminal children of terminal parents (a parent's end cancels what it no longer waits for). */
export async function orphanedChildren(q: Queryable, limit: number): Promise<string[]> {
  const { rows } = await q.query<{ execution_id: string }>(
    `SELECT c.execution_id FROM execution c JOIN execution p ON p.execution_id = c.parent_execution_id
      WHERE c.status IN ('started', 'running') AND p.status IN ('completed', 'failed', 'cancelled')
      ORDER BY c.execution_id LIMIT $1`, [limit]);
  return rows.map((r) => r.execution_id);
}

/**
 * The children of an execution still running, rows `{execution_id}`, in id order; `id` an
 * idLiteral (sql.ts). `e.execution_id` orders by the bigint: a bare name is the text output
 * column, where '100' sorts before '99'.
 */
export const openChildrenSql = (id: string) =>
  `SELECT e.execution_id::text AS execution_id FROM execution e WHERE e.parent_execution_id = ${id} AND e.status IN ('started', 'running') ORDER BY e.execution_id`;

/** openChildrenSql prepared once per connection: an end sent with its COMMIT EXECUTEs it. */
export const OPEN_CHILDREN_STATEMENT = sessionStatement('playflow_open_children', ['bigint'], openChildrenSql('$1'));

/** openChildrenSql bound, for an end pipelined with its write (server/pipeline.ts). */
export const openChildrenBound = (executionId: string): BoundStatement => ({ name: 'playflow.open_children', text: openChildrenSql('$1::bigint'), values: [executionId] });

/**
 * A parent is retried: its failed or cancelled children started by the steps that run again are
 * marked, so the re-issued playbook command of the same step and loop item resumes the child in
 * place (findChildToRetry) instead of starting a new one.
 */
export async function markChildrenForRetry(q: Queryable, parentExecutionId: string, steps: string[]): Promise<void> {
  if (steps.length === 0) return;
  await q.query(
    `UPDATE execution c SET retry_with_parent = true
       FROM queue q
      WHERE c.parent_execution_id = $1 AND c.status IN ('failed', 'cancelled')
        AND q.execution_id = c.parent_execution_id AND q.command_id = c.parent_command_id AND q.step = ANY($2::text[])`,
    [parentExecutionId, steps]);
}

/** The newest marked child of this parent for the same step and loop item (iteration). */
export async function findChildToRetry(q: Queryable, parentExecutionId: string, step: string, iteration: number | null): Promise<ExecutionRow | null> {
  const { rows } = await q.query<RowWithSteps>(
    `SELECT c.*, ${stepsOf('c')} FROM execution c
       JOIN queue q ON q.execution_id = c.parent_execution_id AND q.command_id = c.parent_command_id
      WHERE c.parent_execution_id = $1 AND c.retry_with_parent AND q.step = $2
        AND (q.command->'iteration') IS NOT DISTINCT FROM $3::jsonb
      ORDER BY c.execution_id DESC LIMIT 1`,
    [parentExecutionId, step, iteration === null ? null : JSON.stringify(iteration)]);
  return current(rows[0]) ?? null;
}

/** A resumed child now answers the parent's new command. */
export async function relinkChild(q: Queryable, childExecutionId: string, parentCommandId: number, parentQueueId: string): Promise<void> {
  await q.query(
    'UPDATE execution SET parent_command_id = $2, parent_queue_id = $3 WHERE execution_id = $1',
    [childExecutionId, parentCommandId, parentQueueId]);
}

/**
 * Channel of the NOTIFY sent by the transaction that makes an execution terminal (payload: its
 * id). PostgreSQL delivers it only when that transaction commits, to every listening session, so
 * a waiter on any replica wakes for exactly the commit that ended the execution.
 */
export const EXECUTION_ENDED_CHANNEL = 'playflow_execution_ended';

/** The NOTIFY that an execution ended, as a statement without parameters (the id checked and inlined). */
export const notifyEndedSql = (executionId: string) => `SELECT pg_notify('${EXECUTION_ENDED_CHANNEL}', ${idLiteral(executionId)}::text)`;

/** notifyEndedSql bound. */
export const notifyEndedBound = (executionId: string): BoundStatement => ({ name: 'playflow.notify_ended', text: `SELECT pg_notify('${EXECUTION_ENDED_CHANNEL}', $1::bigint::text)`, values: [executionId] });
