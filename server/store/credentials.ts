/**
 * SQL for the `credential` and `auth_cache` tables (migration 100). Rows carry ciphertext only;
 * encryption, validation and shapes live in server/secrets/credentials.ts.
 */
import type pg from 'pg';
import type { ResourceOwner } from '../../common/protocol.js';
import type { CredentialScope } from '../../common/secrets.js';

export type Queryable = Pick<pg.Pool, 'query'>;

export interface CredentialRow {
  id: string;
  name: string;
  type: string;
  data_enc: string;
  key_id: string;
  schema: Record<string, unknown> | null;
  meta: Record<string, unknown>;
  tags: string[];
  description: string | null;
  created_at: Date;
  updated_at: Date;
  owner: ResourceOwner | null;
  /** Which playbooks may use it (migration 212); null = all. */
  scope: CredentialScope | null;
}

const COLS = 'id::text AS id, name, type, data_enc, key_id, schema, meta, tags, description, created_at, updated_at, owner, scope';

export interface UpsertCredential {
  name: string;
  type: string;
  data_enc: string;
  key_id: string;
  schema: unknown;
  meta: unknown;
  tags: string[];
  description: string | null;
  owner: ResourceOwner | null;
  /** undefined: keep the stored scope on update (none on insert); null: remove it. */
  scope?: CredentialScope | null;
  /** Claim an ownerless row this owner wrote before ownership existed (upgrade adoption). */
  adopt?: boolean;
}

/**
 * Insert, or update by name when the row's owner is the writer's (same kind/namespace/name, or
 * both none); `created` tells which happened, `null` means another owner holds the name and
 * nothing was written. Cached decrypted copies are dropped on update. With `adopt`, a row without
 * owner whose meta records that this resource wrote it (`source: kubernetes`, its namespace and
 * name: what the operator stored before ownership existed) is claimed too.
 */
export async function upsertCredential(db: Queryable, c: UpsertCredential): Promise<{ row: CredentialRow; created: boolean } | null> {
  const { rows } = await db.query<CredentialRow & { inserted: boolean }>(
    `INSERT INTO credential (name, type, data_enc, key_id, schema, meta, tags, description, owner, scope)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9::jsonb, $10::jsonb)
     ON CONFLICT (name) DO UPDATE SET
       type = EXCLUDED.type, data_enc = EXCLUDED.data_enc, key_id = EXCLUDED.key_id, schema = EXCLUDED.schema,
       meta = EXCLUDED.meta, tags = EXCLUDED.tags, description = EXCLUDED.description, owner = EXCLUDED.owner,
       scope = CASE WHEN $11 THEN EXCLUDED.scope ELSE credential.scope END, updated_at = now()
     WHERE (credential.owner - 'uid') IS NOT DISTINCT FROM (EXCLUDED.owner - 'uid')
        OR ($12::boolean AND credential.owner IS NULL AND EXCLUDED.owner IS NOT NULL
            AND credential.meta->>'source' = 'kubernetes'
            AND credential.meta->>'namespace' = EXCLUDED.owner->>'namespace'
            AND credential.meta->>'resource' = EXCLUDED.owner->>'name')
     RETURNING ${COLS}, (xmax = 0) AS inserted`,
    [c.name, c.type, c.data_enc, c.key_id, JSON.stringify(c.schema ?? null), JSON.stringify(c.meta ?? {}), c.tags, c.description,
      c.owner ? JSON.stringify(c.owner) : null, c.scope ? JSON.stringify(c.scope) : null, c.scope !== undefined, c.adopt === true],
  );
  if (!rows[0]) return null;
  const { inserted, ...row } = rows[0];
  if (!inserted) await db.query('DELETE FROM auth_cache WHERE credential_id = $1', [row.id]);
  return { row, created: inserted };
}

/**
 * By name only: what a credential reference (`auth`, the worker's GET /api/credential/{key}) and
 * the upsert's owner check mean. A name of digits is a name, never another credential's id.
 */
export async function findCredentialByName(db: Queryable, name: string): Promise<CredentialRow | null> {
  const { rows } = await db.query<CredentialRow>(`SELECT ${COLS} FROM credential WHERE name = $1`, [name]);
  return rows[0] ?? null;
}

/**
 * The management API's identifier (spec: "id or name"): the credential of that NAME when there is
 * one, else the one of that id. The name wins so that a credential named "2" is never shadowed by
 * the credential whose id is 2 (nor a delete of "2" taking that other one).
 */
export async function findCredentialByNameOrId(db: Queryable, identifier: string): Promise<CredentialRow | null> {
  // digits only, and few enough to be a bigint: anything else cannot be an id
  const id = /^\d{1,18}$/.test(identifier) ? identifier : null;
  const { rows } = await db.query<CredentialRow>(
    `SELECT ${COLS} FROM credential WHERE name = $1 OR id = $2::bigint ORDER BY (name = $1) DESC LIMIT 1`,
    [identifier, id],
  );
  return rows[0] ?? null;
}

