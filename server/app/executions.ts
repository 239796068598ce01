/**
 * Executions: start, read, list, cancel.
 *
 * - POST /api/run/playbook and POST /api/v2/execute (same behaviour) `{path, payload?, version?,
 *   parent_execution_id?, parent_queue_id?}` → **201** `{execution_id, status: 'started', path,
 *   version, commands}` (an execution is created every time). 404 unknown path (or version),
 *   400 payload not an object.
 * - GET /api/execution/{id} → the execution record (status, path, version, timestamps, per-step
 *   state, result, error). 404 unknown, 400 non-numeric id.
 * - GET /api/executions?status=&path=&limit=&offset= → `{executions, count, limit, offset}`.
 * - POST /api/execution/{id}/cancel → the execution after cancelling (a finished execution is
 *   returned unchanged). 404 unknown.
 */
import type { FastifyInstance } from 'fastify';
import type { RunRequest } from '../../client/protocol.js';
import type { ExecutionStatus } from '../engine/contract.js';
import { notFound } from '../errors.js';
import type { AppContext } from './context.js';
import { EXECUTION_STATUSES, errors, idInput, idParam, jsonObject, limitQuery, offsetQuery, ref } from './schemas.js';
import { routeSchema, toId } from './support.js';

const TAG = 'executions';

export const runBodySchema = {
  type: 'object',
  required: ['path'],
  properties: {
    path: { type: 'string', minLength: 1, description: 'catalog path of the playbook' },
    payload: { ...jsonObject, description: 'input of the execution (an object); default {}' },
    version: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'catalog version; default the latest' },
    parent_execution_id: { ...idInput, description: 'set by a worker running a playbook tool' },
    parent_queue_id: { ...idInput, description: "the parent's command (queue_id) a child execution answers" },
  },
} as const;

export const idParams = { type: 'object', required: ['id'], properties: { id: idParam } } as const;

export async function executionRoutes(app: FastifyInstance, { deps }: AppContext) {
  const start = async (body: RunRequest) => {
    const req: RunRequest = { path: body.path.replace(/^\/+|\/+$/g, ''), payload: body.payload ?? {} };
    if (body.version !== undefined) req.version = body.version;
    if (body.parent_execution_id !== undefined) req.parent_execution_id = toId(body.parent_execution_id, 'parent_execution_id');
    if (body.parent_queue_id !== undefined) req.parent_queue_id = toId(body.parent_queue_id, 'parent_queue_id');
    return deps.executions.start(req);
  };

  for (const url of ['/api/run/playbook', '/api/v2/execute']) {
    app.post<{ Body: RunRequest }>(url, {
      schema: routeSchema(TAG, url === '/api/v2/execute'
        ? 'Start an execution (v2); its first commands are queued and published'
        : 'Run a playbook: start an execution', {
        body: runBodySchema,
        response: { 201: ref('RunResponse'), ...errors(400, 404) },
      }),
    }, async (req, reply) => reply.code(201).send(await start(req.body)));
  }

  app.get<{ Params: { id: string } }>('/api/execution/:id', {
    schema: routeSchema(TAG, 'Execution status: steps, result, error, timestamps', {
      params: idParams,
      response: { 200: ref('Execution'), ...errors(400, 404) },
    }),
  }, async (req) => {
    const id = toId(req.params.id, 'id');
    const ex = await deps.executions.get(id);
    if (!ex) throw notFound(`execution ${id} not found`, { execution_id: id });
    return ex;
  });

  app.get<{ Querystring: { status?: ExecutionStatus; path?: string; limit: number; offset: number } }>('/api/executions', {
    schema: routeSchema(TAG, 'List executions, newest first', {
      querystring: {
        type: 'object',
        properties: {
          status: { type: 'string', enum: [...EXECUTION_STATUSES] },
          path: { type: 'string', description: 'catalog path' },
          limit: limitQuery(50, 500),
          offset: offsetQuery,
        },
      },
      response: { 200: ref('ExecutionList'), ...errors(400) },
    }),
  }, async (req) => {
    const { status, path, limit, offset } = req.query;
    const executions = await deps.executions.list({ status, path: path || undefined, limit, offset });
    return { executions, count: executions.length, limit, offset };
  });

  app.post<{ Params: { id: string } }>('/api/execution/:id/cancel', {
    schema: routeSchema(TAG, 'Cancel an execution: queued commands are dropped, running ones finish unheeded', {
      params: idParams,
      response: { 200: ref('Execution'), ...errors(400, 404) },
    }),
  }, async (req) => {
    const id = toId(req.params.id, 'id');
    return deps.executions.cancel(id);
  });
}
