/**
 * Queue ids for the eager claims of a speculative decision (service.ts speculate), taken when the
 * previous speculation of the execution left none (see CachedState.queueIds): an action_started
 * names its queue_id before the row is written, and such a decision reads nothing before it
 * writes. Unused ids are gaps, as a rolled-back insert leaves.
 */
import type pg from 'pg';

export async function takeQueueIds(pool: pg.Pool, n: number): Promise<string[]> {
  if (n <= 0) return [];
  const { rows } = await pool.query<{ id: string }>({
    name: 'playflow.take_queue_ids',
    text: `SELECT nextval(pg_get_serial_sequence('queue', 'queue_id'))::text AS id FROM generate_series(1, $1::integer)`,
    values: [n],
  });
  return rows.map((r) => r.id);
}
