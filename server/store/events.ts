/** SQL of the event log and its snapshot cache. */
import type { JsonObject } from '../../playbook/types.js';
import type { EngineEvent } from '../engine/contract.js';
import type { StoredEvent } from '../services.js';
import { iso, type Queryable } from './sql.js';

interface EventRow {
  event_id: string;
  execution_id: string;
  seq: number;
  name: string;
  step: string | null;
  command_id: number | null;
  payload: JsonObject;
  created_at: Date;
}

const toStored = (r: EventRow): StoredEvent => ({ ...r, created_at: iso(r.created_at)! });

export function toEngineEvent(e: Pick<StoredEvent, 'name' | 'step' | 'command_id' | 'payload'>): EngineEvent {
  const out: EngineEvent = { name: e.name, step: e.step, payload: e.payload ?? {} };
  if (e.command_id !== null && e.command_id !== undefined) out.command_id = e.command_id;
  return out;
}

export async function lastSeq(q: Queryable, executionId: string): Promise<number> {
  const { rows } = await q.query<{ s: number | null }>('SELECT max(seq) AS s FROM event WHERE execution_id = $1', [executionId]);
  return rows[0]?.s ?? 0;
}

/** Events with seq > after, in order. */
export async function list(q: Queryable, executionId: string, after = 0, limit?: number): Promise<StoredEvent[]> {
  const params: unknown[] = [executionId, after];
  let sql = 'SELECT * FROM event WHERE execution_id = $1 AND seq > $2 ORDER BY seq';
  if (limit !== undefined) {
    params.push(limit);
    sql += ' LIMIT $3';
  }
  const { rows } = await q.query<EventRow>(sql, params);
  return rows.map(toStored);
}

export async function loadSnapshot<S>(q: Queryable, executionId: string): Promise<{ seq: number; state: S } | null> {
  const { rows } = await q.query<{ seq: number; state: S }>('SELECT seq, state FROM execution_state WHERE execution_id = $1', [executionId]);
  return rows[0] ?? null;
}

export async function dropSnapshot(q: Queryable, executionId?: string): Promise<void> {
  if (executionId === undefined) await q.query('DELETE FROM execution_state');
  else await q.query('DELETE FROM execution_state WHERE execution_id = $1', [executionId]);
}
