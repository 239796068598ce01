/** SQL of the catalog table. */
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
}

export function toEntry(r: CatalogRow): CatalogEntry {
  return { catalog_id: r.catalog_id, path: r.path, version: r.version, content: r.content, playbook: r.payload, created_at: iso(r.created_at)! };
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

export async function insert(q: Queryable, e: { path: string; version: number; content: string; playbook: Playbook; contentHash: string }): Promise<CatalogEntry> {
  const { rows } = await q.query<CatalogRow>(
    `INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ($1, $2, $3, $4, $5) RETURNING *`,
    [e.path, e.version, e.content, JSON.stringify(e.playbook), e.contentHash]);
  return toEntry(rows[0]);
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

/** Soft delete of every version at a path; true when something was live. */
export async function softDelete(q: Queryable, path: string): Promise<boolean> {
  const { rowCount } = await q.query('UPDATE catalog SET deleted_at = now() WHERE path = $1 AND deleted_at IS NULL', [path]);
  return (rowCount ?? 0) > 0;
}
