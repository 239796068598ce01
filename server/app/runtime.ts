/**
 * Runtime registry of server and worker pools.
 *
 * - POST /api/runtime/register `{kind, name, info?}` → `{status: 'ok'}` (idempotent: re-registering updates info)
 * - POST /api/runtime/heartbeat `{kind, name}` → `{status: 'ok'}`; 404 when not registered (if the service says so)
 * - GET /api/runtime → `{runtimes: [{kind, name, info, registered_at, last_heartbeat}], count}`
 */
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Ref, RuntimeHeartbeatRequest, RuntimeList, RuntimeRegisterRequest, StatusOk } from '../../common/contract/index.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema } from './support.js';

const TAG = 'runtime';

export async function runtimeRoutes(fastify: FastifyInstance, { deps }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/api/runtime/register', {
    schema: routeSchema(TAG, 'Register a server or worker pool', {
      body: RuntimeRegisterRequest,
      response: { 200: Ref(StatusOk), ...errors(400) },
    }),
  }, async (req) => {
    const { kind: k, name: n, info } = req.body;
    await deps.runtime.register(info === undefined ? { kind: k, name: n } : { kind: k, name: n, info });
    return { status: 'ok' as const };
  });

  app.post('/api/runtime/heartbeat', {
    schema: routeSchema(TAG, 'Heartbeat of a registered server or worker pool', {
      body: RuntimeHeartbeatRequest,
      response: { 200: Ref(StatusOk), ...errors(400, 404) },
    }),
  }, async (req) => {
    await deps.runtime.heartbeat(req.body.kind, req.body.name);
    return { status: 'ok' as const };
  });

  app.get('/api/runtime', {
    schema: routeSchema(TAG, 'Registered servers and worker pools', { response: { 200: Ref(RuntimeList), ...errors() } }),
  }, async () => {
    const runtimes = await deps.runtime.list();
    return { runtimes, count: runtimes.length };
  });
}
