/** SQL of schedules and their ticks (migration 222). */
import type { ScheduleSource, ScheduleTickView, ScheduleView } from '../../common/protocol.js';
import { iso, type Queryable } from './sql.js';

/** A schedule row: the wire view's fields, with timestamps as Dates and the row's own id. */
export type ScheduleRow = Omit<ScheduleView, 'next_run' | 'last_run' | 'last_execution_id' | 'created_at' | 'updated_at'> & {
  schedule_id: string;
  next_run: Date | null;
  last_run: Date | null;
  last_execution_id: string | null;
  created_at: Date;
  updated_at: Date;
};

/** The columns a declaration sets (the rest is the ticker's). */
export type ScheduleFields = Pick<ScheduleRow, 'name' | 'source' | 'cron' | 'timezone' | 'path' | 'version' | 'payload' |
  'concurrency_policy' | 'missed_runs' | 'starting_deadline_seconds' | 'suspend' | 'next_run'>;

export function toView(r: ScheduleRow): ScheduleView {
  return {
    name: r.name, source: r.source, cron: r.cron, timezone: r.timezone, path: r.path, version: r.version, payload: r.payload,
    concurrency_policy: r.concurrency_policy, missed_runs: r.missed_runs, starting_deadline_seconds: r.starting_deadline_seconds,
    suspend: r.suspend, next_run: iso(r.next_run), last_run: iso(r.last_run), last_execution_id: r.last_execution_id,
    created_at: iso(r.created_at)!, updated_at: iso(r.updated_at)!,
  };
}

export async function get(q: Queryable, name: string): Promise<ScheduleRow | null> {
  const { rows } = await q.query<ScheduleRow>('SELECT * FROM schedule WHERE name = $1', [name]);
  return rows[0] ?? null;
}

export async function list(q: Queryable, opts: { path?: string; source?: ScheduleSource } = {}): Promise<ScheduleRow[]> {
  const { rows } = await q.query<ScheduleRow>(
    `SELECT * FROM schedule WHERE ($1::text IS NULL OR path = $1) AND ($2::text IS NULL OR source = $2) ORDER BY name`,
    [opts.path ?? null, opts.source ?? null]);
  return rows;
}

/**
 * Insert or replace by name. next_run is kept when the timing did not change (cron, time zone,
 * suspend), so re-applying the same declaration never fires or skips a tick.
 */
export async function upsert(q: Queryable, f: ScheduleFields): Promise<{ row: ScheduleRow; created: boolean }> {
  const { rows } = await q.query<ScheduleRow & { inserted: boolean }>(
    `INSERT INTO schedule (name, source, cron, timezone, path, version, payload, concurrency_policy, missed_runs,
                           starting_deadline_seconds, suspend, next_run)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (name) DO UPDATE SET
       source = EXCLUDED.source, path = EXCLUDED.path, version = EXCLUDED.version, payload = EXCLUDED.payload,
       concurrency_policy = EXCLUDED.concurrency_policy, missed_runs = EXCLUDED.missed_runs,
       starting_deadline_seconds = EXCLUDED.starting_deadline_seconds,
       next_run = CASE WHEN schedule.cron = EXCLUDED.cron AND schedule.timezone = EXCLUDED.timezone
                        AND schedule.suspend = EXCLUDED.suspend AND schedule.next_run IS NOT NULL
                       THEN schedule.next_run ELSE EXCLUDED.next_run END,
       cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, suspend = EXCLUDED.suspend, updated_at = now()
     RETURNING *, (xmax = 0) AS inserted`,
    [f.name, f.source, f.cron, f.timezone, f.path, f.version, JSON.stringify(f.payload), f.concurrency_policy, f.missed_runs,
      f.starting_deadline_seconds, f.suspend, f.next_run]);
  const { inserted, ...row } = rows[0];
  return { row, created: inserted };
}

export async function remove(q: Queryable, name: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM schedule WHERE name = $1', [name]);
  return (rowCount ?? 0) > 0;
}

/** Names of schedules a playbook path declared that its latest version no longer declares. */
export async function removePlaybookSchedules(q: Queryable, path: string, keep: string[]): Promise<string[]> {
  const { rows } = await q.query<{ name: string }>(
    `DELETE FROM schedule WHERE source = 'playbook' AND path = $1 AND NOT (name = ANY($2::text[])) RETURNING name`, [path, keep]);
  return rows.map((r) => r.name);
}

/** Due schedules (ids and the tick they wait for), oldest first. */
export async function due(q: Queryable, limit: number): Promise<Array<{ schedule_id: string; next_run: Date }>> {
  const { rows } = await q.query<{ schedule_id: string; next_run: Date }>(
    'SELECT schedule_id, next_run FROM schedule WHERE NOT suspend AND next_run <= now() ORDER BY next_run LIMIT $1', [limit]);
  return rows;
}

