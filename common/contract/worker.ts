/**
 * The worker protocol: broker notification, claim, heartbeat, release, events (one or a batch,
 * with eager `claim_next`) and the claimed command. The hot path: these are validated once, at
 * the HTTP edge, and the execution service trusts them.
 */
import type { Tool } from '../../playbook/types.js';
import { POOL_NAME_PATTERN } from '../../playbook/schema.js';
import { ErrorBody, Id, IdInput, JsonObject, NullableId, NullableInteger, NullableString, Ref, StringEnum, Timestamp, Type, type Static } from './common.js';
import { CLAIM_NEXT_MAX, MAX_EVENTS_PER_REQUEST } from './limits.js';
import { WORKER_ID_MAX, WORKER_ID_MESSAGE, WORKER_ID_PATTERN } from './worker-id.js';

export { CLAIM_NEXT_MAX, MAX_EVENTS_PER_REQUEST };

/**
 * Names only the server and the engine write; a worker may not send them (the event log is the
 * execution's truth: a forged `execution_completed` would end it). The request schema refuses
 * them at the edge; the service keeps refusing them for in-process callers.
 */
export const SERVER_EVENT_NAMES = [
  'execution_started', 'command_issued', 'action_started', 'action_completed', 'step_completed', 'vars_set',
  'step_skipped', 'step_failed', 'execution_completed', 'execution_failed', 'execution_cancelled', 'transition',
  'case_applied', 'execution.cancel', 'execution.retry', 'execution_retried',
] as const;

/** A worker's id: the lease holder's name (the rule: worker-id.ts). */
export const WorkerId = (o: { description?: string } = {}) => Type.String({
  minLength: 1,
  maxLength: WORKER_ID_MAX,
  pattern: WORKER_ID_PATTERN,
  'x-message': WORKER_ID_MESSAGE,
  ...o,
});

/** Lease length asked for, seconds; the server raises it to 1 and caps it (default 20). */
export const LeaseSeconds = (o: { description?: string } = {}) =>
  Type.Number({ exclusiveMinimum: 0, maximum: 86400, description: 'lease asked for, seconds (the server caps it); default 20', ...o });

const LeaseToken = (description: string) => Type.String({ maxLength: 200, description });

/** Broker message on `flow.commands` (DESIGN.md §3). Never carries secrets. */
export const CommandNotification = Type.Object({
  execution_id: Id(),
  queue_id: Id(),
  step: Type.String(),
  server_url: Type.String(),
  /** Worker pool of the command; absent for `default`. Published on the pool's own subject. */
  pool: Type.Optional(Type.String()),
});
export type CommandNotification = Static<typeof CommandNotification>;

/** POST /api/v2/commands/{queue_id}/claim — body. */
export const ClaimRequest = Type.Object({
  worker_id: WorkerId(),
  lease_seconds: Type.Optional(LeaseSeconds()),
});
export type ClaimRequest = Static<typeof ClaimRequest>;

/** POST /api/v2/commands/{queue_id}/heartbeat — extends the lease. 409 when not the owner, 410 when finished. */
export const HeartbeatRequest = Type.Object({
  worker_id: WorkerId(),
  /** ClaimedCommand.lease_token of the lease. */
  lease_token: Type.Optional(LeaseToken('the lease token of the claim')),
  lease_seconds: Type.Optional(LeaseSeconds()),
});
export type HeartbeatRequest = Static<typeof HeartbeatRequest>;

export const HeartbeatResponse = Type.Object({ lease_until: Timestamp() }, { $id: 'HeartbeatResponse' });
export type HeartbeatResponse = Static<typeof HeartbeatResponse>;

/**
 * POST /api/v2/commands/{queue_id}/release — body. Ends the lease only when this worker id holds it:
 * a worker whose claim went unanswered may hold a lease it never learned of (the server committed
 * the claim, the answer was lost), and nobody runs that command until the lease runs out.
 */
export const ReleaseLeaseRequest = Type.Object({
  worker_id: WorkerId(),
});
export type ReleaseLeaseRequest = Static<typeof ReleaseLeaseRequest>;

