/**
 * Keychain endpoints (spec "Keychain"):
 *   GET    /api/keychain/{catalog_id}/{keychain_name}   ?execution_id ?scope_type (default global)
 *          → 200 with status success | expired | not_found (the body says which)
 *   POST   /api/keychain/{catalog_id}/{keychain_name}   store/replace → {status, message, keychain_name, catalog_id, cache_key, expires_at, ttl_seconds, auto_renew};
 *          404 for a catalog id never stored (a removed path's ids still count), 409 `execution_completed`
 *          for a local or shared entry of a completed execution (shared: its root)
 *   DELETE /api/keychain/{catalog_id}/{keychain_name}   ?execution_id ?scope_type → {status: success, message, keychain_name, catalog_id}; 404 when there was none
 *   GET    /api/keychain/catalog/{catalog_id}           → {status, catalog_id, entries: [...], count}
 * Defaults when omitted on POST: scope_type global, cache_type `token` with auto_renew else
 * `secret`, credential_type `secret`, ttl by scope (local 3600, global/shared 86400).
 */
import type { FastifyInstance } from 'fastify';
import type {} from '@fastify/swagger'; // route schema fields tags/summary for the OpenAPI document
import { errors, idInput, idParam } from './schemas.js';
import { safeName } from './support.js';
import { notFound } from '../errors.js';
import type { CatalogService } from '../services.js';
import { parseId } from '../store/sql.js';
import type { AppPlugin } from './context.js';
import { CACHE_TYPES, SCOPE_TYPES, type KeychainService } from '../secrets/keychain.js';

/** An execution id in the body: the shared IdInput (its wording in a 400), or null. */
const nullableIdInput = {
  anyOf: [...idInput.anyOf, { type: 'null' }],
  description: `${idInput.description}, or null`,
  'x-message': `${idInput['x-message']}, or null`,
};
const jsonObject = { type: 'object', additionalProperties: true };
const params = {
  type: 'object',
  required: ['catalog_id', 'keychain_name'],
  properties: { catalog_id: { type: 'string', pattern: '^[0-9]{1,19}$' }, keychain_name: safeName },
};
const scopeQuery = {
  type: 'object',
  properties: { execution_id: idParam, scope_type: { type: 'string', enum: [...SCOPE_TYPES], default: 'global' } },
};
const renewConfig = {
  type: 'object',
  additionalProperties: true,
  properties: {
    endpoint: { type: 'string' }, method: { type: 'string' }, headers: jsonObject, data: {},
    token_field: { type: 'string' }, ttl_field: { type: 'string' },
  },
};

export interface KeychainPluginOptions {
  keychain?: KeychainService;
}

type P = { catalog_id: string; keychain_name: string };
type Q = { execution_id?: string; scope_type?: string };

