/**
 * SQL of the command queue. Rows are inserted, and closed by call.done or as obsolete, in the one
 * statement that writes a decision (store/decision.ts). Status machine of a row:
 *   queued → leased (claim) → done | failed (call.done recorded)
 *   (none) → leased (eager dispatch: inserted leased to the worker whose call.done issued it)
 *   leased → queued (lease expired, attempts < max_deliveries) | failed (lease expired, exhausted)
 *   queued | leased → cancelled (the execution became terminal)
 * A `playbook` command whose child execution was started stays `leased` with worker_id
 * `execution:<child id>` and lease_until `infinity` until the child's result arrives.
 *
 * A named statement that finds rows by queue_id writes its conditions on the status as
 * `(…) IS TRUE`. Written plainly, they let the partial indexes on status (queue_queued,
 * queue_open_pool) serve the statement too, and planned while those held few rows, a statement
 * took one and kept that plan on the connection: it then walked every queued row to find the ones
 * it named, 3.6 ms a claim with 20,000 queued. PostgreSQL matches a partial index only to
 * conditions it can read, so these leave the primary key alone.
 */
import type { BoundStatement } from '../pipeline.js';
import type { Command } from '../engine/contract.js';
import type { QueueStats } from '../../common/protocol.js';
import { sessionStatement } from '../db.js';
import { idLiteral, type Queryable } from './sql.js';

export type QueueStatus = 'queued' | 'leased' | 'done' | 'failed' | 'cancelled';

/** A row that will not run again: done, failed or cancelled. */
export function isClosed(status: QueueStatus): status is 'done' | 'failed' | 'cancelled' {
  return status === 'done' || status === 'failed' || status === 'cancelled';
}

export interface QueueRow {
  queue_id: string;
  execution_id: string;
  command_id: number;
  step: string;
  command: Command;
  status: QueueStatus;
  /** The worker pool that runs it ('default' unless the step or playbook names one). */
  pool: string;
  attempts: number;
  max_deliveries: number;
  available_at: Date;
  lease_until: Date | null;
  worker_id: string | null;
  /** Issued with the lease; heartbeats and call.done must present it (with worker_id). */
  lease_token: string | null;
  heartbeat_at: Date | null;
  published_at: Date | null;
  created_at: Date;
  finished_at: Date | null;
}

export interface InsertedCommand {
  queue_id: string;
  execution_id: string;
  step: string;
  command_id: number;
  pool: string;
  /** available_at <= now at insertion: publish right after commit; later ones wait for the sweeper. */
  due: boolean;
}

export async function get(q: Queryable, queueId: string): Promise<QueueRow | null> {
  const { rows } = await q.query<QueueRow>('SELECT * FROM queue WHERE queue_id = $1', [queueId]);
  return rows[0] ?? null;
}

export async function getByCommand(q: Queryable, executionId: string, commandId: number): Promise<QueueRow | null> {
  const { rows } = await q.query<QueueRow>('SELECT * FROM queue WHERE execution_id = $1 AND command_id = $2', [executionId, commandId]);
  return rows[0] ?? null;
}

/**
 * Several claims in one statement (distinct queue ids; each its own worker and lease): the rows
 * that were queued and due, leased. Rows not returned were not claimable.
 */
export async function claimMany(q: Queryable, claims: Array<{ queue_id: string; worker_id: string; lease_seconds: number; lease_token: string }>): Promise<QueueRow[]> {
  if (claims.length === 0) return [];
  const { rows } = await q.query<QueueRow>({
    name: 'playflow.claim_many',
    text: `UPDATE queue SET status = 'leased', attempts = queue.attempts + 1, worker_id = c.worker_id, lease_token = c.lease_token,
            lease_until = now() + make_interval(secs => c.lease_seconds), heartbeat_at = now()
       FROM jsonb_to_recordset($1::jsonb) AS c(queue_id bigint, worker_id text, lease_seconds double precision, lease_token text)
      WHERE queue.queue_id = c.queue_id AND (queue.status = 'queued' AND queue.available_at <= now()) IS TRUE
      RETURNING queue.*`,
    values: [JSON.stringify(claims)],
  });
  return rows;
}

