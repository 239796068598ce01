/**
 * Credential service: encrypted storage of static authentication data, schema validation, the
 * worker read path (GET /api/credential/{key}) and the authentication cache filled by
 * include_data reads. Decrypted data leaves this module only as a return value of the read
 * paths; it is never logged.
 */
import { AppError, badRequest, notFound } from '../errors.js';
import type { Db } from '../db.js';
import type { Cipher } from '../crypto.js';
import type { Json, JsonObject } from '../../playbook/types.js';
import * as store from '../store/credentials.js';
import type { ResourceOwner } from '../../common/protocol.js';
import { checkClaim, parseOwner } from '../ownership.js';
import { checkSchemaShape, validateData, type SchemaDefinition } from './schema.js';
import { iso, isPlainObject, optionalId, parseId } from './common.js';
import { charLength } from '../../common/char-length.js';
import { describeScope, parseScope, scopeAllows } from './scope.js';
import { CREDENTIAL_TYPES, type CredentialType, type CredentialMeta, type CredentialWithData, type CredentialRead, type CredentialList, type CredentialListQuery, type CredentialUpsertBody, type Unchecked } from '../../common/secrets.js';
export { CREDENTIAL_TYPES, type CredentialType, type CredentialMeta, type CredentialWithData, type CredentialRead, type CredentialList, type CredentialListQuery };

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

/** A create-or-update body as it arrives (the contract's CredentialUpsertBody, checked again here). */
export type CredentialInput = Unchecked<CredentialUpsertBody>;

/**
 * Proof that the reader is the worker running a command: the command's queue_id and the
 * worker_id + lease_token of its claim. The credential read path serves data only to the lease
 * holder, and only for a command whose playbook is in the credential's scope.
 */
export interface LeaseProof {
  queue_id: string;
  worker_id: string;
  lease_token: string;
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
    ...(r.owner ? { owner: r.owner } : {}),
    scope: r.scope ?? null,
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
    const owner = parseOwner(input.owner);
    if (input.adopt !== undefined && typeof input.adopt !== 'boolean') throw badRequest('adopt must be a boolean', { field: 'adopt' });
    if (input.adopt === true && !owner) throw badRequest("adopt needs owner: only a resource can adopt what it stored", { field: 'adopt' });
    if (typeof name !== 'string' || name.trim() === '') throw badRequest('name is required (a non-empty string)');
    if (charLength(name) > 255) throw badRequest('name must be at most 255 characters');
    if (typeof type !== 'string' || !(CREDENTIAL_TYPES as readonly string[]).includes(type)) {
      throw badRequest(`type must be one of ${CREDENTIAL_TYPES.join(', ')}`, { field: 'type' });
    }
    if (!isPlainObject(data)) throw badRequest('data is required (an object)', { field: 'data' });
    if (description !== undefined && description !== null && typeof description !== 'string') throw badRequest('description must be a string');
    if (meta !== undefined && meta !== null && !isPlainObject(meta)) throw badRequest('meta must be an object');
    if (tags !== undefined && tags !== null && !(Array.isArray(tags) && tags.every((t) => typeof t === 'string'))) {
      throw badRequest('tags must be an array of strings');
    }
    const scope = parseScope(input.scope);
    const schemaProblem = checkSchemaShape(schema as Json | undefined);
    if (schemaProblem) throw badRequest(schemaProblem, { field: 'schema' });
    if (schema) {
      const result = validateData(data as JsonObject, schema as SchemaDefinition);
      if (!result.valid) throw new CredentialValidationError(result.errors);
    }
    const sealed = this.cipher.encrypt(data, 'credential');
    const written = await store.upsertCredential(this.db.pool, {
      name,
      type,
      data_enc: sealed,
      key_id: this.cipher.current.id,
      schema: schema ?? null,
      meta: meta ?? {},
      tags: (tags as string[] | undefined) ?? [],
      description: (description as string | undefined) ?? null,
      owner: owner ?? null,
      scope,
      adopt: input.adopt === true,
    });
    if (!written) {
      const holder = await store.findCredentialByName(this.db.pool, name);
      checkClaim(`credential '${name}'`, holder?.owner, owner);
      throw new AppError(409, 'conflict', `credential '${name}' changed owner while being written; retry`);
    }
    const { row, created } = written;
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
    const row = await store.findCredentialByNameOrId(this.db.pool, identifier);
    if (!row) throw notFound(`credential '${identifier}' not found`);
    const out: CredentialWithData = toMeta(row);
    if (!opts.include_data) return out;
    // A scoped credential's data goes only to the worker holding a command of an allowed playbook.
    if (row.scope) {
      throw new AppError(403, 'credential_scoped', `credential '${row.name}' is scoped (${describeScope(row.scope)}): its data is served only to a worker holding the lease of a command of an allowed playbook, not with include_data`);
    }
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

