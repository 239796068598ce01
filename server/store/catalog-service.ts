/**
 * CatalogService: playbook registration and lookup.
 *
 * - register: the language module validates (422 `playbook_invalid`, every problem with its path);
 *   the path is the request's, else metadata.path (400 when neither); identical content at the
 *   latest live version returns that version (created=false); otherwise version = highest version
 *   ever used at the path + 1 (versions are never reused, even after a delete). Concurrent
 *   registrations of one path serialise on an advisory lock of the path.
 * - remove is a soft delete of every version at the path: hidden from get/list, while executions
 *   already running keep reading their version by catalog_id. Registering again afterwards works.
 */
import { createHash } from 'node:crypto';
import { parsePlaybook } from '../../playbook/index.js';
import type { Playbook, PlaybookIssue } from '../../playbook/types.js';
import { badRequest, invalidPlaybook } from '../errors.js';
import type { CatalogEntry, CatalogService, CatalogSummary, Db, RegisterResult } from '../services.js';
import * as store from './catalog.js';
import { parseId } from './sql.js';

/** Advisory lock namespace of catalog paths (two-int key space: never meets execution locks). */
const CATALOG_LOCK_NS = 0x50464341; // 'PFCA'

const PATH_RE = /^[A-Za-z0-9_][A-Za-z0-9_.@+-]*(\/[A-Za-z0-9_][A-Za-z0-9_.@+-]*)*$/;

/** Checks a catalog path: segments of letters, digits and `_.-@+` separated by single slashes. */
export function checkCatalogPath(path: string): string | null {
  if (path.length === 0) return 'path is empty';
  if (path.length > 512) return 'path is longer than 512 characters';
  if (!PATH_RE.test(path) || path.split('/').some((s) => s === '.' || s === '..')) {
    return `path '${path}' is not a catalog path: use segments of letters, digits, '_', '.', '-', '@', '+' separated by '/' (no leading or trailing '/')`;
  }
  return null;
}

export class PgCatalogService implements CatalogService {
  constructor(
    private readonly db: Db,
    private readonly parse: typeof parsePlaybook = parsePlaybook,
  ) {}

  async register(content: string, path?: string): Promise<RegisterResult> {
    if (typeof content !== 'string' || content.trim() === '') throw badRequest('content must be the playbook YAML as a non-empty string');
    const parsed = this.parse(content);
    if (parsed.errors.length > 0 || !parsed.playbook) {
      const n = parsed.errors.length;
      throw invalidPlaybook(`playbook is invalid: ${n} problem${n === 1 ? '' : 's'}`, parsed.errors);
    }
    const playbook: Playbook = parsed.playbook;
    // The request's path, else metadata.path, else metadata.name (a playbook always has a name).
    const target = (path ?? '').trim() || playbook.metadata.path?.trim() || playbook.metadata.name?.trim() || '';
    if (!target) throw badRequest('no catalog path: give `path` in the request, or `metadata.path` or `metadata.name` in the playbook');
    const bad = checkCatalogPath(target);
    if (bad) throw badRequest(bad);
    const warnings: PlaybookIssue[] = [...parsed.warnings];
    if (path && playbook.metadata.path && playbook.metadata.path !== target) {
      warnings.push({ path: 'metadata.path', message: `metadata.path '${playbook.metadata.path}' differs from the registration path '${target}'; stored under '${target}'`, severity: 'warning' });
    }
    const stored: Playbook = { ...playbook, metadata: { ...playbook.metadata, path: target } };
    const contentHash = createHash('sha256').update(content).digest('hex');

    return this.db.tx(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [CATALOG_LOCK_NS, target]);
      const latest = await store.latestLive(client, target);
      if (latest && latest.content_hash === contentHash) {
        const { content_hash: _h, ...entry } = latest;
        return { entry, created: false, warnings };
      }
      const version = (await store.maxVersion(client, target)) + 1;
      const entry = await store.insert(client, { path: target, version, content, playbook: stored, contentHash });
      return { entry, created: true, warnings };
    });
  }

  async get(path: string, version?: number): Promise<CatalogEntry | null> {
    if (version !== undefined && (!Number.isInteger(version) || version < 1)) throw badRequest('version must be a positive integer');
    return store.getLive(this.db.pool, path, version);
  }

  async getById(catalogId: string): Promise<CatalogEntry | null> {
    const id = parseId(catalogId);
    if (!id) throw badRequest(`catalog_id '${catalogId}' is not an id`);
    return store.getById(this.db.pool, id);
  }

  async list(opts: { prefix?: string; limit?: number; offset?: number } = {}): Promise<CatalogSummary[]> {
    const limit = clampInt(opts.limit, 100, 1, 1000);
    const offset = clampInt(opts.offset, 0, 0, Number.MAX_SAFE_INTEGER);
    return store.listLatest(this.db.pool, { prefix: opts.prefix, limit, offset });
  }

  async remove(path: string): Promise<boolean> {
    return store.softDelete(this.db.pool, path);
  }
}

export function clampInt(v: number | undefined, dflt: number, min: number, max: number): number {
  if (v === undefined || v === null || !Number.isFinite(v)) return dflt;
  return Math.min(max, Math.max(min, Math.trunc(v)));
}
