/**
 * CatalogService: playbook registration and lookup.
 *
 * - register: the language module validates (422 `playbook_invalid`, every problem with its path);
 *   the path is the request's, else metadata.path (400 when neither); identical content at the
 *   latest live version returns that version (created=false); otherwise version = highest version
 *   ever used at the path + 1 (versions are never reused, even after a delete). Concurrent
 *   registrations of one path serialise on an advisory lock of the path. `alongside` (the app's
 *   sync of declared schedules) runs in the same transaction: both are stored or neither.
 * - ownership (issue 14): the first writer of a path claims it — a resource (`owner`) or an API
 *   client (none); another writer gets 409 `owned_by_other` (server/ownership.ts). A path whose
 *   versions are all removed is free again. Upgrade adoption: an operator from before ownership
 *   registered without an owner; a resource that can name the latest version as the one it wrote
 *   (`adoptVersion`, from its status) claims such an ownerless path instead of getting 409.
 * - remove is a soft delete of every version at the path: hidden from get/list, while executions
 *   already running keep reading their version by catalog_id. Registering again afterwards works.
 */
import { createHash } from 'node:crypto';
import type { ResourceOwner } from '../../common/protocol.js';
import { checkClaim } from '../ownership.js';
import { parsePlaybook } from '../../playbook/index.js';
import { checkCatalogPath, normalizeCatalogPath } from '../../playbook/catalog-path.js';
import type { Playbook, PlaybookIssue } from '../../playbook/types.js';
import { badRequest, invalidPlaybook } from '../errors.js';
import type { CatalogEntry, CatalogService, CatalogSummary, Db, RegisterAlongside, RegisterResult, RemoveAlongside, CatalogVersion } from '../services.js';
import * as store from './catalog.js';
import { parseId } from './sql.js';
import { CATALOG_LIST_LIMIT } from '../../common/contract/catalog.js';

/** Advisory lock namespace of catalog paths (two-int key space: never meets execution locks). */
const CATALOG_LOCK_NS = 0x50464341; // 'PFCA'

export { checkCatalogPath };

export class PgCatalogService implements CatalogService {
  constructor(
    private readonly db: Db,
    private readonly parse: typeof parsePlaybook = parsePlaybook,
  ) {}

  async register(content: string, path?: string, owner?: ResourceOwner, adoptVersion?: number, alongside?: RegisterAlongside): Promise<RegisterResult> {
    if (typeof content !== 'string' || content.trim() === '') throw badRequest('content must be the playbook YAML as a non-empty string');
    const parsed = this.parse(content);
    if (parsed.errors.length > 0 || !parsed.playbook) {
      const n = parsed.errors.length;
      throw invalidPlaybook(`playbook is invalid: ${n} problem${n === 1 ? '' : 's'}`, parsed.errors);
    }
    const playbook: Playbook = parsed.playbook;
    // The request's path, else metadata.path, else metadata.name (a playbook always has a name).
    const target = normalizeCatalogPath(path ?? '') || normalizeCatalogPath(playbook.metadata.path ?? '') || playbook.metadata.name?.trim() || '';
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
      const adopting = !!latest && !!owner && !latest.owner && adoptVersion !== undefined && latest.version === adoptVersion;
      if (latest && !adopting) checkClaim(`catalog path '${target}'`, latest.owner, owner);
      if (latest && latest.content_hash === contentHash) {
        const { content_hash: _h, ...entry } = latest;
        if (owner && (adopting || owner.uid !== latest.owner?.uid)) {
          await store.setOwner(client, entry.catalog_id, owner);
          entry.owner = owner;
        }
        await alongside?.(client, entry);
        return { entry, created: false, warnings };
      }
      const version = (await store.maxVersion(client, target)) + 1;
      const entry = await store.insert(client, { path: target, version, content, playbook: stored, contentHash, owner: owner ?? null });
      // still under the path's lock and uncommitted: a failure here stores no version
      await alongside?.(client, entry);
      return { entry, created: true, warnings };
    });
  }

  async get(path: string, version?: number): Promise<CatalogEntry | null> {
    if (version !== undefined && (!Number.isInteger(version) || version < 1)) throw badRequest('version must be a positive integer');
    return store.getLive(this.db.pool, path, version);
  }

  async getById(catalogId: string, opts: { includeDeleted?: boolean } = {}): Promise<CatalogEntry | null> {
    const id = parseId(catalogId);
    if (!id) throw badRequest(`catalog_id '${catalogId}' is not an id`);
    return store.getById(this.db.pool, id, opts);
  }

  async list(opts: { prefix?: string; limit?: number; offset?: number } = {}): Promise<CatalogSummary[]> {
    const limit = clampInt(opts.limit, CATALOG_LIST_LIMIT.default, 1, CATALOG_LIST_LIMIT.max);
    const offset = clampInt(opts.offset, 0, 0, Number.MAX_SAFE_INTEGER);
    return store.listLatest(this.db.pool, { prefix: opts.prefix, limit, offset });
  }

  async remove(path: string, owner?: ResourceOwner, alongside?: RemoveAlongside): Promise<boolean> {
    if (!owner && !alongside) return store.softDelete(this.db.pool, path);
    return this.db.tx(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [CATALOG_LOCK_NS, path]);
      if (owner) {
        const latest = await store.latestLive(client, path);
        if (!latest) return false;
        checkClaim(`catalog path '${path}'`, latest.owner, owner);
      }
      if (!(await store.softDelete(client, path))) return false;
      await alongside?.(client, path);
      return true;
    });
  }

  async versions(paths: string[]): Promise<Array<{ path: string; version: number; owner?: ResourceOwner }>> {
    return paths.length ? store.latestVersions(this.db.pool, paths) : [];
  }

  async history(path: string): Promise<CatalogVersion[]> {
    return store.listVersions(this.db.pool, path);
  }
}

export function clampInt(v: number | undefined, dflt: number, min: number, max: number): number {
  if (v === undefined || v === null || !Number.isFinite(v)) return dflt;
  return Math.min(max, Math.max(min, Math.trunc(v)));
}
