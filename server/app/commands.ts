/**
 * Worker command protocol (common/contract/worker.ts):
 *
 * - POST /api/v2/commands/{queue_id}/claim `{worker_id, lease_seconds?}` → 200 ClaimedCommand;
 *   409 `already_claimed`, 410 `finished`, 404 unknown queue_id, 425 `not_due`.
 * - POST /api/v2/commands/{queue_id}/heartbeat `{worker_id, lease_token?, lease_seconds?}` → 200
 *   `{lease_until}`; 409 not the owner, 410 finished, 404 unknown.
 * - POST /api/v2/commands/{queue_id}/release `{worker_id}` → `{released}`: a worker whose claim went
 *   unanswered ends the lease it may hold, so the command is queued again now; 0 when it holds none.
 * - POST /api/v2/workers/{worker_id}/release → `{released}`: a worker starting ends the leases
 *   its id still holds from a previous process, so their commands run again now rather than when
 *   the leases run out.
 *
 * The bodies are validated here against the contract; the execution service trusts them.
 */
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ClaimedCommand, ClaimRequest, HeartbeatRequest, HeartbeatResponse, IdParam, Ref, ReleaseLeaseRequest, ReleaseLeasesResponse, Type, WorkerParams } from '../../common/contract/index.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema, toId } from './support.js';

const TAG = 'commands';

const QueueParams = Type.Object({ queue_id: IdParam() });

export async function commandRoutes(fastify: FastifyInstance, { deps }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/api/v2/commands/:queue_id/claim', {
    schema: routeSchema(TAG, 'Claim (lease) a command announced on the broker', {
      params: QueueParams,
      body: ClaimRequest,
      response: { 200: Ref(ClaimedCommand), ...errors(400, 404, 409, 410, 425) },
    }),
  }, async (req) => deps.executions.claim(toId(req.params.queue_id, 'queue_id'), req.body));

  app.post('/api/v2/commands/:queue_id/heartbeat', {
    schema: routeSchema(TAG, "Extend a claimed command's lease", {
      params: QueueParams,
      body: HeartbeatRequest,
      response: { 200: Ref(HeartbeatResponse), ...errors(400, 404, 409, 410) },
    }),
  }, async (req) => deps.executions.heartbeat(toId(req.params.queue_id, 'queue_id'), req.body));

  app.post('/api/v2/commands/:queue_id/release', {
    schema: routeSchema(TAG, 'End a lease this worker holds (its claim went unanswered), so the command is queued again now', {
      params: QueueParams,
      body: ReleaseLeaseRequest,
      response: { 200: Ref(ReleaseLeasesResponse), ...errors(400, 404) },
    }),
  }, async (req) => deps.executions.releaseLease(toId(req.params.queue_id, 'queue_id'), req.body));

  app.post('/api/v2/workers/:worker_id/release', {
    schema: routeSchema(TAG, 'End the leases a worker id holds (the worker restarted)', {
      params: WorkerParams,
      response: { 200: Ref(ReleaseLeasesResponse), ...errors(400) },
    }),
  }, async (req) => deps.executions.releaseWorker(req.params.worker_id));
}
