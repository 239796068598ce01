/**
 * Keychain service: cached, expiring tokens and secrets with scopes (local, global, shared), TTLs,
 * auto-renewal descriptions and access counting (spec "Keychain entry" and its state table).
 *
 * GET answers carry the entry's state in `status`: `success`, `expired` (with renew_config when
 * auto_renew) or `not_found` — always HTTP 200, the worker decides what to do. The server never
 * renews: the worker calls the token endpoint and POSTs the fresh token.
 */
import { badRequest } from '../errors.js';
import type { Db } from '../db.js';
import type { Cipher } from '../crypto.js';
import type { JsonObject } from '../../playbook/types.js';
import * as store from '../store/keychain.js';
import { checkSchemaShape, validateData, type SchemaDefinition } from './schema.js';
import { iso, isPlainObject, optionalId, parseId, parseUtcTimestamp, writeUnlessCompleted } from './common.js';
import { charLength } from '../../common/char-length.js';
import { type Logger, stderrLogger } from '../../common/logger.js';
import { CACHE_TYPES, SCOPE_TYPES, type ScopeType, type RenewConfig, type KeychainSuccess, type KeychainExpired, type KeychainNotFound, type KeychainGetResponse, type KeychainSetBody, type KeychainSetResponse, type KeychainDeleteResponse, type KeychainCatalogList, type KeychainScopeQuery, type Unchecked } from '../../common/secrets.js';
export { CACHE_TYPES, SCOPE_TYPES, type ScopeType, type RenewConfig, type KeychainSuccess, type KeychainExpired, type KeychainNotFound, type KeychainGetResponse, type KeychainSetBody, type KeychainSetResponse, type KeychainDeleteResponse, type KeychainCatalogList };

/** Default TTLs (spec "Limits"): local 3600 s; global, catalog and shared 86400 s. */
export const DEFAULT_TTL: Record<ScopeType | 'catalog', number> = { local: 3600, global: 86400, catalog: 86400, shared: 86400 };

/** Fills the spec's renew_config defaults: method POST, headers {}, token_field access_token, ttl_field expires_in. */
export function withRenewDefaults(rc: Record<string, unknown>): RenewConfig {
  return {
    ...rc,
    endpoint: rc.endpoint as string,
    method: typeof rc.method === 'string' && rc.method ? rc.method.toUpperCase() : 'POST',
    headers: isPlainObject(rc.headers) ? (rc.headers as JsonObject) : {},
    data: isPlainObject(rc.data) ? (rc.data as JsonObject) : (rc.data as JsonObject | null | undefined) ?? null,
    token_field: typeof rc.token_field === 'string' && rc.token_field ? rc.token_field : 'access_token',
    ttl_field: typeof rc.ttl_field === 'string' && rc.ttl_field ? rc.ttl_field : 'expires_in',
  };
}

/**
 * What the `data_enc` ciphertext of a keychain row holds. renew_config is sealed too: its headers
 * and data usually carry a client secret or a refresh token. The `renew_config` column keeps only
 * the non-secret part (endpoint, method, field names) for operators.
 */
interface SealedEntry {
  token_data: JsonObject;
  renew_config: RenewConfig | null;
}

export function redactRenewConfig(rc: RenewConfig): JsonObject {
  return { endpoint: rc.endpoint, method: rc.method, token_field: rc.token_field, ttl_field: rc.ttl_field };
}

export function cacheKeyFor(name: string, catalogId: string, scope: ScopeType, executionId: string | null): string {
  if (scope === 'global') return `${name}:${catalogId}:global`;
  if (!executionId) throw badRequest(`execution_id is required for scope_type '${scope}'`, { field: 'execution_id' });
  return scope === 'local' ? `${name}:${catalogId}:${executionId}` : `${name}:${catalogId}:shared:${executionId}`;
}

/** The scope of a read or a delete, as it arrives. */
export type ScopeQuery = Unchecked<KeychainScopeQuery>;

export interface KeychainServiceOptions {
  /**
   * Maps an execution to its root for `shared` scope, so a child execution's id finds the tree's
   * entry. Without it the execution_id given for shared scope is taken as the root id (workers
   * send root_execution_id).
   */
  resolveRoot?: (executionId: string) => Promise<string | null>;
  logger?: Logger;
}

