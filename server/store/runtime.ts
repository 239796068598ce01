/** SQL of runtime registrations (servers and workers) and their heartbeats. */
import type { JsonObject } from '../../playbook/types.js';
import type { RuntimeEntry } from '../../common/protocol.js';
import { RUNTIME_LIVE_SECONDS } from '../../common/contract/limits.js';
import type { RuntimeRegistration } from '../services.js';
import { iso, type Queryable } from './sql.js';

export async function register(q: Queryable, reg: RuntimeRegistration): Promise<void> {
  await q.query(
    `INSERT INTO runtime (kind, name, info) VALUES ($1, $2, $3)
     ON CONFLICT (kind, name) DO UPDATE SET info = EXCLUDED.info, registered_at = now(), last_heartbeat = now()`,
    [reg.kind, reg.name, JSON.stringify(reg.info ?? {})]);
}

/** A heartbeat of an unknown runtime registers it (a restarted database must not lose workers). */
export async function heartbeat(q: Queryable, kind: RuntimeRegistration['kind'], name: string): Promise<void> {
  await q.query(
    `INSERT INTO runtime (kind, name) VALUES ($1, $2)
     ON CONFLICT (kind, name) DO UPDATE SET last_heartbeat = now()`, [kind, name]);
}

export async function list(q: Queryable): Promise<RuntimeEntry[]> {
  const { rows } = await q.query<{ kind: 'server' | 'worker'; name: string; info: JsonObject; registered_at: Date; last_heartbeat: Date; age: number }>(
    `SELECT kind, name, info, registered_at, last_heartbeat, greatest(extract(epoch FROM now() - last_heartbeat), 0)::float8 AS age
       FROM runtime ORDER BY kind, name`);
  return rows.map((r) => ({
    kind: r.kind, name: r.name, info: r.info, registered_at: iso(r.registered_at)!, last_heartbeat: iso(r.last_heartbeat)!,
    heartbeat_age_seconds: Math.round(r.age * 10) / 10, live: r.age < RUNTIME_LIVE_SECONDS,
  }));
}

/**
 * Registrations with no heartbeat for a day are forgotten (the sweeper's runtime-prune task): a
 * stopped process is listed as offline (`live: false`) until then, and a process that comes back
 * registers again with its next heartbeat. Without this the list grew by one row per process
 * start that used a new name (pids in worker and server names).
 */
export const RUNTIME_FORGET_SECONDS = 24 * 3600;

export async function forgetOffline(q: Queryable, seconds = RUNTIME_FORGET_SECONDS): Promise<number> {
  const { rowCount } = await q.query('DELETE FROM runtime WHERE last_heartbeat < now() - make_interval(secs => $1)', [seconds]);
  return rowCount ?? 0;
}

/**
 * Servers other than `self` that heartbeat within the last `seconds` and whose registration does
 * not list `feature` in `info.features` (servers of a version without it).
 */
export async function liveServersWithout(q: Queryable, feature: string, seconds: number, self: string): Promise<number> {
  const { rows } = await q.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM runtime
      WHERE kind = 'server' AND name <> $3 AND last_heartbeat > now() - make_interval(secs => $2)
        AND NOT coalesce(info->'features' ? $1, false)`, [feature, seconds, self]);
  return Number(rows[0]?.n ?? 0);
}