  /**
   * The worker read path: decrypted data under the spec's read shape. With `lease`, only for the
   * holder of that command's lease (409 `not_lease_holder`) and only when the command's playbook
   * is in the credential's scope (403 `credential_not_allowed`, naming credential and path). A
   * scoped credential is never served without a lease (403 `credential_scoped`).
   */
  async read(credentialKey: string, lease?: LeaseProof): Promise<CredentialRead> {
    // The lease first: a non-holder learns nothing, not even whether the credential exists.
    const cmd = lease ? await this.leasedCommand(lease) : undefined;
    // The key is a credential's name (spec: auth references name credentials), never an id.
    const row = await store.findCredentialByName(this.db.pool, credentialKey);
    if (!row) throw notFound(`credential '${credentialKey}' not found`);
    if (row.scope && !cmd) {
      throw new AppError(403, 'credential_scoped', `credential '${row.name}' is scoped (${describeScope(row.scope)}): it is served only with the queue_id, worker_id and lease_token of a command of an allowed playbook`);
    }
    if (row.scope && cmd && !scopeAllows(row.scope, { path: cmd.path, namespace: cmd.namespace })) {
      throw new AppError(403, 'credential_not_allowed',
        `credential '${row.name}' may not be used by playbook '${cmd.path}'${cmd.namespace ? ` (namespace ${cmd.namespace})` : ''}: its scope allows ${describeScope(row.scope)}`,
        { credential: row.name, path: cmd.path, namespace: cmd.namespace });
    }
    return {
      credential_id: Number(row.id),
      credential_key: row.name,
      credential_type: row.type,
      data: this.cipher.decrypt<JsonObject>(row.data_enc, 'credential'),
      created_at: iso(row.created_at)!,
      updated_at: iso(row.updated_at)!,
    };
  }

  private async leasedCommand(lease: LeaseProof): Promise<store.CommandLease> {
    const queueId = parseId(lease.queue_id, 'queue_id');
    const cmd = await store.commandLease(this.db.pool, queueId);
    if (!cmd) throw notFound(`queue entry ${queueId} not found`);
    if (cmd.status !== 'leased' || cmd.worker_id !== lease.worker_id || cmd.lease_token === null || cmd.lease_token !== lease.lease_token) {
      throw new AppError(409, 'not_lease_holder', `queue entry ${queueId} is not leased to worker '${lease.worker_id}' under this lease_token; its credentials are refused`, { status: cmd.status });
    }
    return cmd;
  }

  /** With `owner`, only when that owner holds the credential (409 otherwise). */
  async remove(identifier: string, owner?: ResourceOwner): Promise<{ id: number; name: string; deleted: true }> {
    const row = await store.findCredentialByNameOrId(this.db.pool, identifier);
    if (row && owner) checkClaim(`credential '${row.name}'`, row.owner, owner);
    if (!row || !(await store.deleteCredential(this.db.pool, row.id))) throw notFound(`credential '${identifier}' not found`);
    return { id: Number(row.id), name: row.name, deleted: true };
  }
}