function parseScope(v: unknown): ScopeType {
  if (v === undefined || v === null || v === '') return 'global';
  if (typeof v === 'string' && (SCOPE_TYPES as readonly string[]).includes(v)) return v as ScopeType;
  throw badRequest(`scope_type must be one of ${SCOPE_TYPES.join(', ')}`, { field: 'scope_type' });
}

function checkName(name: string): void {
  if (!name || charLength(name) > 255) throw badRequest('keychain_name must be 1 to 255 characters');
}

const remaining = (expiresAt: Date) => Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000));

export class KeychainService {
  private readonly log: Logger;

  constructor(
    private readonly db: Pick<Db, 'pool'>,
    private readonly cipher: Cipher,
    private readonly opts: KeychainServiceOptions = {},
  ) {
    this.log = opts.logger ?? stderrLogger;
  }

  private async keyFor(name: string, catalogIdIn: unknown, q: ScopeQuery): Promise<{ catalogId: string; scope: ScopeType; executionId: string | null; cacheKey: string }> {
    checkName(name);
    const catalogId = parseId(catalogIdIn, 'catalog_id');
    const scope = parseScope(q.scope_type);
    let executionId = scope === 'global' ? null : optionalId(q.execution_id, 'execution_id');
    if (scope === 'shared' && executionId && this.opts.resolveRoot) executionId = (await this.opts.resolveRoot(executionId)) ?? executionId;
    return { catalogId, scope, executionId, cacheKey: cacheKeyFor(name, catalogId, scope, executionId) };
  }

  async get(catalogIdIn: unknown, name: string, q: ScopeQuery = {}): Promise<KeychainGetResponse> {
    const { catalogId, cacheKey } = await this.keyFor(name, catalogIdIn, q);
    const row = await store.readKeychain(this.db.pool, cacheKey);
    if (!row) return { status: 'not_found', keychain_name: name, catalog_id: catalogId, cache_key: cacheKey };
    const sealed = this.cipher.decrypt<SealedEntry>(row.data_enc, 'keychain');
    if (row.expired) {
      const out: KeychainExpired = { status: 'expired', keychain_name: name, catalog_id: catalogId, cache_key: cacheKey, auto_renew: row.auto_renew, expired: true };
      if (row.auto_renew && sealed.renew_config) out.renew_config = withRenewDefaults(sealed.renew_config);
      return out;
    }
    const tokenData = sealed.token_data;
    if (row.schema) {
      const v = validateData(tokenData, row.schema as SchemaDefinition);
      if (!v.valid) this.log.warn({ cache_key: cacheKey, problems: v.errors }, 'keychain entry does not match its schema');
    }
    return {
      status: 'success',
      keychain_name: name,
      catalog_id: catalogId,
      cache_key: cacheKey,
      token_data: tokenData,
      credential_type: row.credential_type,
      cache_type: row.cache_type,
      scope_type: row.scope_type,
      expires_at: iso(row.expires_at)!,
      ttl_seconds: remaining(row.expires_at),
      accessed_at: iso(row.accessed_at)!,
      access_count: row.access_count,
      auto_renew: row.auto_renew,
      expired: false,
    };
  }