/** POST /api/v2/workers/{worker_id}/release — a worker (re)starting ends the leases its id held. */
export const ReleaseLeasesResponse = Type.Object({
  /** Rows queued again (or failed, when they had no delivery left). */
  released: Type.Integer({ description: 'leases ended (commands queued again, or failed with no delivery left)' }),
}, { $id: 'ReleaseLeasesResponse' });
export type ReleaseLeasesResponse = Static<typeof ReleaseLeasesResponse>;

export const WorkerParams = Type.Object({ worker_id: WorkerId() });

/**
 * 200 response of a claim: the command with everything the worker needs in one round trip.
 * 409 `already_claimed` when another worker holds a live lease (or this worker claims twice),
 * 410 `finished` when the row is done, failed or cancelled, 404 for an unknown queue_id,
 * 425 `not_due` when available_at is in the future.
 */
export const ClaimedCommand = Type.Object({
  queue_id: Id(),
  execution_id: Id(),
  catalog_id: Id(),
  parent_execution_id: NullableId(),
  root_execution_id: Id(),
  path: Type.String(),
  step: Type.String(),
  command_id: Type.Integer(),
  attempt: Type.Integer(),
  iteration: NullableInteger(),
  /** Rendered tool config; secret references (keychain, credentials) left for the worker. */
  tool: Type.Unsafe<Tool>({ type: 'object', additionalProperties: true, description: 'rendered tool config (secret references left for the worker)' }),
  args: JsonObject(),
  /** Template context the worker may need to finish rendering deferred references. */
  context: Type.Object({
    workload: JsonObject(),
    vars: JsonObject(),
    execution_id: Id(),
    keychain_defs: Type.Array(JsonObject()),
  }, { additionalProperties: true }),
  /** For tool.kind === 'playbook'. */
  child: Type.Optional(Type.Object({ path: Type.String(), payload: JsonObject() })),
  /** The workbook task table when tool.kind === 'workbook'. */
  workbook: Type.Optional(Type.Array(JsonObject())),
  lease_until: Timestamp(),
  worker_id: Type.String(),
  /**
   * Proof of this lease: heartbeats and the call.done of the command must carry it with
   * `worker_id` (409 otherwise). A new one is issued with every claim.
   */
  lease_token: Type.String({ description: 'proof of the lease: send it with heartbeats and the call.done' }),
}, { $id: 'ClaimedCommand' });
export type ClaimedCommand = Static<typeof ClaimedCommand>;

/**
 * POST /api/v2/events (alias /api/events): one event, or `{events: [...]}`.
 * A worker reports `call.done` with `queue_id`; its payload holds `response` or `error`
 * (`error.status` for HTTP) and `meta` `{duration_ms, attempt, iteration, worker_id, log?}`.
 */
export const WorkerEvent = Type.Object({
  execution_id: IdInput(),
  step: Type.Optional(NullableString({ description: 'step name; null for execution-level events' })),
  name: Type.String({
    minLength: 1,
    maxLength: 200,
    not: { enum: [...SERVER_EVENT_NAMES] },
    description: `call.done, step.enter, step.exit, …; not a name the server records (${SERVER_EVENT_NAMES.join(', ')})`,
    'x-message': 'must be 1 to 200 characters and not a name the server records itself',
  }),
  payload: Type.Optional(JsonObject({ description: 'call.done: {response} or {error}, plus meta' })),
  queue_id: Type.Optional(IdInput({ description: 'the command this event reports on (call.done)' })),
  worker_id: Type.Optional(Type.String({ maxLength: 200 })),
  /**
   * call.done: ClaimedCommand.lease_token of the lease it reports on. A call.done is accepted only
   * from the lease holder (worker_id + lease_token, 409 `not_lease_holder` otherwise) and only
   * with its queue_id. Never stored.
   */
  lease_token: Type.Optional(LeaseToken('call.done: the lease token of the claim (never stored)')),
});
export type WorkerEvent = Static<typeof WorkerEvent>;

