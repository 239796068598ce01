/** SQL of the event log and its snapshot cache. */
import type { Json, JsonObject } from '../../playbook/types.js';
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
  /** Where a value stored beside the payload belongs in it (migration 280). */
  value_path: string[] | null;
  /** The value, on the first event of a write that held it. */
  value: Json | null;
  /** The event holding the value, on the later ones. */
  value_seq: number | null;
}

/** An own property, whatever the key (a step may be named `__proto__`). */
function setOwn(o: JsonObject, key: string, value: Json): void {
  Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}

/** `payload` with `value` put back at `path` (the payload was stored without it). */
export function placed(payload: JsonObject, path: string[], value: Json): JsonObject {
  let at = payload;
  for (const key of path.slice(0, -1)) {
    const next = Object.hasOwn(at, key) ? at[key] : undefined;
    if (typeof next === 'object' && next !== null && !Array.isArray(next)) at = next;
    else {
      const fresh: JsonObject = {};
      setOwn(at, key, fresh);
      at = fresh;
    }
  }
  setOwn(at, path[path.length - 1]!, value);
  return payload;
}

/**
 * The rows as the log reads: each value stored beside a payload put back in it. A value held by an
 * event outside these rows (an earlier page) is read by its seq, in one query.
 */
async function toStored(q: Queryable, executionId: string, rows: EventRow[]): Promise<StoredEvent[]> {
  const held = new Map<number, Json>();
  for (const r of rows) if (r.value_path && r.value_seq === null) held.set(r.seq, r.value);
  const missing = [...new Set(rows.flatMap((r) => (r.value_seq !== null && !held.has(r.value_seq) ? [r.value_seq] : [])))];
  if (missing.length) {
    const found = await q.query<{ seq: number; value: Json }>(
      'SELECT seq, value FROM event WHERE execution_id = $1 AND seq = ANY($2::integer[])', [executionId, missing]);
    for (const r of found.rows) held.set(r.seq, r.value);
  }
  return rows.map(({ value_path, value: _value, value_seq, ...r }) => ({
    ...r,
    payload: value_path ? placed(r.payload, value_path, held.get(value_seq ?? r.seq) ?? null) : r.payload,
    created_at: iso(r.created_at)!,
  }));
}

export function toEngineEvent(e: Pick<StoredEvent, 'name' | 'step' | 'command_id' | 'payload'>): EngineEvent {
  const out: EngineEvent = { name: e.name, step: e.step, payload: e.payload ?? {} };
  if (e.command_id !== null && e.command_id !== undefined) out.command_id = e.command_id;
  return out;
}

export async function lastSeq(q: Queryable, executionId: string): Promise<number> {
  const { rows } = await q.query<{ s: number | null }>('SELECT max(seq) AS s FROM event WHERE execution_id = $1', [executionId]);
  return rows[0]?.s ?? 0;
}

/**
 * A page read with one row more than `limit` (list or listWhere with `limit + 1`): its first
 * `limit` rows, and the seq to continue after, null when nothing selected follows the page.
 */
export function toPage(rows: StoredEvent[], limit: number): { events: StoredEvent[]; next_after: number | null } {
  const more = rows.length > limit;
  if (more) rows.length = limit;
  return { events: rows, next_after: more ? rows[rows.length - 1].seq : null };
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
  return toStored(q, executionId, rows);
}

/**
 * One page of an execution's log narrowed to a step and/or an event name (the console's step
 * panel and vars tab): the (execution_id, seq) index walks the execution in order, the filter
 * drops the rest, so a page costs at most one pass over that execution's rows.
 */
export async function listWhere(q: Queryable, executionId: string, f: { after: number; limit: number; step?: string; name?: string }): Promise<StoredEvent[]> {
  const { rows } = await q.query<EventRow>(
    `SELECT * FROM event WHERE execution_id = $1 AND seq > $2
        AND ($3::text IS NULL OR step = $3) AND ($4::text IS NULL OR name = $4)
      ORDER BY seq LIMIT $5`,
    [executionId, f.after, f.step ?? null, f.name ?? null, f.limit]);
  return toStored(q, executionId, rows);
}

export async function loadSnapshot<S>(q: Queryable, executionId: string): Promise<{ seq: number; state: S } | null> {
  // execution_state: written by an older version (flat loop lists), still read; the newer wins,
  // and at the same seq the current layout (its values beside it are read only for that one)
  const { rows } = await q.query<{ seq: number; state: S; current: boolean }>(
    `SELECT seq, state, true AS current FROM execution_snapshot WHERE execution_id = $1
     UNION ALL SELECT seq, state, false FROM execution_state WHERE execution_id = $1
     ORDER BY seq DESC, current DESC LIMIT 1`, [executionId]);
  const snap = rows[0];
  if (!snap) return null;
  if (snap.current) {
    // the values stored beside it (migration 280) go back in, by their path in the state
    const values = await q.query<{ path: string; value: Json }>('SELECT path, value FROM execution_snapshot_value WHERE execution_id = $1', [executionId]);
    for (const v of values.rows) placed(snap.state as JsonObject, JSON.parse(v.path) as string[], v.value);
  }
  return { seq: snap.seq, state: snap.state };
}

export async function dropSnapshot(q: Queryable, executionId?: string): Promise<void> {
  for (const table of ['execution_snapshot', 'execution_snapshot_value', 'execution_state']) {
    if (executionId === undefined) await q.query(`DELETE FROM ${table}`);
    else await q.query(`DELETE FROM ${table} WHERE execution_id = $1`, [executionId]);
  }
}

/** Per-step counts of an execution's log (GET /api/execution/{id}/steps): one aggregate, no payloads. */
export interface StepCounts {
  step: string;
  /** Commands issued, claimed, answered (call.done), answered with an error. */
  calls: number;
  started: number;
  done: number;
  errors: number;
  /** Items of the latest entry's loop and those finished since; null without a loop. */
  loop_total: number | null;
  loop_done: number;
}

export async function stepCounts(q: Queryable, executionId: string): Promise<StepCounts[]> {
  const { rows } = await q.query<{ step: string; calls: string; started: string; done: string; errors: string; loop_total: number | null; loop_done: string }>(
    `WITH entered AS (
       SELECT DISTINCT ON (step) step, seq,
              CASE WHEN jsonb_typeof(payload->'loop'->'items') = 'array' THEN jsonb_array_length(payload->'loop'->'items') END AS items
         FROM event WHERE execution_id = $1 AND name = 'step.enter' ORDER BY step, seq DESC)
     SELECT e.step,
            count(*) FILTER (WHERE e.name = 'command_issued') AS calls,
            count(*) FILTER (WHERE e.name = 'action_started') AS started,
            count(*) FILTER (WHERE e.name = 'call.done') AS done,
            count(*) FILTER (WHERE e.name = 'call.done' AND coalesce(e.payload->'error', 'null') <> 'null') AS errors,
            max(en.items) AS loop_total,
            count(*) FILTER (WHERE e.name = 'action_completed' AND e.seq > en.seq
                               AND coalesce(e.payload->'effects'->'done'->'item', 'null') <> 'null') AS loop_done
       FROM event e LEFT JOIN entered en ON en.step = e.step
      WHERE e.execution_id = $1 AND e.step IS NOT NULL
      GROUP BY e.step ORDER BY e.step`, [executionId]);
  return rows.map((r) => ({
    step: r.step, calls: Number(r.calls), started: Number(r.started), done: Number(r.done), errors: Number(r.errors),
    loop_total: r.loop_total === null ? null : Number(r.loop_total), loop_done: Number(r.loop_done),
  }));
}
