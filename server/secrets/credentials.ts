/**
 * Credential service: encrypted storage of static authentication data, schema validation, the
 * worker read path (GET /api/credential/{key}) and the authentication cache filled by
 * include_data reads. Decrypted data leaves this module only as a return value of the read
 * paths; it is never logged.
 */
import { AppError, badRequest, notFound } from '../errors.js';
import type { Db } from '../services.js';
import type { Cipher } from '../crypto.js';
import type { Json, JsonObject } from '../../playbook/types.js';
import * as store from '../store/credentials.js';
import { checkSchemaShape, validateData, type SchemaDefinition } from './schema.js';
import { iso, isPlainObject, optionalId } from './common.js';

export const CREDENTIAL_TYPES = ['postgres', 'oauth2', 'bearer', 'basic', 'api_key', 'service_account', 'warehouse', 'custom'] as const;
export type CredentialType = (typeof CREDENTIAL_TYPES)[number];

/** 400 with the spec's body `{message: 'Credential validation failed', errors: [...]}` (plus `error`). */
export class CredentialValidationError extends AppError {
  constructor(readonly errors: string[]) {
    super(400, 'validation_failed', 'Credential validation failed', errors);
    this.name = 'CredentialValidationError';
  }
  body(): { message: string; errors: string[]; error: { code: string; message: string; details: string[] } } {
    return { message: this.message, errors: this.errors, error: { code: this.code, message: this.message, details: this.errors } };
  }
}

export interface CredentialInput {
  name?: unknown;
  type?: unknown;
  description?: unknown;
  data?: unknown;
  schema?: unknown;
  meta?: unknown;
  tags?: unknown;
}

export interface CredentialMeta {
  id: number;
  name: string;
  type: string;
  description: string | null;
  tags: string[];
  meta: JsonObject;
  schema: JsonObject | null;
  created_at: string;
  updated_at: string;
}

export interface CredentialWithData extends CredentialMeta {
  data?: JsonObject;
  /** Present when include_data stored a copy in the authentication cache. */
  cache?: { cache_key: string; cache_type: string; scope_type: string; execution_id: string | null; access_count: number; expires_at: string; accessed_at: string };
}

export interface CredentialRead {
  credential_id: number;
  credential_key: string;
  credential_type: string;
  data: JsonObject;
  created_at: string;
  updated_at: string;
}

export interface CredentialList {
  credentials: CredentialMeta[];
  /** Rows in this page. */
  count: number;
  /** Rows matching the filters. */
  total: number;
  limit: number;
  offset: number;
}

export interface CredentialListQuery {
  type?: string;
  tag?: string;
  q?: string;
  limit?: number;
  offset?: number;
}

export interface GetOptions {
  include_data?: boolean;
  execution_id?: unknown;
  parent_execution_id?: unknown;
}

export interface CredentialServiceOptions {
  /** Lifetime of an authentication-cache entry, extended on every access. Default 3600 s. */
  authCacheTtlSeconds?: number;
}

function toMeta(r: store.CredentialRow): CredentialMeta {
  return {
    id: Number(r.id),
    name: r.name,
    type: r.type,
    description: r.description,
    tags: r.tags,
    meta: (r.meta ?? {}) as JsonObject,
    schema: (r.schema ?? null) as JsonObject | null,
    created_at: iso(r.created_at)!,
    updated_at: iso(r.updated_at)!,
  };
}

/** oauth tokens are cached as `token`, everything else as `secret`. */
function cacheTypeOf(type: string, data: JsonObject): 'secret' | 'token' {
  return type === 'bearer' || typeof data.access_token === 'string' ? 'token' : 'secret';
}

export class CredentialService {
  private readonly authCacheTtl: number;

  constructor(
    private readonly db: Pick<Db, 'pool'>,
    private readonly cipher: Cipher,
    opts: CredentialServiceOptions = {},
  ) {
    this.authCacheTtl = opts.authCacheTtlSeconds ?? 3600;
  }