/**
 * Eager dispatch, asked with a batch of events (`{events, claim_next}`): commands that the batch's
 * last event issues and that are due now are leased to `worker_id` in the same transaction (their
 * `action_started` recorded, no notification published) and returned in `EventsAck.claimed`, at
 * most `max` (default 1, at most 16). A worker asks for it with the call.done of the command whose
 * slot it is freeing, so a sequential chain runs without a notification and a claim per step.
 */
export const ClaimNextRequest = Type.Object({
  worker_id: WorkerId(),
  /** As ClaimRequest.lease_seconds. */
  lease_seconds: Type.Optional(LeaseSeconds()),
  max: Type.Optional(Type.Integer({ minimum: 1, maximum: CLAIM_NEXT_MAX, default: 1 })),
  /** The worker's pool (default `default`): only commands of that pool are handed back. */
  pool: Type.Optional(Type.String({ pattern: POOL_NAME_PATTERN, description: "the worker's pool: only its commands are handed back (default `default`)" })),
  /**
   * The request repeats reports whose earlier request got no answer. A report the server took
   * then is a duplicate now, and the commands that lost answer leased to this worker would wait
   * for nobody until their leases ran out: they are queued and announced again instead.
   */
  resent: Type.Optional(Type.Boolean({ description: 'these reports were sent before without an answer: the commands a lost answer leased to this worker are queued again' })),
}, { description: 'eager dispatch: lease the due commands the last event issues to this worker and return them in `claimed`' });
export type ClaimNextRequest = Static<typeof ClaimNextRequest>;

export const EventsBatch = Type.Object({
  events: Type.Array(WorkerEvent, { minItems: 1, maxItems: MAX_EVENTS_PER_REQUEST }),
  claim_next: Type.Optional(ClaimNextRequest),
  /**
   * Each event is handled as if it came alone, in its own request: a refusal of one does not stop
   * the others, and `claim_next` applies to each (up to `max` commands per event). The answer is
   * 200 with `results`, one per event. A worker sends its slots' call.done reports this way when
   * they finish together, in one request instead of one each.
   */
  independent: Type.Optional(Type.Boolean({ description: 'handle each event as if sent alone; the answer lists each outcome in `results`' })),
});
export type EventsBatch = Static<typeof EventsBatch>;

/** The body of POST /api/v2/events: one event or a batch (validated against the branch it claims, see server/app/events.ts). */
export const EventsRequest = Type.Union([WorkerEvent, EventsBatch]);
export type EventsRequest = Static<typeof EventsRequest>;

/** What one event of an `independent` batch came to: the answer it would have had alone. */
export const EventResult = Type.Object({
  /** 200, or the HTTP status of the refusal (404, 409, 410…). */
  status: Type.Integer({ description: '200, or the HTTP status the event alone would have been refused with' }),
  /** Recorded before (a redelivered event): nothing new was decided. */
  duplicate: Type.Optional(Type.Boolean()),
  commands: Type.Optional(Type.Integer({ description: 'commands queued as a result' })),
  claimed: Type.Optional(Type.Array(Ref(ClaimedCommand), { description: "with claim_next: the commands this event's decision leased to the worker" })),
  error: Type.Optional(ErrorBody.properties.error),
});
export type EventResult = Static<typeof EventResult>;

export const EventsAck = Type.Object({
  status: StringEnum(['ok']),
  accepted: Type.Integer(),
  duplicates: Type.Integer(),
  commands: Type.Integer({ description: 'commands queued as a result' }),
  /** Commands leased to the caller by `claim_next` (present when it was asked, possibly empty). */
  claimed: Type.Optional(Type.Array(Ref(ClaimedCommand), { description: 'with claim_next: the commands leased to its worker' })),
  /** An `independent` batch: each event's outcome, in request order. */
  results: Type.Optional(Type.Array(EventResult, { description: "an independent batch: each event's outcome, in request order" })),
}, { $id: 'EventsAck' });
export type EventsAck = Static<typeof EventsAck>;

/** Shared schemas of this module (registered by $id; answers refer to them). */
export const workerSchemas = [ClaimedCommand, EventsAck, HeartbeatResponse, ReleaseLeasesResponse];

