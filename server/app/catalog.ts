/**
 * Catalog: register, read, list and remove playbooks.
 *
 * - POST /api/catalog/playbook `{content, path?}` → 201 `{catalog_id, path, version, created:
 *   true, warnings}` for a new version; 200 with `created: false` and the existing version when
 *   the content is identical to the latest one. 422 `playbook_invalid` with every problem
 *   `{path, message, severity}` in `details`.
 * - GET /api/catalog/playbook/{path}?version= → the entry with its content and the normalised
 *   playbook (the path keeps its slashes: wildcard route). 404 unknown path or version.
 * - GET /api/catalog/playbooks?prefix=&limit=&offset= → `{playbooks, count, limit, offset}`.
 * - GET /api/catalog/versions?paths=a,b → `{versions: [{path, version, owner}]}`: the latest live
 *   version of each known path, without content (the operator's drift check asks for hundreds).
 * - DELETE /api/catalog/playbook/{path}[?owner=Kind/ns/name] → 200 `{status: 'deleted', path}`;
 *   404; with `owner`, 409 `owned_by_other` when another owner holds the path.
 * - Ownership (issue 14): `owner` in the registration body claims the path; 409 `owned_by_other`
 *   when a different resource or an API client holds it (server/ownership.ts). `adopt_version`
 *   (with `owner`) claims a path without owner whose latest version is that one: what the same
 *   resource registered through an operator from before ownership (upgrade adoption).
 * - GET /api/catalog/versions/{path} → `{path, versions: [{catalog_id, version, created_at}]}`,
 *   newest first (the console's version picker and diff). 404 when no version is live.
 */
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { parsePlaybook } from '../../playbook/index.js';
import type { JsonObject } from '../../playbook/types.js';
import { validateSpec } from '../schedules/service.js';
import {
  CatalogEntryView, CatalogVersions, CatalogVersionsView, DeletePlaybookResponse, PlaybookList, PlaybookListQuery, Ref, RegisterPlaybookRequest,
  RegisterPlaybookResponse, Type,
} from '../../common/contract/index.js';
import { badRequest, notFound } from '../errors.js';
import { parseOwner, parseOwnerRef } from '../ownership.js';
import type { RegisterAlongside, RemoveAlongside } from '../services.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema } from './support.js';
import { checkCatalogPath } from '../store/catalog-service.js';

const TAG = 'catalog';
/** Paths per versions request (one indexed query); the operator sends batches of 100. */
const MAX_VERSION_PATHS = 500;

const PathParam = Type.Object({ '*': Type.Optional(Type.String({ description: 'catalog path, slashes included (e.g. examples/http/weather)' })) });

/** `/a/b/` → `a/b` for a lookup; empty or not a catalog path (`..`, `a//b`) → 400. */
function catalogPath(raw: string | undefined): string {
  const p = (raw ?? '').replace(/^\/+|\/+$/g, '');
  if (!p) throw badRequest("path parameter field 'path' is required: /api/catalog/playbook/<path>");
  const bad = checkCatalogPath(p);
  if (bad) throw badRequest(`path parameter field 'path': ${bad}`);
  return p;
}

