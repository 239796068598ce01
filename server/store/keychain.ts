/**
 * SQL for the `keychain` table (migration 101). Ciphertext only; rules in server/secrets/keychain.ts.
 */
import type { Queryable } from './credentials.js';

export interface KeychainRow {
  cache_key: string;
  keychain_name: string;
  catalog_id: string;
  credential_type: string;
  cache_type: string;
  scope_type: 'local' | 'global' | 'shared';
  execution_id: string | null;
  parent_execution_id: string | null;
  data_enc: string;
  key_id: string;
  schema: Record<string, unknown> | null;
  expires_at: Date;
  created_at: Date;
  accessed_at: Date;
  access_count: number;
  auto_renew: boolean;
  renew_config: Record<string, unknown> | null;
  /** Computed by the query: expires_at <= now() on the database clock. */
  expired: boolean;
}

const COLS = `cache_key, keychain_name, catalog_id::text AS catalog_id, credential_type, cache_type, scope_type,
  execution_id::text AS execution_id, parent_execution_id::text AS parent_execution_id, data_enc, key_id, schema,
  expires_at, created_at, accessed_at, access_count, auto_renew, renew_config, (expires_at <= now()) AS expired`;

export interface KeychainWrite {
  cache_key: string;
  keychain_name: string;
  catalog_id: string;
  credential_type: string;
  cache_type: string;
  scope_type: string;
  execution_id: string | null;
  parent_execution_id: string | null;
  data_enc: string;
  key_id: string;
  schema: unknown;
  /** Either an absolute expiry or a TTL from the database's now(). */
  expires_at: string | null;
  ttl_seconds: number;
  auto_renew: boolean;
  renew_config: unknown;
}

/** Insert or replace (a renewal re-POSTs the entry); created_at is kept, access_count kept. */
export async function upsertKeychain(db: Queryable, w: KeychainWrite): Promise<KeychainRow> {
  const { rows } = await db.query<KeychainRow>(
    `INSERT INTO keychain (cache_key, keychain_name, catalog_id, credential_type, cache_type, scope_type, execution_id,
                           parent_execution_id, data_enc, key_id, schema, expires_at, auto_renew, renew_config)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb,
             coalesce($12::timestamptz, now() + make_interval(secs => $13)), $14, $15::jsonb)
     ON CONFLICT (cache_key) DO UPDATE SET
       credential_type = EXCLUDED.credential_type, cache_type = EXCLUDED.cache_type,
       parent_execution_id = EXCLUDED.parent_execution_id, data_enc = EXCLUDED.data_enc, key_id = EXCLUDED.key_id,
       schema = EXCLUDED.schema, expires_at = EXCLUDED.expires_at, auto_renew = EXCLUDED.auto_renew,
       renew_config = EXCLUDED.renew_config
     RETURNING ${COLS}`,
    [w.cache_key, w.keychain_name, w.catalog_id, w.credential_type, w.cache_type, w.scope_type, w.execution_id,
      w.parent_execution_id, w.data_enc, w.key_id, JSON.stringify(w.schema ?? null), w.expires_at, w.ttl_seconds,
      w.auto_renew, JSON.stringify(w.renew_config ?? null)],
  );
  return rows[0];
}

/**
 * Reads an entry; when it is still valid, counts the access (access_count + 1, accessed_at now)
 * in the same statement. An expired entry is returned untouched.
 */
export async function readKeychain(db: Queryable, cacheKey: string): Promise<KeychainRow | null> {
  const hit = await db.query<KeychainRow>(
    `UPDATE keychain SET access_count = access_count + 1, accessed_at = now()
     WHERE cache_key = $1 AND expires_at > now() RETURNING ${COLS}`,
    [cacheKey],
  );
  if (hit.rows[0]) return hit.rows[0];
  const miss = await db.query<KeychainRow>(`SELECT ${COLS} FROM keychain WHERE cache_key = $1`, [cacheKey]);
  return miss.rows[0] ?? null;
}

export async function deleteKeychain(db: Queryable, cacheKey: string): Promise<boolean> {
  const r = await db.query('DELETE FROM keychain WHERE cache_key = $1', [cacheKey]);
  return (r.rowCount ?? 0) > 0;
}

export async function listKeychainByCatalog(db: Queryable, catalogId: string): Promise<KeychainRow[]> {
  const { rows } = await db.query<KeychainRow>(
    `SELECT ${COLS} FROM keychain WHERE catalog_id = $1 ORDER BY keychain_name, cache_key`,
    [catalogId],
  );
  return rows;
}

/** Drops the local entries created by an execution; `id` an idLiteral (sql.ts). */
export const deleteLocalEntriesSql = (id: string) => `DELETE FROM keychain WHERE scope_type = 'local' AND execution_id = ${id}`;

/** Drops the shared entries of an execution tree (tagged with its root execution id); `rootId` an idLiteral. */
export const deleteSharedEntriesSql = (rootId: string) => `DELETE FROM keychain WHERE scope_type = 'shared' AND execution_id = ${rootId}`;

/**
 * Removes expired entries. Entries with auto_renew are kept `renewGraceSeconds` past expiry so a
 * worker can still see status `expired` with renew_config and renew them.
 */
export async function deleteExpiredKeychain(db: Queryable, renewGraceSeconds: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM keychain
     WHERE (NOT auto_renew AND expires_at <= now())
        OR (auto_renew AND expires_at <= now() - make_interval(secs => $1))`,
    [renewGraceSeconds],
  );
  return r.rowCount ?? 0;
}
