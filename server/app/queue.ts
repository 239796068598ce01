/** GET /api/queue/stats → QueueStats `{queued, leased, delayed, oldest_age_seconds}` (the operator scales workers on it). */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from './context.js';
import { errors, ref } from './schemas.js';
import { routeSchema } from './support.js';

export async function queueRoutes(app: FastifyInstance, { deps }: AppContext) {
  app.get('/api/queue/stats', {
    schema: routeSchema('queue', 'Queue depth and age of the oldest due command', {
      response: { 200: ref('QueueStats'), ...errors() },
    }),
  }, async () => deps.queue.stats());
}