  async set(catalogIdIn: unknown, name: string, body: Unchecked<KeychainSetBody>): Promise<KeychainSetResponse> {
    if (!isPlainObject(body)) throw badRequest('body must be an object');
    const { catalogId, scope, executionId, cacheKey } = await this.keyFor(name, catalogIdIn, body);
    if (!isPlainObject(body.token_data)) throw badRequest('token_data is required (an object)', { field: 'token_data' });
    const tokenData = body.token_data as JsonObject;
    const credentialType = body.credential_type ?? 'secret';
    if (typeof credentialType !== 'string' || !credentialType) throw badRequest('credential_type must be a string');
    const autoRenew = body.auto_renew ?? false;
    if (typeof autoRenew !== 'boolean') throw badRequest('auto_renew must be a boolean');
    const cacheType = body.cache_type ?? (autoRenew ? 'token' : 'secret');
    if (typeof cacheType !== 'string' || !(CACHE_TYPES as readonly string[]).includes(cacheType)) {
      throw badRequest(`cache_type must be one of ${CACHE_TYPES.join(', ')}`, { field: 'cache_type' });
    }
    const parentId = optionalId(body.parent_execution_id, 'parent_execution_id');
    let renewConfig: RenewConfig | null = null;
    if (body.renew_config !== undefined && body.renew_config !== null) {
      if (!isPlainObject(body.renew_config)) throw badRequest('renew_config must be an object');
      renewConfig = withRenewDefaults(body.renew_config);
    }
    if (autoRenew && (!renewConfig || typeof renewConfig.endpoint !== 'string' || !renewConfig.endpoint)) {
      throw badRequest('auto_renew requires renew_config.endpoint', { field: 'renew_config' });
    }
    const schemaProblem = checkSchemaShape(body.schema as never);
    if (schemaProblem) throw badRequest(schemaProblem, { field: 'schema' });
    if (body.schema) {
      const v = validateData(tokenData, body.schema as SchemaDefinition);
      if (!v.valid) throw badRequest(v.errors.join(', '), v.errors);
    }
    let expiresAt: string | null = null;
    if (body.expires_at !== undefined && body.expires_at !== null) {
      const d = typeof body.expires_at === 'string' ? parseUtcTimestamp(body.expires_at) : null;
      if (!d) throw badRequest('expires_at must be an ISO 8601 timestamp, e.g. 2030-01-01T00:00:00Z (UTC when it names no zone)', { field: 'expires_at' });
      expiresAt = d.toISOString();
    }
    let ttl = DEFAULT_TTL[scope];
    if (body.ttl_seconds !== undefined && body.ttl_seconds !== null) {
      if (typeof body.ttl_seconds !== 'number' || !Number.isInteger(body.ttl_seconds) || body.ttl_seconds < 0) {
        throw badRequest('ttl_seconds must be a non-negative integer');
      }
      ttl = body.ttl_seconds;
    }
    const write: store.KeychainWrite = {
      cache_key: cacheKey,
      keychain_name: name,
      catalog_id: catalogId,
      credential_type: credentialType,
      cache_type: cacheType,
      scope_type: scope,
      execution_id: executionId,
      parent_execution_id: parentId,
      data_enc: this.cipher.encrypt({ token_data: tokenData, renew_config: renewConfig } satisfies SealedEntry, 'keychain'),
      key_id: this.cipher.current.id,
      schema: body.schema ?? null,
      expires_at: expiresAt,
      ttl_seconds: ttl,
      auto_renew: autoRenew,
      renew_config: renewConfig && redactRenewConfig(renewConfig),
    };
    // A local or shared entry is removed with its execution (shared: the root) at its end; one
    // stored after a completion would outlive it, so those are written under the execution's lock.
    const row = executionId
      ? await writeUnlessCompleted(this.db, executionId, 'local and shared keychain entries', (client) => store.upsertKeychain(client, write))
      : await store.upsertKeychain(this.db.pool, write);
    const ttlOut = expiresAt ? remaining(row.expires_at) : ttl;
    return {
      status: 'success',
      message: `Keychain entry '${name}' stored with TTL of ${ttlOut} seconds`,
      keychain_name: name,
      catalog_id: catalogId,
      cache_key: cacheKey,
      expires_at: iso(row.expires_at)!,
      ttl_seconds: ttlOut,
      auto_renew: row.auto_renew,
    };
  }

  async remove(catalogIdIn: unknown, name: string, q: ScopeQuery = {}): Promise<KeychainDeleteResponse> {
    const { catalogId, cacheKey } = await this.keyFor(name, catalogIdIn, q);
    const deleted = await store.deleteKeychain(this.db.pool, cacheKey);
    return deleted
      ? { status: 'success', message: `Keychain entry '${name}' deleted`, keychain_name: name, catalog_id: catalogId }
      : { status: 'not_found', message: `Keychain entry '${name}' not found`, keychain_name: name, catalog_id: catalogId };
  }

  async listCatalog(catalogIdIn: unknown): Promise<KeychainCatalogList> {
    const catalogId = parseId(catalogIdIn, 'catalog_id');
    const rows = await store.listKeychainByCatalog(this.db.pool, catalogId);
    const entries = rows.map((r) => ({
      keychain_name: r.keychain_name,
      cache_key: r.cache_key,
      scope_type: r.scope_type,
      credential_type: r.credential_type,
      expires_at: iso(r.expires_at)!,
      auto_renew: r.auto_renew,
      access_count: r.access_count,
    }));
    return { status: 'success', catalog_id: catalogId, entries, count: entries.length };
  }
}
