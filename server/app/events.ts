/**
 * Events: the execution's log, and the inbound events of workers.
 *
 * - GET /api/events/{id}?after=&limit= → `{execution_id, events, next_after}`, ordered by `seq`;
 *   `after` is the last seq already seen, `next_after` the value to pass next (null at the end).
 *   404 unknown execution. `wait=<seconds>` (at most 30) makes it a long poll: with nothing after
 *   `after` yet, the answer waits until an event arrives or the time is up (then an empty page).
 *   The database is re-read every 250 ms while waiting, so any replica answers for any writer.
 *   `step=` and/or `name=` narrow the page to one step's / one kind of events (the console loads
 *   a selected step's calls this way instead of the whole log); `next_after` then still is the
 *   last seq of the page. `last_seq` is the execution's latest seq (= its event count): the
 *   console sizes its paged event list from it, and follows a run with `limit=1&wait=`.
 * - POST /api/v2/events (alias POST /api/events): one event `{execution_id, step, name, payload,
 *   queue_id?, worker_id?}` or `{events: [...]}` (1..1000) → EventsAck `{status: 'ok', accepted,
 *   duplicates, commands}`. The spec's worker flow uses /api/v2/events; it is the canonical path.
 *   A batch may carry `claim_next {worker_id, lease_seconds?, max?}` (eager dispatch, see
 *   ClaimNextRequest): the ack then has `claimed`, the commands leased to that worker. With
 *   `independent: true` each event is handled as if it came alone: the answer is 200 with
 *   `results[i]` = `{status: 200, duplicate, commands, claimed}` or `{status: 4xx/5xx, error}`.
 */
import { redactUrlsDeep } from '../../common/redact-url.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Ajv, type ValidateFunction } from 'ajv';
import { EventsAck, EventsBatch, EventsPage, EventsPageQuery, EventsRequest, IdParams, Ref, WorkerEvent, type ClaimNextRequest, type EventResult } from '../../common/contract/index.js';
import { notFound } from '../errors.js';
import * as eventStore from '../store/events.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { errorAnswer, routeSchema, toId } from './support.js';

const TAG = 'events';
const LONG_POLL_TICK_MS = 250;

/**
 * The body is one event or a batch; validating it against the branch it claims to be (presence
 * of `events`) gives field-level messages instead of an anyOf's two sets of errors. Both branches
 * are the contract's schemas (the document shows their union).
 */
let compiled: { one: ValidateFunction; batch: ValidateFunction } | undefined;
/** Compiled at the first report, not at import (lazy-compilers.ts says why). */
function eventValidators(): { one: ValidateFunction; batch: ValidateFunction } {
  if (compiled) return compiled;
  const ajv = new Ajv({ allErrors: true, strict: false, verbose: true, coerceTypes: false, useDefaults: true });
  return (compiled = { one: ajv.compile(WorkerEvent), batch: ajv.compile(EventsBatch) });
}
function eventsBodyValidator(): ValidateFunction {
  const fn = ((data: unknown) => {
    const { one, batch } = eventValidators();
    const v = data && typeof data === 'object' && !Array.isArray(data) && 'events' in data ? batch : one;
    const ok = v(data);
    fn.errors = v.errors;
    return ok;
  }) as ValidateFunction;
  return fn;
}

/**
 * An http tool's `params` are its query string: served, their values are masked as the query
 * values of a URL are (common/redact-url.ts: every value `***`, names kept, templates too); a null
 * value (the worker drops that parameter) stays null. Other commands are returned as they are.
 */
function maskHttpParams(command: unknown): unknown {
  if (!command || typeof command !== 'object') return command;
  const tool = (command as { tool?: unknown }).tool;
  if (!tool || typeof tool !== 'object' || (tool as { kind?: unknown }).kind !== 'http') return command;
  const params = (tool as { params?: unknown }).params;
  if (!params || typeof params !== 'object' || Array.isArray(params) || Object.keys(params).length === 0) return command;
  const masked = Object.fromEntries(Object.entries(params).map(([k, v]) => [k, v === null ? null : '***']));
  return { ...command, tool: { ...tool, params: masked } };
}