  /** Create or update by name. With a schema, data is validated first (spec rules, in order). */
  async upsert(input: CredentialInput): Promise<{ credential: CredentialMeta; created: boolean }> {
    const { name, type, description, data, schema, meta, tags } = input;
    if (typeof name !== 'string' || name.trim() === '') throw badRequest('name is required (a non-empty string)');
    if (name.length > 255) throw badRequest('name must be at most 255 characters');
    if (typeof type !== 'string' || !(CREDENTIAL_TYPES as readonly string[]).includes(type)) {
      throw badRequest(`type must be one of ${CREDENTIAL_TYPES.join(', ')}`, { field: 'type' });
    }
    if (!isPlainObject(data)) throw badRequest('data is required (an object)', { field: 'data' });
    if (description !== undefined && description !== null && typeof description !== 'string') throw badRequest('description must be a string');
    if (meta !== undefined && meta !== null && !isPlainObject(meta)) throw badRequest('meta must be an object');
    if (tags !== undefined && tags !== null && !(Array.isArray(tags) && tags.every((t) => typeof t === 'string'))) {
      throw badRequest('tags must be an array of strings');
    }
    const schemaProblem = checkSchemaShape(schema as Json | undefined);
    if (schemaProblem) throw badRequest(schemaProblem, { field: 'schema' });
    if (schema) {
      const result = validateData(data as JsonObject, schema as SchemaDefinition);
      if (!result.valid) throw new CredentialValidationError(result.errors);
    }
    const sealed = this.cipher.encrypt(data, 'credential');
    const { row, created } = await store.upsertCredential(this.db.pool, {
      name,
      type,
      data_enc: sealed,
      key_id: this.cipher.current.id,
      schema: schema ?? null,
      meta: meta ?? {},
      tags: (tags as string[] | undefined) ?? [],
      description: (description as string | undefined) ?? null,
    });
    return { credential: toMeta(row), created };
  }

  async list(q: CredentialListQuery = {}): Promise<CredentialList> {
    const limit = Math.min(Math.max(q.limit ?? 50, 1), 1000);
    const offset = Math.max(q.offset ?? 0, 0);
    const { rows, total } = await store.listCredentials(this.db.pool, { type: q.type, tag: q.tag, q: q.q, limit, offset });
    return { credentials: rows.map(toMeta), count: rows.length, total, limit, offset };
  }

  /** Metadata only unless include_data; include_data stores/refreshes the authentication cache. */
  async get(identifier: string, opts: GetOptions = {}): Promise<CredentialWithData> {
    const row = await store.findCredential(this.db.pool, identifier);
    if (!row) throw notFound(`credential '${identifier}' not found`);
    const out: CredentialWithData = toMeta(row);
    if (!opts.include_data) return out;
    const data = this.cipher.decrypt<JsonObject>(row.data_enc, 'credential');
    out.data = data;
    const executionId = optionalId(opts.execution_id, 'execution_id');
    const parentId = optionalId(opts.parent_execution_id, 'parent_execution_id');
    const scope = executionId ? 'execution' : 'global';
    const cache = await store.touchAuthCache(this.db.pool, {
      cache_key: executionId ? `${row.name}:execution:${executionId}` : `${row.name}:global`,
      credential_id: row.id,
      credential_name: row.name,
      credential_type: row.type,
      cache_type: cacheTypeOf(row.type, data),
      scope_type: scope,
      execution_id: executionId,
      parent_execution_id: parentId,
      data_enc: this.cipher.encrypt(data, 'auth_cache'),
      key_id: this.cipher.current.id,
      ttl_seconds: this.authCacheTtl,
    });
    out.cache = {
      cache_key: cache.cache_key,
      cache_type: cache.cache_type,
      scope_type: cache.scope_type,
      execution_id: cache.execution_id,
      access_count: cache.access_count,
      expires_at: iso(cache.expires_at)!,
      accessed_at: iso(cache.accessed_at)!,
    };
    return out;
  }

  /** The worker read path: decrypted data under the spec's read shape. */
  async read(credentialKey: string): Promise<CredentialRead> {
    const row = await store.findCredential(this.db.pool, credentialKey);
    if (!row) throw notFound(`credential '${credentialKey}' not found`);
    return {
      credential_id: Number(row.id),
      credential_key: row.name,
      credential_type: row.type,
      data: this.cipher.decrypt<JsonObject>(row.data_enc, 'credential'),
      created_at: iso(row.created_at)!,
      updated_at: iso(row.updated_at)!,
    };
  }

  async remove(identifier: string): Promise<{ id: number; name: string; deleted: true }> {
    const row = await store.findCredential(this.db.pool, identifier);
    if (!row || !(await store.deleteCredential(this.db.pool, row.id))) throw notFound(`credential '${identifier}' not found`);
    return { id: Number(row.id), name: row.name, deleted: true };
  }
}