/**
 * Extends a lease held by (workerId, leaseToken). A lease that ran out but was not reclaimed yet is
 * still its holder's: extending it then saves the call from running twice.
 */
export async function heartbeat(q: Queryable, queueId: string, workerId: string, leaseToken: string | null, leaseSeconds: number): Promise<Date | null> {
  const { rows } = await q.query<{ lease_until: Date }>(
    `UPDATE queue SET lease_until = now() + make_interval(secs => $3), heartbeat_at = now()
      WHERE queue_id = $1 AND status = 'leased' AND worker_id = $2 AND lease_token IS NOT DISTINCT FROM $4 RETURNING lease_until`,
    [queueId, workerId, leaseSeconds, leaseToken]);
  return rows[0]?.lease_until ?? null;
}

/**
 * `heartbeat` without a length: extends by the lease last granted (claim or heartbeat set
 * `lease_until` and `heartbeat_at` together), so it never shortens what is left; `defaultSeconds`
 * only where that is unknown, at most `maxSeconds`. A row held for a child execution (infinity)
 * stays so. Same holder rule as `heartbeat`.
 */
export async function heartbeatAsGranted(q: Queryable, queueId: string, workerId: string, leaseToken: string | null, defaultSeconds: number, maxSeconds: number): Promise<Date | null> {
  const { rows } = await q.query<{ lease_until: Date }>(
    `UPDATE queue SET lease_until = CASE WHEN NOT isfinite(lease_until) THEN lease_until
                        ELSE now() + LEAST(GREATEST(COALESCE(lease_until - heartbeat_at, make_interval(secs => $4)), interval '1 second'), make_interval(secs => $5)) END,
                      heartbeat_at = now()
      WHERE queue_id = $1 AND status = 'leased' AND worker_id = $2 AND lease_token IS NOT DISTINCT FROM $3 RETURNING lease_until`,
    [queueId, workerId, leaseToken, defaultSeconds, maxSeconds]);
  return rows[0]?.lease_until ?? null;
}

/** The holders of some queue rows (read under the execution lock to check a call.done's lease): one result per row. */
export function holdersSql(queueIds: string[]): string {
  // one statement per row: PostgreSQL keeps re-planning `= ANY($1)` (its generic plan guesses ten
  // rows and loses to a custom one), while `= $1` is planned once per connection
  return queueIds.map((id) => HOLDER_STATEMENT.execute(idLiteral(id))).join('; ');
}

/** The session statement holdersSql EXECUTEs (db.ts SessionStatement); one result per queue id. */
export const HOLDER_STATEMENT = sessionStatement('playflow_lease_holder', ['bigint'],
  'SELECT queue_id::text AS queue_id, worker_id, lease_token FROM queue WHERE queue_id = $1');

/**
 * Queue ids taken ahead for the rows of eager claims (an action_started names its queue_id before
 * the row is written; ids unused are gaps, as a rolled-back insert leaves). `count` a parameter.
 */
const reserveIds = (count: string) => `SELECT nextval(pg_get_serial_sequence('queue', 'queue_id'))::text AS id FROM generate_series(1, ${count})`;

export const RESERVE_IDS_STATEMENT = sessionStatement('playflow_reserve_queue_ids', ['integer'], reserveIds('$1'));

/** reserveIds to send with other statements in a simple query (RESERVE_IDS_STATEMENT prepared). */
export function reserveIdsSql(count: number): string {
  return RESERVE_IDS_STATEMENT.execute(String(Math.floor(count)));
}

/** reserveIds on its own, outside a transaction (nextval is not transactional). */
export async function takeIds(q: Queryable, count: number): Promise<string[]> {
  if (count <= 0) return [];
  const { rows } = await q.query<{ id: string }>({ name: 'playflow.take_queue_ids', text: reserveIds('$1::integer'), values: [count] });
  return rows.map((r) => r.id);
}

/**
 * Ends every lease of a worker id now (the worker restarted: whatever its previous process held
 * will never be reported). Returns the rows, for the caller to reclaim under their execution lock.
 */
