/**
 * Executions: start, read, list, cancel.
 *
 * - POST /api/run/playbook and POST /api/v2/execute (same behaviour) `{path, payload?, version?,
 *   parent_execution_id?, parent_queue_id?}` → **201** `{execution_id, status: 'started', path,
 *   version, commands}` (an execution is created every time). 404 unknown path (or version),
 *   400 payload not an object or a field the body does not have (`paylod`, `args`).
 *   `?wait=<seconds>` (0..60): when the execution ends within that time the answer carries its
 *   terminal `status`, `result`, `error` and `finished_at` instead.
 * - GET /api/execution/{id} → the execution record (status, path, version, timestamps, per-step
 *   state, result, error). 404 unknown, 400 non-numeric id. `?wait=<seconds>` (0..60) makes it
 *   a long poll: the answer comes as soon as the execution is terminal, or when the time is up
 *   with the state as it then is. Woken by the NOTIFY of the commit that ended the execution
 *   (executions/waiters.ts), so any replica answers for any writer without polling.
 * - GET /api/executions?status=&path=&parent=&limit=&offset=&view= → `{executions, count, limit,
 *   offset}`, newest first; `parent` lists the child executions of one execution; `view=summary`
 *   leaves out each one's payload, result and steps (the console's lists need none of them).
 * - GET /api/execution/{id}/steps → `{execution_id, steps: [{step, calls, started, done, errors,
 *   loop_total, loop_done}]}`: per-step counts of the log in one aggregate (the console draws a
 *   large execution's graph and loop progress from it before its events have loaded). 404.
 * - POST /api/execution/{id}/cancel → the execution after cancelling (a finished execution is
 *   returned unchanged). 404 unknown.
 * - POST /api/execution/{id}/retry `{args?: {step: {...}}, payload?}` → the execution resumed in
 *   place. 409 `not_retryable` when running or completed (or a child: retry its parent).
 * - POST /api/execution/{id}/rerun `{payload?}` → **201** a new execution of the same version,
 *   `rerun_of` the original. 409 for a child, 404 when that version was deleted.
 */
import { setMaxListeners } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  ExecutionList, ExecutionListQuery, ExecutionView, IdParams, ObjectOrNull, Ref, RerunRequest, RetryRequest, RunBody, RunHeaders, RunResponse, StepCountsList, WaitQuery,
  type RunRequest,
} from '../../common/contract/index.js';
import { badRequest, notFound } from '../errors.js';
import { checkCatalogPath } from '../store/catalog-service.js';
import { awaitEnd, type Ended } from '../executions/waiters.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema, toId } from './support.js';

export { MAX_WAIT_SECONDS } from '../../common/contract/index.js';

const TAG = 'executions';
const TERMINAL = new Set<string>(['completed', 'failed', 'cancelled']);
const isTerminal = (s: string): s is 'completed' | 'failed' | 'cancelled' => TERMINAL.has(s);

