/**
 * Worker command protocol (client/protocol.ts):
 *
 * - POST /api/v2/commands/{queue_id}/claim `{worker_id, lease_seconds?}` → 200 ClaimedCommand;
 *   409 `already_claimed`, 410 `finished`, 404 unknown queue_id, 425 `not_due`.
 * - POST /api/v2/commands/{queue_id}/heartbeat `{worker_id, lease_seconds?}` → 200
 *   `{lease_until}`; 409 not the owner, 410 finished, 404 unknown.
 */
import type { FastifyInstance } from 'fastify';
import type { ClaimRequest, HeartbeatRequest } from '../../client/protocol.js';
import type { AppContext } from './context.js';
import { errors, idParam, ref } from './schemas.js';
import { routeSchema, toId } from './support.js';

const TAG = 'commands';

const leaseBody = {
  type: 'object',
  required: ['worker_id'],
  properties: {
    worker_id: { type: 'string', minLength: 1, maxLength: 256 },
    lease_seconds: { type: 'integer', minimum: 1, maximum: 86400, description: 'lease asked for (the server caps it); default 60' },
  },
} as const;
const queueParams = { type: 'object', required: ['queue_id'], properties: { queue_id: idParam } } as const;

export async function commandRoutes(app: FastifyInstance, { deps }: AppContext) {
  app.post<{ Params: { queue_id: string }; Body: ClaimRequest }>('/api/v2/commands/:queue_id/claim', {
    schema: routeSchema(TAG, 'Claim (lease) a command announced on the broker', {
      params: queueParams,
      body: leaseBody,
      response: { 200: ref('ClaimedCommand'), ...errors(400, 404, 409, 410, 425) },
    }),
  }, async (req) => deps.executions.claim(toId(req.params.queue_id, 'queue_id'), req.body));

  app.post<{ Params: { queue_id: string }; Body: HeartbeatRequest }>('/api/v2/commands/:queue_id/heartbeat', {
    schema: routeSchema(TAG, "Extend a claimed command's lease", {
      params: queueParams,
      body: leaseBody,
      response: { 200: ref('HeartbeatResponse'), ...errors(400, 404, 409, 410) },
    }),
  }, async (req) => deps.executions.heartbeat(toId(req.params.queue_id, 'queue_id'), req.body));
}