export async function expireWorkerLeases(q: Queryable, workerId: string): Promise<Array<{ queue_id: string; execution_id: string }>> {
  const { rows } = await q.query<{ queue_id: string; execution_id: string }>(
    `UPDATE queue SET lease_until = now() - interval '1 millisecond'
      WHERE status = 'leased' AND worker_id = $1 RETURNING queue_id::text AS queue_id, execution_id::text AS execution_id`, [workerId]);
  return rows;
}

/**
 * Ends one lease now if `workerId` holds it (and, when given, under `leaseToken`): its claim's
 * answer was lost, so the worker never runs it. Returns the row, for the caller to reclaim under
 * its execution lock.
 */
export async function expireLease(q: Queryable, queueId: string, workerId: string, leaseToken: string | null = null): Promise<{ queue_id: string; execution_id: string } | undefined> {
  const { rows } = await q.query<{ queue_id: string; execution_id: string }>({
    name: 'playflow.expire_lease',
    // IS TRUE: the primary key alone finds the row (see claim_many)
    text: `UPDATE queue SET lease_until = now() - interval '1 millisecond'
      WHERE queue_id = $1 AND (status = 'leased' AND worker_id = $2 AND ($3::text IS NULL OR lease_token = $3)) IS TRUE
      RETURNING queue_id::text AS queue_id, execution_id::text AS execution_id`,
    values: [queueId, workerId, leaseToken],
  });
  return rows[0];
}

/** An execution's rows leased to a worker at insertion (eager dispatch) and never announced since. */
export async function eagerLeases(q: Queryable, executionId: string, workerId: string): Promise<Array<{ queue_id: string; lease_token: string | null }>> {
  const { rows } = await q.query<{ queue_id: string; lease_token: string | null }>({
    name: 'playflow.eager_leases',
    text: `SELECT queue_id::text AS queue_id, lease_token FROM queue
      WHERE execution_id = $1 AND status = 'leased' AND worker_id = $2 AND attempts = 1 AND published_at IS NULL`,
    values: [executionId, workerId],
  });
  return rows;
}

/** Marks an open row finished (a call.done was recorded for it). */
export async function finish(q: Queryable, executionId: string, commandId: number, status: 'done' | 'failed'): Promise<void> {
  await q.query(
    `UPDATE queue SET status = $3, finished_at = now(), lease_until = NULL
      WHERE execution_id = $1 AND command_id = $2 AND status IN ('queued', 'leased')`, [executionId, commandId, status]);
}

/** Cancels an execution's open queue rows (it ended); `id` an idLiteral (sql.ts). */
export const cancelOpenSql = (id: string) => `UPDATE queue SET status = 'cancelled', finished_at = now(), lease_until = NULL
      WHERE execution_id = ${id} AND status IN ('queued', 'leased')`;

/** cancelOpenSql prepared once per connection: an end sent with its COMMIT EXECUTEs it. */
export const CANCEL_OPEN_STATEMENT = sessionStatement('playflow_cancel_open', ['bigint'], cancelOpenSql('$1'));

/** cancelOpenSql bound, for an end pipelined with its write (server/pipeline.ts). */
export const cancelOpenBound = (executionId: string): BoundStatement => ({ name: 'playflow.cancel_open', text: cancelOpenSql('$1::bigint'), values: [executionId] });

/** The row of a `playbook` command is held by its child execution until the child ends. */
export async function holdForChild(q: Queryable, held: Pick<QueueRow, 'queue_id' | 'worker_id' | 'lease_token'>, childExecutionId: string): Promise<boolean> {
  // only a leased row, still leased to the holder the caller checked (the worker that started the
  // child, or an execution holding it); a row re-leased or finished since is not taken over
  const { rowCount } = await q.query(
    `UPDATE queue SET worker_id = $2, lease_until = 'infinity', heartbeat_at = now()
      WHERE queue_id = $1 AND status = 'leased' AND worker_id = $3 AND lease_token IS NOT DISTINCT FROM $4`,
    [held.queue_id, `execution:${childExecutionId}`, held.worker_id, held.lease_token]);
  return (rowCount ?? 0) > 0;
}

/** Back to queued after an expired lease (the caller holds the execution lock and re-checked). */
export async function requeue(q: Queryable, queueId: string): Promise<void> {
  await q.query(
    `UPDATE queue SET status = 'queued', worker_id = NULL, lease_token = NULL, lease_until = NULL, published_at = NULL, available_at = now()
      WHERE queue_id = $1`, [queueId]);
}

