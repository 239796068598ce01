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
import {
  KeychainCatalogList, KeychainDeleteResponse, KeychainGet, KeychainParams, KeychainScopeQuery, KeychainSetBody, KeychainSetResponse, Ref, Type,
} from '../../common/contract/index.js';
import { errors } from './schemas.js';
import { notFound } from '../errors.js';
import type { CatalogService } from '../services.js';
import { parseId } from '../store/sql.js';
import type { AppPlugin } from './context.js';
import type { KeychainService } from '../secrets/keychain.js';

export interface KeychainPluginOptions {
  keychain?: KeychainService;
}

type P = { catalog_id: string; keychain_name: string };

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
      params: Type.Object({ catalog_id: KeychainParams.properties.catalog_id }),
      response: { 200: Ref(KeychainCatalogList) },
    },
  }, async (req) => svc.listCatalog(req.params.catalog_id));

  app.get<{ Params: P; Querystring: KeychainScopeQuery }>('/api/keychain/:catalog_id/:keychain_name', {
    schema: {
      tags,
      summary: 'Read a keychain entry: status success (token_data), expired (renew_config when auto_renew) or not_found',
      params: KeychainParams,
      querystring: KeychainScopeQuery,
      response: { 200: Ref(KeychainGet), ...errors(400) },
    },
  }, async (req) => svc.get(req.params.catalog_id, req.params.keychain_name, req.query));

  app.post<{ Params: P; Body: KeychainSetBody }>('/api/keychain/:catalog_id/:keychain_name', {
    schema: {
      tags,
      summary: 'Store (or replace) a keychain entry; token_data is encrypted at rest',
      params: KeychainParams,
      body: KeychainSetBody,
      response: { 200: Ref(KeychainSetResponse), ...errors(400, 404, 409) },
    },
  }, async (req) => {
    await requireCatalog(req.params.catalog_id);
    return svc.set(req.params.catalog_id, req.params.keychain_name, req.body);
  });

  app.delete<{ Params: P; Querystring: KeychainScopeQuery }>('/api/keychain/:catalog_id/:keychain_name', {
    schema: {
      tags,
      summary: 'Delete a keychain entry (404 when there was none)',
      params: KeychainParams,
      querystring: KeychainScopeQuery,
      response: { 200: Ref(KeychainDeleteResponse), ...errors(400, 404) },
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
