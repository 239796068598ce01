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
 * - DELETE /api/catalog/playbook/{path} → 200 `{status: 'deleted', path}`; 404.
 */
import type { FastifyInstance } from 'fastify';
import type { RegisterPlaybookRequest } from '../../client/protocol.js';
import { badRequest, notFound } from '../errors.js';
import type { AppContext } from './context.js';
import { errors, limitQuery, offsetQuery, ref } from './schemas.js';
import { routeSchema } from './support.js';

const TAG = 'catalog';

const pathParam = {
  type: 'object',
  properties: { '*': { type: 'string', description: 'catalog path, slashes included (e.g. examples/http/weather)' } },
} as const;

/** `/a/b/` → `a/b`; empty → 400. */
function catalogPath(raw: string | undefined): string {
  const p = (raw ?? '').replace(/^\/+|\/+$/g, '');
  if (!p) throw badRequest("path parameter field 'path' is required: /api/catalog/playbook/<path>");
  return p;
}

export async function catalogRoutes(app: FastifyInstance, { deps }: AppContext) {
  app.post<{ Body: RegisterPlaybookRequest }>('/api/catalog/playbook', {
    schema: routeSchema(TAG, 'Register a playbook (new version unless the content is unchanged)', {
      body: {
        type: 'object',
        required: ['content'],
        properties: {
          content: { type: 'string', minLength: 1, description: 'playbook YAML' },
          path: { type: 'string', minLength: 1, maxLength: 1024, description: 'catalog path; default metadata.path, else metadata.name' },
        },
      },
      response: {
        200: { ...ref('RegisterPlaybookResponse'), description: 'identical content: the existing version' },
        201: { ...ref('RegisterPlaybookResponse'), description: 'a new version was stored' },
        ...errors(400, 422),
      },
    }),
  }, async (req, reply) => {
    const path = req.body.path?.replace(/^\/+|\/+$/g, '') || undefined;
    const r = await deps.catalog.register(req.body.content, path);
    return reply.code(r.created ? 201 : 200).send({
      catalog_id: r.entry.catalog_id,
      path: r.entry.path,
      version: r.entry.version,
      created: r.created,
      warnings: r.warnings,
    });
  });

  app.get<{ Params: { '*': string }; Querystring: { version?: number } }>('/api/catalog/playbook/*', {
    schema: routeSchema(TAG, 'Get a playbook (latest version unless ?version=)', {
      params: pathParam,
      querystring: {
        type: 'object',
        properties: { version: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'a specific version' } },
      },
      response: { 200: ref('CatalogEntry'), ...errors(400, 404) },
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
    return entry;
  });

  app.get<{ Querystring: { prefix?: string; limit: number; offset: number } }>('/api/catalog/playbooks', {
    schema: routeSchema(TAG, 'List playbooks (latest version of each path)', {
      querystring: {
        type: 'object',
        properties: {
          prefix: { type: 'string', description: 'only paths starting with this' },
          limit: limitQuery(100, 1000),
          offset: offsetQuery,
        },
      },
      response: { 200: ref('PlaybookList'), ...errors(400) },
    }),
  }, async (req) => {
    const { prefix, limit, offset } = req.query;
    const playbooks = await deps.catalog.list({ prefix: prefix || undefined, limit, offset });
    return { playbooks, count: playbooks.length, limit, offset };
  });

  app.delete<{ Params: { '*': string } }>('/api/catalog/playbook/*', {
    schema: routeSchema(TAG, 'Remove a playbook path from the catalog (running executions keep their version)', {
      params: pathParam,
      response: {
        200: {
          type: 'object',
          required: ['status', 'path'],
          properties: { status: { type: 'string', enum: ['deleted'] }, path: { type: 'string' } },
        },
        ...errors(400, 404),
      },
    }),
  }, async (req) => {
    const path = catalogPath(req.params['*']);
    if (!(await deps.catalog.remove(path))) throw notFound(`playbook '${path}' not found`, { path });
    return { status: 'deleted', path };
  });
}