/** The due schedule row, locked; null when another replica holds it or already moved it on. */
export async function lockDue(q: Queryable, scheduleId: string, nextRun: Date): Promise<ScheduleRow | null> {
  const { rows } = await q.query<ScheduleRow>(
    'SELECT * FROM schedule WHERE schedule_id = $1 AND next_run = $2 AND NOT suspend FOR UPDATE SKIP LOCKED', [scheduleId, nextRun]);
  return rows[0] ?? null;
}

export async function advance(q: Queryable, scheduleId: string, nextRun: Date | null, lastRun: Date | null): Promise<void> {
  await q.query(
    'UPDATE schedule SET next_run = $2, last_run = COALESCE($3, last_run) WHERE schedule_id = $1', [scheduleId, nextRun, lastRun]);
}

/**
 * Records decided ticks; returns the ticks it recorded. One recorded already was decided before
 * (by another replica, or under a next_run set back onto it by a replica whose clock is behind)
 * and is left as it is.
 */
export async function recordTicks(q: Queryable, scheduleId: string, ticks: Array<{ tick: Date; outcome: ScheduleTickView['outcome']; reason?: string }>): Promise<Set<number>> {
  if (ticks.length === 0) return new Set();
  const { rows } = await q.query<{ tick: Date }>(
    `INSERT INTO schedule_tick (schedule_id, tick, outcome, reason)
     SELECT $1, t.tick, t.outcome, t.reason FROM jsonb_to_recordset($2::jsonb) AS t(tick timestamptz, outcome text, reason text)
     ON CONFLICT DO NOTHING
     RETURNING tick`,
    [scheduleId, JSON.stringify(ticks.map((t) => ({ tick: t.tick.toISOString(), outcome: t.outcome, reason: t.reason ?? null })))]);
  return new Set(rows.map((r) => r.tick.getTime()));
}

export async function tickStarted(q: Queryable, scheduleId: string, tick: Date, executionId: string): Promise<void> {
  await q.query('UPDATE schedule_tick SET execution_id = $3 WHERE schedule_id = $1 AND tick = $2', [scheduleId, tick, executionId]);
  await q.query('UPDATE schedule SET last_execution_id = $2 WHERE schedule_id = $1', [scheduleId, executionId]);
}

export async function tickFailed(q: Queryable, scheduleId: string, tick: Date, reason: string): Promise<void> {
  await q.query(`UPDATE schedule_tick SET outcome = 'failed', reason = $3 WHERE schedule_id = $1 AND tick = $2`, [scheduleId, tick, reason]);
}

/** Ticks claimed as started whose execution was never recorded (the replica died in between). */
export async function unstarted(q: Queryable, olderThanSeconds: number, limit: number): Promise<Array<{ schedule_id: string; tick: Date }>> {
  const { rows } = await q.query<{ schedule_id: string; tick: Date }>(
    `SELECT schedule_id, tick FROM schedule_tick
      WHERE outcome = 'started' AND execution_id IS NULL AND created_at < now() - make_interval(secs => $1)
      ORDER BY created_at LIMIT $2`, [olderThanSeconds, limit]);
  return rows;
}

export async function getById(q: Queryable, scheduleId: string): Promise<ScheduleRow | null> {
  const { rows } = await q.query<ScheduleRow>('SELECT * FROM schedule WHERE schedule_id = $1', [scheduleId]);
  return rows[0] ?? null;
}

/** The execution a tick started, if any (unique per schedule and tick). */
export async function executionOfTick(q: Queryable, scheduleId: string, tick: Date): Promise<string | null> {
  const { rows } = await q.query<{ execution_id: string }>(
    'SELECT execution_id FROM execution WHERE schedule_id = $1 AND schedule_tick = $2', [scheduleId, tick]);
  return rows[0]?.execution_id ?? null;
}

/** Executions of the schedule still started or running. */
export async function openExecutions(q: Queryable, scheduleId: string): Promise<string[]> {
  const { rows } = await q.query<{ execution_id: string }>(
    `SELECT execution_id FROM execution WHERE schedule_id = $1 AND status IN ('started', 'running') ORDER BY execution_id`, [scheduleId]);
  return rows.map((r) => r.execution_id);
}

export async function ticks(q: Queryable, scheduleId: string, limit: number): Promise<ScheduleTickView[]> {
  const { rows } = await q.query<{ tick: Date; outcome: ScheduleTickView['outcome']; reason: string | null; execution_id: string | null; created_at: Date }>(
    'SELECT tick, outcome, reason, execution_id, created_at FROM schedule_tick WHERE schedule_id = $1 ORDER BY tick DESC LIMIT $2', [scheduleId, limit]);
  return rows.map((r) => ({ tick: iso(r.tick)!, outcome: r.outcome, reason: r.reason, execution_id: r.execution_id, created_at: iso(r.created_at)! }));
}