export async function eventRoutes(fastify: FastifyInstance, { deps }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  // A command_issued event holds the command as issued (retries re-issue it, so it is stored
  // whole); served, the URLs in its tool config lose userinfo and query values (issue 20).
  const redactIssuedCommand = <E extends { name: string; payload: unknown }>(e: E): E => {
    if (e.name !== 'command_issued' || !e.payload || typeof e.payload !== 'object') return e;
    const payload = e.payload as Record<string, unknown>;
    const command = maskHttpParams(redactUrlsDeep(payload.command, 6));
    return command === payload.command ? e : { ...e, payload: { ...payload, command } };
  };
  // A long poll in progress must not hold up a shutdown for its whole wait.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.get('/api/events/:id', {
    schema: routeSchema(TAG, "An execution's events, ordered", {
      params: IdParams,
      querystring: EventsPageQuery,
      response: { 200: Ref(EventsPage), ...errors(400, 404) },
    }),
  }, async (req) => {
    const id = toId(req.params.id, 'id');
    const { after = 0, limit, step, name } = req.query;
    const read = step === undefined && name === undefined
      ? () => deps.executions.events(id, { after, limit })
      : async () => {
        if (!(await deps.executions.get(id, { steps: false }))) throw notFound(`execution ${id} not found`, { execution_id: id });
        return eventStore.toPage(await eventStore.listWhere(deps.db.pool, id, { after, limit: limit + 1, step, name }), limit);
      };
    // each read refuses an unknown execution (404), the first one included
    let page = await read();
    const until = Date.now() + (req.query.wait ?? 0) * 1000;
    while (page.events.length === 0 && Date.now() < until && !closing && !req.raw.socket?.destroyed) {
      await new Promise((r) => setTimeout(r, Math.min(LONG_POLL_TICK_MS, until - Date.now())));
      page = await read();
    }
    return { execution_id: id, events: page.events.map(redactIssuedCommand), next_after: page.next_after, last_seq: await eventStore.lastSeq(deps.db.pool, id) };
  });

  /**
   * An independent batch: each event goes its own way, concurrently, as if it came alone (the
   * executions' batcher still commits the ones of one execution together). Each one's answer, a
   * refusal included, is its entry in `results`.
   */
  const independently = async (req: FastifyRequest, events: WorkerEvent[], claimNext: ClaimNextRequest | undefined): Promise<EventsAck> => {
    const results = await Promise.all(events.map(async (e): Promise<EventResult> => {
      try {
        const one = await deps.executions.handleEvents([e], claimNext ? { claimNext } : {});
        return { status: 200, duplicate: one.duplicates > 0, commands: one.commands, ...(one.claimed ? { claimed: one.claimed } : {}) };
      } catch (err) {
        return errorAnswer(err, req, () => deps.stopping?.() ?? false) as EventResult; // details are JSON (AppError details, a request id)
      }
    }));
    const ack: EventsAck = { status: 'ok', accepted: 0, duplicates: 0, commands: 0, ...(claimNext ? { claimed: [] } : {}), results };
    for (const r of results) {
      if (r.status !== 200) continue;
      if (r.duplicate) ack.duplicates++;
      else ack.accepted++;
      ack.commands += r.commands ?? 0;
      if (r.claimed) ack.claimed!.push(...r.claimed);
    }
    return ack;
  };

  for (const url of ['/api/v2/events', '/api/events']) {
    app.post(url, {
      schema: routeSchema(TAG, url === '/api/v2/events' ? 'Report events (one, or {events: [...]})' : 'Report events (alias of /api/v2/events)', {
        body: EventsRequest,
        response: { 200: Ref(EventsAck), ...errors(400, 404, 409) },
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
        if (e.lease_token !== undefined) ev.lease_token = e.lease_token;
        return ev;
      });
      const claimNext = 'events' in req.body ? req.body.claim_next : undefined;
      if ('events' in req.body && req.body.independent) return independently(req, events, claimNext);
      return deps.executions.handleEvents(events, claimNext ? { claimNext } : {});
    });
  }
}