export async function executionRoutes(fastify: FastifyInstance, { deps }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  // A wait in progress must not hold up a shutdown: closing answers every waiter with its current state.
  const closing = new AbortController();
  // one listener per wait in progress, each removed when its wait ends: many at once is not a leak
  setMaxListeners(0, closing.signal);
  app.addHook('preClose', async () => closing.abort());
  /** The execution once terminal (`read`), or as it is when `seconds` are up or the client went away. */
  const waitFor = <T extends { status: string }>(id: string, seconds: number, res: ServerResponse, read: () => Promise<T | null>, fromEnded?: (e: Ended) => T) => {
    const stop = new AbortController();
    const onClose = () => stop.abort();
    // listeners removed when done (not AbortSignal.any: one long-lived signal would collect dependants)
    res.once('close', onClose);
    closing.signal.addEventListener('abort', onClose, { once: true });
    if (closing.signal.aborted) stop.abort();
    return awaitEnd(deps.waiters, id, read, seconds * 1000, stop.signal, fromEnded).finally(() => {
      res.off('close', onClose);
      closing.signal.removeEventListener('abort', onClose);
    });
  };
  /**
   * A run request's wait answers the outcome only: read without the summaries (they repeat every
   * step's result, a large one would be read and parsed for nothing), or taken as handed over by
   * the commit that ended the execution in this process (no read at all).
   */
  const waitForOutcome = (id: string, seconds: number, res: ServerResponse) =>
    waitFor<Ended>(id, seconds, res, () => deps.executions.get(id, { steps: false }), (e) => e);
  const start = async (body: RunBody, idempotencyKey?: string) => {
    // never rewritten: a leading or trailing '/' is refused, as registration refuses it
    const path = body.path;
    const bad = checkCatalogPath(path);
    if (bad) throw badRequest(`field 'path': ${bad}`);
    const req: RunRequest = { path, payload: body.payload ?? {} };
    if (body.version !== undefined) req.version = body.version;
    if (body.parent_execution_id !== undefined) req.parent_execution_id = toId(body.parent_execution_id, 'parent_execution_id');
    if (body.parent_queue_id !== undefined) req.parent_queue_id = toId(body.parent_queue_id, 'parent_queue_id');
    if (body.worker_id !== undefined) req.worker_id = body.worker_id;
    if (body.lease_token !== undefined) req.lease_token = body.lease_token;
    if (idempotencyKey !== undefined) req.idempotency_key = idempotencyKey;
    return deps.executions.start(req);
  };

  for (const url of ['/api/run/playbook', '/api/v2/execute']) {
    app.post(url, {
      schema: routeSchema(TAG, url === '/api/v2/execute'
        ? 'Start an execution (v2); its first commands are queued and published'
        : 'Run a playbook: start an execution', {
        headers: RunHeaders,
        querystring: WaitQuery,
        body: RunBody,
        // 410: a child's start after its parent (or the parent's command) ended
        response: { 201: Ref(RunResponse), ...errors(400, 404, 409, 410) },
      }),
    }, async (req, reply) => {
      const res: RunResponse = await start(req.body, req.headers['idempotency-key']);
      if ('replayed' in res) {
        delete (res as { replayed?: boolean }).replayed;
        reply.header('idempotent-replayed', 'true');
      }
      if (req.query.wait) {
        const ex = await waitForOutcome(String(res.execution_id), req.query.wait, reply.raw);
        if (ex && isTerminal(ex.status)) {
          return reply.code(201).send({ ...res, status: ex.status, result: ex.result, error: ex.error, finished_at: ex.finished_at });
        }
      }
      return reply.code(201).send(res);
    });
  }

  app.get('/api/execution/:id', {
    schema: routeSchema(TAG, 'Execution status: steps, result, error, timestamps; with wait, a long poll until it ends', {
      params: IdParams,
      querystring: WaitQuery,
      response: { 200: Ref(ExecutionView), ...errors(400, 404) },
    }),
  }, async (req, reply) => {
    const id = toId(req.params.id, 'id');
    const ex = req.query.wait ? await waitFor(id, req.query.wait, reply.raw, () => deps.executions.get(id)) : await deps.executions.get(id);
    if (!ex) throw notFound(`execution ${id} not found`, { execution_id: id });
    return ex;
  });

  app.get('/api/executions', {
    schema: routeSchema(TAG, 'List executions, newest first', {
      querystring: ExecutionListQuery,
      response: { 200: Ref(ExecutionList), ...errors(400) },
    }),
  }, async (req) => {
    const { status, path, parent, limit, offset, view } = req.query;
    const executions = await deps.executions.list({ status, path: path || undefined, parent: parent === undefined ? undefined : toId(parent, 'parent'), limit, offset, view });
    return { executions, count: executions.length, limit, offset };
  });

  app.get('/api/execution/:id/steps', {
    schema: routeSchema(TAG, "Per-step counts of an execution's log: calls, loop progress", {
      params: IdParams,
      response: { 200: Ref(StepCountsList), ...errors(400, 404) },
    }),
  }, async (req) => {
    const id = toId(req.params.id, 'id');
    const steps = await deps.executions.stepCounts(id);
    if (!steps) throw notFound(`execution ${id} not found`, { execution_id: id });
    return { execution_id: id, steps };
  });

  app.post('/api/execution/:id/retry', {
    schema: routeSchema(TAG, 'Retry from failure: a failed or cancelled execution resumes in place; completed steps keep their results, the failed steps (only the unfinished items of a loop) run again', {
      params: IdParams,
      body: ObjectOrNull(RetryRequest),
      response: { 200: Ref(ExecutionView), ...errors(400, 404, 409) },
    }),
  }, async (req) => deps.executions.retry(toId(req.params.id, 'id'), req.body ?? {}));

  app.post('/api/execution/:id/rerun', {
    schema: routeSchema(TAG, 'Run again: a new execution of the same playbook version with the same payload (or the given one), linked by rerun_of', {
      params: IdParams,
      body: ObjectOrNull(RerunRequest),
      response: { 201: Ref(RunResponse), ...errors(400, 404, 409) },
    }),
  }, async (req, reply) => reply.code(201).send(await deps.executions.rerun(toId(req.params.id, 'id'), req.body ?? {})));

  app.post('/api/execution/:id/cancel', {
    schema: routeSchema(TAG, 'Cancel an execution: queued commands are dropped, running ones finish unheeded', {
      params: IdParams,
      response: { 200: Ref(ExecutionView), ...errors(400, 404) },
    }),
  }, async (req) => {
    const id = toId(req.params.id, 'id');
    return deps.executions.cancel(id);
  });
}
