/**
 * Runtime registry of server and worker pools.
 *
 * - POST /api/runtime/register `{kind, name, info?}` → `{status: 'ok'}` (idempotent: re-registering updates info)
 * - POST /api/runtime/heartbeat `{kind, name}` → `{status: 'ok'}`; 404 when not registered (if the service says so)
 * - GET /api/runtime → `{runtimes: [{kind, name, info, registered_at, last_heartbeat}], count}`
 */
import type { FastifyInstance } from 'fastify';
import type { RuntimeHeartbeatRequest, RuntimeRegisterRequest } from '../../client/protocol.js';
import type { AppContext } from './context.js';
import { errors, jsonObject, ref } from './schemas.js';
import { routeSchema } from './support.js';

const TAG = 'runtime';
const kind = { type: 'string', enum: ['server', 'worker'] } as const;
const name = { type: 'string', minLength: 1, maxLength: 256 } as const;

export async function runtimeRoutes(app: FastifyInstance, { deps }: AppContext) {
  app.post<{ Body: RuntimeRegisterRequest }>('/api/runtime/register', {
    schema: routeSchema(TAG, 'Register a server or worker pool', {
      body: { type: 'object', required: ['kind', 'name'], properties: { kind, name, info: jsonObject } },
      response: { 200: ref('StatusOk'), ...errors(400) },
    }),
  }, async (req) => {
    const { kind: k, name: n, info } = req.body;
    await deps.runtime.register(info === undefined ? { kind: k, name: n } : { kind: k, name: n, info });
    return { status: 'ok' };
  });

  app.post<{ Body: RuntimeHeartbeatRequest }>('/api/runtime/heartbeat', {
    schema: routeSchema(TAG, 'Heartbeat of a registered server or worker pool', {
      body: { type: 'object', required: ['kind', 'name'], properties: { kind, name } },
      response: { 200: ref('StatusOk'), ...errors(400, 404) },
    }),
  }, async (req) => {
    await deps.runtime.heartbeat(req.body.kind, req.body.name);
    return { status: 'ok' };
  });

  app.get('/api/runtime', {
    schema: routeSchema(TAG, 'Registered servers and worker pools', { response: { 200: ref('RuntimeList'), ...errors() } }),
  }, async () => {
    const runtimes = await deps.runtime.list();
    return { runtimes, count: runtimes.length };
  });
}