export async function catalogRoutes(fastify: FastifyInstance, { deps }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/api/catalog/playbook', {
    schema: routeSchema(TAG, 'Register a playbook (new version unless the content is unchanged)', {
      body: RegisterPlaybookRequest,
      response: {
        200: Ref(RegisterPlaybookResponse, { description: 'identical content: the existing version' }),
        201: Ref(RegisterPlaybookResponse, { description: 'a new version was stored' }),
        ...errors(400, 409, 422),
      },
    }),
  }, async (req, reply) => {
    // stored as given: '/etc/passwd' is refused by the catalog (no leading '/'), never rewritten
    // a playbook's schedules are checked before anything is stored (400 naming schedules[i].field);
    // their names and owners need the stored path: checked in the registration's transaction below
    const declared = deps.schedules ? parsePlaybook(req.body.content).playbook?.schedules ?? [] : [];
    declared.forEach((d, i) => validateSpec({ ...d, path: req.body.path ?? 'x' }, `schedules[${i}].`));
    if (req.body.adopt_version !== undefined && !req.body.owner) {
      throw badRequest("body field 'adopt_version' needs 'owner': only a resource can adopt what it registered", { field: 'adopt_version' });
    }
    // The declared schedules are synced in the registration's transaction: a 400 (`<path>:<name>`
    // too long) or 409 (the name is another source's) there stores no version either.
    const schedules = deps.schedules;
    const syncSchedules: RegisterAlongside | undefined = schedules && (async (client, entry) => {
      await schedules.syncPlaybook(entry.path, (entry.playbook.schedules ?? []).map((d) => ({ ...d, path: entry.path })), client);
    });
    const r = await deps.catalog.register(req.body.content, req.body.path, parseOwner(req.body.owner), req.body.adopt_version, syncSchedules);
    return reply.code(r.created ? 201 : 200).send({
      catalog_id: r.entry.catalog_id,
      path: r.entry.path,
      version: r.entry.version,
      created: r.created,
      warnings: r.warnings,
      ...(r.entry.owner ? { owner: r.entry.owner } : {}),
    });
  });

  app.get('/api/catalog/versions', {
    schema: routeSchema(TAG, 'Latest version and owner of each path (no content); unknown paths are left out', {
      querystring: Type.Object({ paths: Type.String({ minLength: 1, description: `comma-separated catalog paths (at most ${MAX_VERSION_PATHS})` }) }),
      response: { 200: CatalogVersionsView, ...errors(400) },
    }),
  }, async (req) => {
    const paths = [...new Set(req.query.paths.split(',').map((p) => p.replace(/^\/+|\/+$/g, '')).filter(Boolean))];
    if (paths.length > MAX_VERSION_PATHS) throw badRequest(`query field 'paths' lists ${paths.length} paths; at most ${MAX_VERSION_PATHS} per request`, { field: 'paths' });
    return { versions: await deps.catalog.versions(paths) };
  });

  app.get('/api/catalog/playbook/*', {
    schema: routeSchema(TAG, 'Get a playbook (latest version unless ?version=)', {
      params: PathParam,
      querystring: Type.Object({ version: Type.Optional(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'a specific version' })) }),
      response: { 200: Ref(CatalogEntryView), ...errors(400, 404) },
    }),
  }, async (req) => {
    const path = catalogPath(req.params['*']);
    const entry = await deps.catalog.get(path, req.query.version);
    if (!entry) {
      throw notFound(
        req.query.version !== undefined ? `playbook '${path}' version ${req.query.version} not found` : `playbook '${path}' not found`,
        { path, ...(req.query.version !== undefined ? { version: req.query.version } : {}) },
      );
    }
    // the normalised playbook is published as a plain JSON object
    return { ...entry, playbook: entry.playbook as unknown as JsonObject };
  });

  app.get('/api/catalog/playbooks', {
    schema: routeSchema(TAG, 'List playbooks (latest version of each path)', {
      querystring: PlaybookListQuery,
      response: { 200: Ref(PlaybookList), ...errors(400) },
    }),
  }, async (req) => {
    const { prefix, limit, offset } = req.query;
    const playbooks = await deps.catalog.list({ prefix: prefix || undefined, limit, offset });
    return { playbooks, count: playbooks.length, limit, offset };
  });

  app.get('/api/catalog/versions/*', {
    schema: routeSchema(TAG, 'Versions of a playbook path, newest first', {
      params: PathParam,
      response: { 200: Ref(CatalogVersions), ...errors(400, 404) },
    }),
  }, async (req) => {
    const path = catalogPath(req.params['*']);
    const versions = await deps.catalog.history(path);
    if (versions.length === 0) throw notFound(`playbook '${path}' not found`, { path });
    return { path, versions };
  });

  app.delete('/api/catalog/playbook/*', {
    schema: routeSchema(TAG, 'Remove a playbook path from the catalog (running executions keep their version)', {
      params: PathParam,
      querystring: Type.Object({ owner: Type.Optional(Type.String({ description: 'Kind/namespace/name: remove only when this resource owns the path (409 otherwise)' })) }),
      response: { 200: DeletePlaybookResponse, ...errors(400, 404, 409) },
    }),
  }, async (req) => {
    const path = catalogPath(req.params['*']);
    // its declared schedules go with it, in the removal's transaction: never a schedule left
    // starting a removed path, nor a path kept while its schedules went
    const schedules = deps.schedules;
    const dropSchedules: RemoveAlongside | undefined = schedules && (async (client, removed) => { await schedules.syncPlaybook(removed, [], client); });
    if (!(await deps.catalog.remove(path, parseOwnerRef(req.query.owner), dropSchedules))) throw notFound(`playbook '${path}' not found`, { path });
    return { status: 'deleted' as const, path };
  });
}
