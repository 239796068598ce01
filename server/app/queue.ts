/**
 * Queue statistics.
 *
 * - GET /api/queue/stats?pool= → QueueStats `{queued, leased, delayed, oldest_age_seconds}` of
 *   every pool or of one (the operator scales each WorkerPool on its own pool's depth).
 * - GET /api/queue/throughput?minutes= → `{minutes: [{minute, done, failed}]}`: commands finished
 *   per minute over the last `minutes` (default 15), oldest first (the console's chart).
 */
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { QueueStats, QueueStatsQuery, QueueThroughput, QueueThroughputQuery, Ref } from '../../common/contract/index.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema } from './support.js';

export async function queueRoutes(fastify: FastifyInstance, { deps }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/api/queue/stats', {
    schema: routeSchema('queue', 'Queue depth and age of the oldest due command, of every worker pool or of one', {
      querystring: QueueStatsQuery,
      response: { 200: Ref(QueueStats), ...errors(400) },
    }),
  }, async (req) => deps.queue.stats(req.query.pool));

  app.get('/api/queue/throughput', {
    schema: routeSchema('queue', 'Commands finished per minute over the last minutes', {
      querystring: QueueThroughputQuery,
      response: { 200: Ref(QueueThroughput), ...errors(400) },
    }),
  }, async (req) => deps.queue.throughput(req.query.minutes));
}