export interface CredentialFilter {
  type?: string;
  tag?: string;
  q?: string;
  limit: number;
  offset: number;
}

export async function listCredentials(db: Queryable, f: CredentialFilter): Promise<{ rows: CredentialRow[]; total: number }> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.type) {
    params.push(f.type);
    where.push(`type = $${params.length}`);
  }
  if (f.tag) {
    params.push(f.tag);
    where.push(`$${params.length} = ANY (tags)`);
  }
  if (f.q) {
    params.push(`%${f.q.replace(/[\\%_]/g, (m) => `\\${m}`)}%`);
    where.push(`(name ILIKE $${params.length} OR coalesce(description, '') ILIKE $${params.length})`);
  }
  const w = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const total = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM credential ${w}`, params);
  const { rows } = await db.query<CredentialRow>(
    `SELECT ${COLS} FROM credential ${w} ORDER BY name LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
    [...params, f.limit, f.offset],
  );
  return { rows, total: Number(total.rows[0].n) };
}

export async function deleteCredential(db: Queryable, id: string): Promise<boolean> {
  const r = await db.query('DELETE FROM credential WHERE id = $1', [id]);
  return (r.rowCount ?? 0) > 0;
}

export interface AuthCacheWrite {
  cache_key: string;
  credential_id: string;
  credential_name: string;
  credential_type: string;
  cache_type: 'secret' | 'token';
  scope_type: 'execution' | 'global';
  execution_id: string | null;
  parent_execution_id: string | null;
  data_enc: string;
  key_id: string;
  ttl_seconds: number;
}

export interface AuthCacheRow {
  cache_key: string;
  cache_type: string;
  scope_type: string;
  execution_id: string | null;
  access_count: number;
  expires_at: Date;
  accessed_at: Date;
  created_at: Date;
}

/**
 * Stores a decrypted-then-re-sealed copy in the authentication cache. A repeat refreshes the data,
 * increments access_count, updates accessed_at and extends the expiry.
 */
export async function touchAuthCache(db: Queryable, w: AuthCacheWrite): Promise<AuthCacheRow> {
  const { rows } = await db.query<AuthCacheRow>(
    `INSERT INTO auth_cache (cache_key, credential_id, credential_name, credential_type, cache_type, scope_type,
                             execution_id, parent_execution_id, data_enc, key_id, expires_at, access_count)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + make_interval(secs => $11), 1)
     ON CONFLICT (cache_key) DO UPDATE SET
       credential_id = EXCLUDED.credential_id, credential_type = EXCLUDED.credential_type, cache_type = EXCLUDED.cache_type,
       parent_execution_id = coalesce(EXCLUDED.parent_execution_id, auth_cache.parent_execution_id),
       data_enc = EXCLUDED.data_enc, key_id = EXCLUDED.key_id, expires_at = EXCLUDED.expires_at,
       access_count = auth_cache.access_count + 1, accessed_at = now()
     RETURNING cache_key, cache_type, scope_type, execution_id::text AS execution_id, access_count, expires_at, accessed_at, created_at`,
    [w.cache_key, w.credential_id, w.credential_name, w.credential_type, w.cache_type, w.scope_type,
      w.execution_id, w.parent_execution_id, w.data_enc, w.key_id, w.ttl_seconds],
  );
  return rows[0];
}

/** Drops an execution's authentication cache; `id` an idLiteral (sql.ts). */
export const deleteAuthCacheForExecutionSql = (id: string) => `DELETE FROM auth_cache WHERE scope_type = 'execution' AND execution_id = ${id}`;

export async function deleteExpiredAuthCache(db: Queryable): Promise<number> {
  const r = await db.query('DELETE FROM auth_cache WHERE expires_at <= now()');
  return r.rowCount ?? 0;
}

/** A command as the credential read path checks it: its lease and its execution's playbook. */
export interface CommandLease {
  queue_id: string;
  status: string;
  worker_id: string | null;
  lease_token: string | null;
  execution_id: string;
  path: string;
  /** Namespace of the Kubernetes resource owning the execution's catalog entry, if any. */
  namespace: string | null;
}

export async function commandLease(db: Queryable, queueId: string): Promise<CommandLease | null> {
  const { rows } = await db.query<CommandLease>(
    `SELECT q.queue_id::text AS queue_id, q.status, q.worker_id, q.lease_token, q.execution_id::text AS execution_id,
            e.path, c.owner ->> 'namespace' AS namespace
       FROM queue q JOIN execution e ON e.execution_id = q.execution_id JOIN catalog c ON c.catalog_id = e.catalog_id
      WHERE q.queue_id = $1`,
    [queueId],
  );
  return rows[0] ?? null;
}
