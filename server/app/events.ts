/**
 * Events: the execution's log, and the inbound events of workers.
 *
 * - GET /api/events/{id}?after=&limit= → `{execution_id, events, next_after}`, ordered by `seq`;
 *   `after` is the last seq already seen, `next_after` the value to pass next (null at the end).
 *   404 unknown execution.
 * - POST /api/v2/events (alias POST /api/events): one event `{execution_id, step, name, payload,
 *   queue_id?, worker_id?}` or `{events: [...]}` (1..1000) → EventsAck `{status: 'ok', accepted,
 *   duplicates, commands}`. The spec's worker flow uses /api/v2/events; it is the canonical path.
 *   A batch may carry `claim_next {worker_id, lease_seconds?, max?}` (eager dispatch, see
 *   ClaimNextRequest): the ack then has `claimed`, the commands leased to that worker.
 */
import type { FastifyInstance } from 'fastify';
import { Ajv, type ValidateFunction } from 'ajv';
import type { ClaimNextRequest, WorkerEvent } from '../../client/protocol.js';
import { notFound } from '../errors.js';
import type { AppContext } from './context.js';
import { idParams } from './executions.js';
import { errors, idInput, jsonObject, limitQuery, ref } from './schemas.js';
import { routeSchema, toId } from './support.js';

const TAG = 'events';

export const eventSchema = {
  type: 'object',
  required: ['execution_id', 'name'],
  properties: {
    execution_id: idInput,
    step: { type: ['string', 'null'], description: 'step name; null for execution-level events' },
    name: { type: 'string', minLength: 1, description: 'call.done, step.enter, step.exit, …' },
    payload: { ...jsonObject, description: 'call.done: {response} or {error}, plus meta' },
    queue_id: { ...idInput, description: 'the command this event reports on (call.done)' },
    worker_id: { type: 'string' },
  },
} as const;

const claimNextSchema = {
  type: 'object',
  required: ['worker_id'],
  description: 'eager dispatch: lease the due commands the last event issues to this worker and return them in `claimed`',
  properties: {
    worker_id: { type: 'string', minLength: 1, maxLength: 200 },
    lease_seconds: { type: 'number', exclusiveMinimum: 0 },
    max: { type: 'integer', minimum: 1, maximum: 16, default: 1 },
  },
} as const;

const batchSchema = {
  type: 'object',
  required: ['events'],
  properties: {
    events: { type: 'array', minItems: 1, maxItems: 1000, items: eventSchema },
    claim_next: claimNextSchema,
  },
} as const;

/**
 * The body is one event or a batch; validating it against the branch it claims to be (presence
 * of `events`) gives field-level messages instead of an anyOf's two sets of errors.
 */
const ajv = new Ajv({ allErrors: true, strict: false, verbose: true, coerceTypes: false });
const validateOne = ajv.compile(eventSchema);
const validateBatch = ajv.compile(batchSchema);
function eventsBodyValidator(): ValidateFunction {
  const fn = ((data: unknown) => {
    const v = data && typeof data === 'object' && !Array.isArray(data) && 'events' in data ? validateBatch : validateOne;
    const ok = v(data);
    fn.errors = v.errors;
    return ok;
  }) as ValidateFunction;
  return fn;
}

export async function eventRoutes(app: FastifyInstance, { deps }: AppContext) {
  app.get<{ Params: { id: string }; Querystring: { after?: number; limit: number } }>('/api/events/:id', {
    schema: routeSchema(TAG, "An execution's events, ordered", {
      params: idParams,
      querystring: {
        type: 'object',
        properties: {
          after: { type: 'integer', minimum: 0, maximum: 2147483647, description: 'last seq already seen' },
          limit: limitQuery(500, 5000),
        },
      },
      response: { 200: ref('EventsPage'), ...errors(400, 404) },
    }),
  }, async (req) => {
    const id = toId(req.params.id, 'id');
    const page = await deps.executions.events(id, { after: req.query.after, limit: req.query.limit });
    if (page.events.length === 0 && !(await deps.executions.get(id))) {
      throw notFound(`execution ${id} not found`, { execution_id: id });
    }
    return { execution_id: id, events: page.events, next_after: page.next_after };
  });

  for (const url of ['/api/v2/events', '/api/events']) {
    app.post<{ Body: WorkerEvent | { events: WorkerEvent[]; claim_next?: ClaimNextRequest } }>(url, {
      schema: routeSchema(TAG, url === '/api/v2/events' ? 'Report events (one, or {events: [...]})' : 'Report events (alias of /api/v2/events)', {
        body: { oneOf: [eventSchema, batchSchema] },
        response: { 200: ref('EventsAck'), ...errors(400, 404) },
      }),
      validatorCompiler: ({ httpPart }) => (httpPart === 'body' ? eventsBodyValidator() : () => true),
    }, async (req) => {
      const list = 'events' in req.body ? req.body.events : [req.body];
      const events: WorkerEvent[] = list.map((e, i) => {
        const ev: WorkerEvent = {
          execution_id: toId(e.execution_id, list.length > 1 ? `events[${i}].execution_id` : 'execution_id'),
          step: e.step ?? null,
          name: e.name,
          payload: e.payload ?? {},
        };
        if (e.queue_id !== undefined && e.queue_id !== null) ev.queue_id = toId(e.queue_id, 'queue_id');
        if (e.worker_id !== undefined) ev.worker_id = e.worker_id;
        return ev;
      });
      const claimNext = 'events' in req.body ? req.body.claim_next : undefined;
      return deps.executions.handleEvents(events, claimNext ? { claimNext } : {});
    });
  }
}