export async function keychainPlugin(app: FastifyInstance, opts: KeychainPluginOptions & { catalog?: Pick<CatalogService, 'getById'> }): Promise<void> {
  const svc = opts.keychain;
  if (!svc) return;
  // Entries belong to a playbook of the catalog: storing one for an id that does not exist is a
  // 404, not an orphan row. (Suites that mount the keychain without the catalog skip the check.)
  // A removed path's versions count: its running executions keep their version and go on storing
  // tokens under its id, which a read of live versions only would refuse.
  const catalog = opts.catalog;
  const requireCatalog = async (catalogId: string) => {
    if (!catalog) return;
    // an id no row can have (0, beyond int64) is not found either, not a 400 from the catalog
    if (!parseId(catalogId) || !(await catalog.getById(catalogId, { includeDeleted: true }))) throw notFound(`catalog entry ${catalogId} not found`);
  };
  const tags = ['keychain'];

  app.get<{ Params: { catalog_id: string } }>('/api/keychain/catalog/:catalog_id', {
    schema: {
      tags,
      summary: 'Keychain entries of a playbook catalog entry (no token data)',
      params: { type: 'object', properties: { catalog_id: { type: 'string', pattern: '^[0-9]{1,19}$' } } },
      response: {
        200: {
          type: 'object',
          properties: {
            status: { type: 'string' },
            catalog_id: { type: 'string' },
            entries: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  keychain_name: { type: 'string' }, cache_key: { type: 'string' }, scope_type: { type: 'string' },
                  credential_type: { type: 'string' }, expires_at: { type: 'string' }, auto_renew: { type: 'boolean' },
                  access_count: { type: 'integer' },
                },
              },
            },
            count: { type: 'integer' },
          },
        },
      },
    },
  }, async (req) => svc.listCatalog(req.params.catalog_id));

  app.get<{ Params: P; Querystring: Q }>('/api/keychain/:catalog_id/:keychain_name', {
    schema: {
      tags,
      summary: 'Read a keychain entry: status success (token_data), expired (renew_config when auto_renew) or not_found',
      params,
      querystring: scopeQuery,
      response: {
        200: {
          type: 'object',
          description: 'success: keychain_name, catalog_id, cache_key, token_data, credential_type, cache_type, scope_type, expires_at, ttl_seconds, accessed_at, access_count, auto_renew, expired=false; expired: keychain_name, catalog_id, cache_key, auto_renew, renew_config?, expired=true; not_found: keychain_name, catalog_id, cache_key',
          properties: {
            status: { type: 'string', enum: ['success', 'expired', 'not_found'] },
            keychain_name: { type: 'string' }, catalog_id: { type: 'string' }, cache_key: { type: 'string' },
            token_data: jsonObject, credential_type: { type: 'string' }, cache_type: { type: 'string' },
            scope_type: { type: 'string' }, expires_at: { type: 'string' }, ttl_seconds: { type: 'number' },
            accessed_at: { type: 'string' }, access_count: { type: 'integer' }, auto_renew: { type: 'boolean' },
            renew_config: renewConfig, expired: { type: 'boolean' },
          },
        },
        ...errors(400),
      },
    },
  }, async (req) => svc.get(req.params.catalog_id, req.params.keychain_name, req.query));

  app.post<{ Params: P; Body: Record<string, unknown> }>('/api/keychain/:catalog_id/:keychain_name', {
    schema: {
      tags,
      summary: 'Store (or replace) a keychain entry; token_data is encrypted at rest',
      params,
      body: {
        type: 'object',
        required: ['token_data'],
        properties: {
          token_data: jsonObject,
          credential_type: { type: 'string' },
          cache_type: { type: 'string', enum: [...CACHE_TYPES] },
          scope_type: { type: 'string', enum: [...SCOPE_TYPES] },
          execution_id: nullableIdInput,
          parent_execution_id: nullableIdInput,
          ttl_seconds: { type: 'integer', minimum: 0, maximum: 315_360_000, description: 'at most 10 years' },
          expires_at: { type: ['string', 'null'], description: 'ISO 8601 timestamp, e.g. 2030-01-01T00:00:00Z; UTC when it names no zone' },
          auto_renew: { type: 'boolean' },
          renew_config: renewConfig,
          schema: jsonObject,
        },
      },
      response: {
        200: {
          type: 'object',
          properties: {
            status: { type: 'string' }, message: { type: 'string' }, keychain_name: { type: 'string' },
            catalog_id: { type: 'string' }, cache_key: { type: 'string' }, expires_at: { type: 'string' },
            ttl_seconds: { type: 'number' }, auto_renew: { type: 'boolean' },
          },
        },
        ...errors(400, 404, 409),
      },
    },
  }, async (req) => {
    await requireCatalog(req.params.catalog_id);
    return svc.set(req.params.catalog_id, req.params.keychain_name, req.body);
  });

  app.delete<{ Params: P; Querystring: Q }>('/api/keychain/:catalog_id/:keychain_name', {
    schema: {
      tags,
      summary: 'Delete a keychain entry (404 when there was none)',
      params,
      querystring: scopeQuery,
      response: {
        200: {
          type: 'object',
          properties: { status: { type: 'string', enum: ['success', 'not_found'] }, message: { type: 'string' }, keychain_name: { type: 'string' }, catalog_id: { type: 'string' } },
        },
        ...errors(400, 404),
      },
    },
  }, async (req) => {
    const r = await svc.remove(req.params.catalog_id, req.params.keychain_name, req.query);
    if (r.status === 'not_found') throw notFound(r.message, { keychain_name: r.keychain_name, catalog_id: r.catalog_id });
    return r;
  });
}

export const keychainAppPlugin: AppPlugin = {
  name: 'keychain',
  tag: { name: 'keychain', description: 'Cached, expiring tokens and secrets with scopes (local, global, shared) and auto-renewal' },
  routes: (app, ctx) => keychainPlugin(app, ctx.deps),
};

export default keychainPlugin;
