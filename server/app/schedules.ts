/**
 * Schedules (server/schedules):
 * - GET    /api/schedules?path=&source=     → {schedules, count}
 * - GET    /api/schedules/{name}            → the schedule (cron, policies, next_run, last_run, last_execution_id)
 * - PUT    /api/schedules/{name}            ScheduleSpec → 201 created / 200 replaced. 400 names the bad
 *   field; 409 `owned_elsewhere` when another source (playbook, kubernetes) declared that name.
 * - DELETE /api/schedules/{name}?source=    → {name, deleted: true}; 404; 409 as for PUT
 * - GET    /api/schedules/{name}/ticks?limit= → every decided tick, newest first (started, skipped, missed, failed)
 */
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  ScheduleDeleted, ScheduleList, ScheduleListQuery, ScheduleParams, ScheduleSourceQuery, ScheduleSpec, ScheduleTicks, ScheduleTicksQuery, ScheduleView,
} from '../../common/contract/index.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema } from './support.js';

const TAG = 'schedules';

export async function scheduleRoutes(fastify: FastifyInstance, { deps }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const svc = deps.schedules;
  if (!svc) return;

  app.get('/api/schedules', {
    schema: routeSchema(TAG, 'List schedules by name', {
      querystring: ScheduleListQuery,
      response: { 200: ScheduleList, ...errors(400) },
    }),
  }, async (req) => svc.list({ path: req.query.path || undefined, source: req.query.source }));

  app.get('/api/schedules/:name', {
    schema: routeSchema(TAG, 'A schedule with its next and last run', { params: ScheduleParams, response: { 200: ScheduleView, ...errors(400, 404) } }),
  }, async (req) => svc.get(req.params.name));

  app.put('/api/schedules/:name', {
    schema: routeSchema(TAG, 'Create or replace a schedule: cron (seconds optional) in a time zone, playbook path (version optional), payload, policies', {
      params: ScheduleParams,
      body: ScheduleSpec,
      response: { 200: ScheduleView, 201: ScheduleView, ...errors(400, 409) },
    }),
  }, async (req, reply) => {
    const { schedule, created } = await svc.put(req.params.name, req.body);
    return reply.code(created ? 201 : 200).send(schedule);
  });

  app.delete('/api/schedules/:name', {
    schema: routeSchema(TAG, 'Delete a schedule (as its source: api by default, kubernetes for the operator)', {
      params: ScheduleParams,
      querystring: ScheduleSourceQuery,
      response: { 200: ScheduleDeleted, ...errors(400, 404, 409) },
    }),
  }, async (req) => {
    await svc.remove(req.params.name, req.query.source ?? 'api');
    return { name: req.params.name, deleted: true };
  });

  app.get('/api/schedules/:name/ticks', {
    schema: routeSchema(TAG, 'Decided ticks of a schedule, newest first: started (with its execution), skipped, missed, failed', {
      params: ScheduleParams,
      querystring: ScheduleTicksQuery,
      response: { 200: ScheduleTicks, ...errors(400, 404) },
    }),
  }, async (req) => svc.ticks(req.params.name, req.query.limit));
}
