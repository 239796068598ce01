/** SQL of webhook triggers (migration 223). The secret is stored sealed; it is never selected with the hook. */
import type { HookView } from '../../common/contract/hooks.js';
import { iso, type Queryable } from './sql.js';

export interface HookRow {
  hook_id: string;
  name: string;
  path: string;
  version: number | null;
  filter: string | null;
  insecure: boolean;
  /** Whether a hook_secret row exists (the secret itself is read only by secretOf). */
  has_secret: boolean;
  created_at: Date;
  updated_at: Date;
}

/** What GET /api/hooks/{name} answers (the contract's shape): never the secret, only whether one is set. */
export type { HookView };

export type HookFields = Pick<HookRow, 'name' | 'path' | 'version' | 'filter' | 'insecure'>;

const SELECT = `SELECT h.*, EXISTS (SELECT 1 FROM hook_secret s WHERE s.hook_id = h.hook_id) AS has_secret FROM hook h`;

export function toView(r: HookRow): HookView {
  return {
    hook_id: r.hook_id, name: r.name, path: r.path, version: r.version, filter: r.filter, insecure: r.insecure, secret_set: r.has_secret,
    url: `/api/hooks/${encodeURIComponent(r.name)}`, created_at: iso(r.created_at)!, updated_at: iso(r.updated_at)!,
  };
}

export async function get(q: Queryable, name: string): Promise<HookRow | null> {
  const { rows } = await q.query<HookRow>(`${SELECT} WHERE h.name = $1`, [name]);
  return rows[0] ?? null;
}

export async function list(q: Queryable, path?: string): Promise<HookRow[]> {
  const { rows } = await q.query<HookRow>(`${SELECT} WHERE ($1::text IS NULL OR h.path = $1) ORDER BY h.name`, [path ?? null]);
  return rows;
}

/** Insert or replace by name; the secret is set apart (setSecret). */
export async function upsert(q: Queryable, f: HookFields): Promise<{ hookId: string; created: boolean }> {
  const { rows } = await q.query<{ hook_id: string; inserted: boolean }>(
    `INSERT INTO hook (name, path, version, filter, insecure) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (name) DO UPDATE SET path = EXCLUDED.path, version = EXCLUDED.version, filter = EXCLUDED.filter,
       insecure = EXCLUDED.insecure, updated_at = now()
     RETURNING hook_id, (xmax = 0) AS inserted`,
    [f.name, f.path, f.version, f.filter, f.insecure]);
  return { hookId: rows[0].hook_id, created: rows[0].inserted };
}

export async function setSecret(q: Queryable, hookId: string, keyId: string, sealed: string): Promise<void> {
  await q.query(
    `INSERT INTO hook_secret (hook_id, key_id, data_enc) VALUES ($1, $2, $3)
     ON CONFLICT (hook_id) DO UPDATE SET key_id = EXCLUDED.key_id, data_enc = EXCLUDED.data_enc`, [hookId, keyId, sealed]);
}

export async function dropSecret(q: Queryable, hookId: string): Promise<void> {
  await q.query('DELETE FROM hook_secret WHERE hook_id = $1', [hookId]);
}

/** The sealed secret of a hook, or null when it has none. */
export async function secretOf(q: Queryable, hookId: string): Promise<string | null> {
  const { rows } = await q.query<{ data_enc: string }>('SELECT data_enc FROM hook_secret WHERE hook_id = $1', [hookId]);
  return rows[0]?.data_enc ?? null;
}

export async function remove(q: Queryable, name: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM hook WHERE name = $1', [name]);
  return (rowCount ?? 0) > 0;
}
