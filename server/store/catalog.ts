/** SQL of the catalog table. */
import type { ResourceOwner } from '../../common/protocol.js';
import type { Playbook } from '../../playbook/types.js';
import type { CatalogEntry, CatalogSummary } from '../services.js';
import { iso, type Queryable } from './sql.js';

interface CatalogRow {
  catalog_id: string;
  path: string;
  version: number;
  content: string;
  payload: Playbook;
  content_hash: string;
  created_at: Date;
  owner: ResourceOwner | null;
}

export function toEntry(r: CatalogRow): CatalogEntry {
  return {
    catalog_id: r.catalog_id, path: r.path, version: r.version, content: r.content, playbook: r.payload, created_at: iso(r.created_at)!,
    ...(r.owner ? { owner: r.owner } : {}),
  };
}

export async function latestLive(q: Queryable, path: string): Promise<(CatalogEntry & { content_hash: string }) | null> {
  const { rows } = await q.query<CatalogRow>(
    'SELECT * FROM catalog WHERE path = $1 AND deleted_at IS NULL ORDER BY version DESC LIMIT 1', [path]);
  return rows[0] ? { ...toEntry(rows[0]), content_hash: rows[0].content_hash } : null;
}

export async function getLive(q: Queryable, path: string, version?: number): Promise<CatalogEntry | null> {
  if (version === undefined) return latestLive(q, path);
  const { rows } = await q.query<CatalogRow>('SELECT * FROM catalog WHERE path = $1 AND version = $2 AND deleted_at IS NULL', [path, version]);
  return rows[0] ? toEntry(rows[0]) : null;
}

/** Any row by id, deleted or not (executions keep the version they started with). */
export async function getById(q: Queryable, catalogId: string, opts: { includeDeleted?: boolean } = {}): Promise<CatalogEntry | null> {
  const { rows } = await q.query<CatalogRow>(
    `SELECT * FROM catalog WHERE catalog_id = $1 ${opts.includeDeleted ? '' : 'AND deleted_at IS NULL'}`, [catalogId]);
  return rows[0] ? toEntry(rows[0]) : null;
}

/** Highest version ever used at a path, deleted rows included (versions are never reused). */
export async function maxVersion(q: Queryable, path: string): Promise<number> {
  const { rows } = await q.query<{ v: number | null }>('SELECT max(version) AS v FROM catalog WHERE path = $1', [path]);
  return rows[0]?.v ?? 0;
}

export async function insert(
  q: Queryable, e: { path: string; version: number; content: string; playbook: Playbook; contentHash: string; owner: ResourceOwner | null },
): Promise<CatalogEntry> {
  const { rows } = await q.query<CatalogRow>(
    `INSERT INTO catalog (path, version, content, payload, content_hash, owner) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
    [e.path, e.version, e.content, JSON.stringify(e.playbook), e.contentHash, e.owner ? JSON.stringify(e.owner) : null]);
  return toEntry(rows[0]);
}

/** Records the owner's current uid on a row (a re-created resource adopting its predecessor's entry). */
export async function setOwner(q: Queryable, catalogId: string, owner: ResourceOwner): Promise<void> {
  await q.query('UPDATE catalog SET owner = $2 WHERE catalog_id = $1', [catalogId, JSON.stringify(owner)]);
}

/** Latest live version and owner of each of `paths` that exists (no content: the drift check's read). */
export async function latestVersions(q: Queryable, paths: string[]): Promise<Array<{ path: string; version: number; owner?: ResourceOwner }>> {
  const { rows } = await q.query<{ path: string; version: number; owner: ResourceOwner | null }>(
    `SELECT DISTINCT ON (path) path, version, owner FROM catalog
      WHERE path = ANY($1::text[]) AND deleted_at IS NULL ORDER BY path, version DESC`, [paths]);
  return rows.map((r) => ({ path: r.path, version: r.version, ...(r.owner ? { owner: r.owner } : {}) }));
}

export async function listLatest(q: Queryable, opts: { prefix?: string; limit: number; offset: number }): Promise<CatalogSummary[]> {
  const params: unknown[] = [opts.limit, opts.offset];
  let where = 'deleted_at IS NULL';
  if (opts.prefix) {
    params.push(`${opts.prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    where += ` AND path LIKE $${params.length}`;
  }
  const { rows } = await q.query<CatalogRow>(
    `SELECT DISTINCT ON (path) catalog_id, path, version, payload, created_at FROM catalog
      WHERE ${where} ORDER BY path, version DESC LIMIT $1 OFFSET $2`, params);
  return rows.map((r) => {
    const s: CatalogSummary = { catalog_id: r.catalog_id, path: r.path, version: r.version, created_at: iso(r.created_at)!, name: r.payload?.metadata?.name ?? r.path };
    const description = r.payload?.metadata?.description;
    if (description) s.description = description;
    return s;
  });
}

/** Every live version at a path, newest first (the console's version picker and diff). */
export async function listVersions(q: Queryable, path: string): Promise<Array<{ catalog_id: string; version: number; created_at: string }>> {
  const { rows } = await q.query<{ catalog_id: string; version: number; created_at: Date }>(
    'SELECT catalog_id, version, created_at FROM catalog WHERE path = $1 AND deleted_at IS NULL ORDER BY version DESC', [path]);
  return rows.map((r) => ({ catalog_id: r.catalog_id, version: r.version, created_at: iso(r.created_at)! }));
}

/** Soft delete of every version at a path; true when something was live. */
export async function softDelete(q: Queryable, path: string): Promise<boolean> {
  const { rowCount } = await q.query('UPDATE catalog SET deleted_at = now() WHERE path = $1 AND deleted_at IS NULL', [path]);
  return (rowCount ?? 0) > 0;
}
