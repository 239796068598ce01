/**
 * Execution retention: whole execution trees (a root and its children) whose every member ended
 * more than `days` ago are deleted, with their events, snapshots and queue rows (ON DELETE
 * CASCADE), at most `batch` trees per statement so a large backlog never holds long locks. Trees
 * are taken FOR UPDATE SKIP LOCKED: replicas sweeping at once share the work.
 */
import type { Queryable } from './sql.js';

export async function deleteExpired(q: Queryable, days: number, batch: number): Promise<number> {
  const { rows } = await q.query<{ n: string }>(
    `WITH roots AS (
       SELECT r.execution_id FROM execution r
        WHERE r.execution_id = r.root_execution_id
          AND r.status IN ('completed', 'failed', 'cancelled') AND r.finished_at < now() - make_interval(days => $1)
          AND NOT EXISTS (SELECT 1 FROM execution c WHERE c.root_execution_id = r.execution_id
                           AND (c.status NOT IN ('completed', 'failed', 'cancelled') OR c.finished_at >= now() - make_interval(days => $1)))
        ORDER BY r.execution_id LIMIT $2
        FOR UPDATE SKIP LOCKED),
     gone AS (DELETE FROM execution e USING roots WHERE e.root_execution_id = roots.execution_id RETURNING e.execution_id),
     -- variables have no foreign key (see 102_vars.sql); those a failed execution kept for a retry go with it
     dropped AS (DELETE FROM vars v USING gone WHERE v.execution_id = gone.execution_id)
     SELECT count(*)::text AS n FROM gone`, [days, batch]);
  return Number(rows[0]?.n ?? 0);
}

/** Runs deleteExpired until a batch comes back short. */
export async function sweepRetention(q: Queryable, days: number, batch = 500): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await deleteExpired(q, days, batch);
    total += n;
    if (n === 0 || n < batch) return total;
  }
}