/**
 * Records that the rows' notifications went out. A row another transaction holds right now (a
 * claim, a close) is skipped rather than waited for: waiting on rows locked in another order
 * deadlocked with group commits (each side then stalls for deadlock_timeout), and such a row is
 * no longer queued or, if it still is, is published again by the sweeper (harmless).
 */
export async function markPublished(q: Queryable, queueIds: string[]): Promise<void> {
  if (queueIds.length === 0) return;
  await q.query({ name: 'playflow.mark_published', text: `UPDATE queue SET published_at = now() WHERE queue_id IN (
      SELECT queue_id FROM queue WHERE queue_id = ANY($1::bigint[]) AND (status = 'queued') IS TRUE FOR UPDATE SKIP LOCKED)`, values: [queueIds] });
}

/** Leased rows whose lease ended (candidates; re-checked under the execution lock). */
export async function expiredLeases(q: Queryable, limit: number): Promise<Array<{ queue_id: string; execution_id: string }>> {
  const { rows } = await q.query<{ queue_id: string; execution_id: string }>(
    `SELECT queue_id, execution_id FROM queue WHERE status = 'leased' AND lease_until < now()
      ORDER BY lease_until LIMIT $1`, [limit]);
  return rows;
}

/**
 * Depth for autoscaling: `queued` due and waiting, `leased` held by workers (rows held by a child
 * execution use no worker and are not counted), `delayed` not due yet.
 */
/**
 * Rows that finished in each of the last `minutes` whole minutes (the current one included),
 * oldest first; minutes without any are zeros. Finished rows are those a worker's outcome closed
 * (done) or that failed for good.
 */
export async function throughput(q: Queryable, minutes: number): Promise<Array<{ minute: string; done: number; failed: number }>> {
  const { rows } = await q.query<{ minute: Date; done: string; failed: string }>(
    `SELECT m.minute,
            count(q.queue_id) FILTER (WHERE q.status = 'done') AS done,
            count(q.queue_id) FILTER (WHERE q.status = 'failed') AS failed
       FROM generate_series(date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute',
                            date_trunc('minute', now()), interval '1 minute') AS m(minute)
       LEFT JOIN queue q
         ON q.finished_at >= m.minute AND q.finished_at < m.minute + interval '1 minute'
        AND q.status IN ('done', 'failed')
      GROUP BY m.minute ORDER BY m.minute`, [minutes]);
  return rows.map((r) => ({ minute: r.minute.toISOString(), done: Number(r.done), failed: Number(r.failed) }));
}

/** Pools with queued, due rows published longer ago than `seconds` (candidates for republishing). */
export async function stalePools(q: Queryable, seconds: number): Promise<string[]> {
  const { rows } = await q.query<{ pool: string }>(
    `SELECT DISTINCT pool FROM queue
      WHERE status = 'queued' AND available_at <= now() AND published_at < now() - make_interval(secs => $1)`, [seconds]);
  return rows.map((r) => r.pool);
}

/** Depth of the open queue, of every pool or of one (the WorkerPool controller reads its pool's). */
export async function stats(q: Queryable, pool?: string): Promise<QueueStats> {
  const { rows } = await q.query<{ queued: string; leased: string; delayed: string; oldest: number | null }>(
    `SELECT count(*) FILTER (WHERE status = 'queued' AND available_at <= now()) AS queued,
            count(*) FILTER (WHERE status = 'leased' AND worker_id NOT LIKE 'execution:%') AS leased,
            count(*) FILTER (WHERE status = 'queued' AND available_at > now()) AS delayed,
            EXTRACT(EPOCH FROM now() - min(available_at) FILTER (WHERE status = 'queued' AND available_at <= now()))::float8 AS oldest
       FROM queue WHERE status IN ('queued', 'leased') AND ($1::text IS NULL OR pool = $1)`, [pool ?? null]);
  const r = rows[0];
  return { queued: Number(r.queued), leased: Number(r.leased), delayed: Number(r.delayed), oldest_age_seconds: Math.max(0, Math.round((r.oldest ?? 0) * 1000) / 1000) };
}
