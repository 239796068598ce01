/**
 * Executions: start (run/execute), read, list, retry, rerun, cancel; the event log pages.
 */
import { Dict, Id, IdInput, IdParam, Json, JsonObject, LimitQuery, NullableId, NullableInteger, NullableString, NullableTimestamp, OffsetQuery, Ref, StringEnum, Timestamp, Type, type Static } from './common.js';
import { EVENTS_PAGE_LIMIT, EXECUTION_LIST_LIMIT, MAX_WAIT_SECONDS } from './limits.js';
import { WorkerId } from './worker.js';

export { EVENTS_PAGE_LIMIT, EXECUTION_LIST_LIMIT, MAX_WAIT_SECONDS };

export const EXECUTION_STATUSES = ['started', 'running', 'completed', 'failed', 'cancelled'] as const;
export const ExecutionStatusName = StringEnum(EXECUTION_STATUSES);
export type ExecutionStatusName = Static<typeof ExecutionStatusName>;

/** POST /api/v2/execute and /api/run/playbook — body. */
export const RunBody = Type.Object({
  path: Type.String({ minLength: 1, description: 'catalog path of the playbook' }),
  payload: Type.Optional(JsonObject({ description: 'input of the execution (an object); default {}' })),
  version: Type.Optional(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'catalog version; default the latest' })),
  /** Set by a worker running a `playbook` tool: the child's parent and the parent's command. */
  parent_execution_id: Type.Optional(IdInput({ description: 'set by a worker running a playbook tool' })),
  parent_queue_id: Type.Optional(IdInput({ description: "the parent's command (queue_id) a child execution answers" })),
  /** With parent_queue_id: the lease holder of that command (ClaimedCommand.worker_id, lease_token), as its call.done would present. */
  worker_id: Type.Optional(WorkerId({ description: "with parent_queue_id: the worker holding the command's lease (409 not_lease_holder otherwise)" })),
  lease_token: Type.Optional(Type.String({ maxLength: 200, description: "with parent_queue_id: the lease token of the worker's claim of that command" })),
  // A misspelt field (`paylod`) or a reference-era one (`args`, `parameters`) is refused by name:
  // ignored, it started the execution without the input its sender meant to give.
}, { additionalProperties: false });
export type RunBody = Static<typeof RunBody>;
/**
 * What the execution service starts. `idempotency_key` is the request's `Idempotency-Key` header
 * (the server fills it from the header; not a body field): a retry with the same key answers the
 * execution the first request created.
 */
export type RunRequest = Static<typeof RunBody> & { idempotency_key?: string };

export const RunHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'a retry with the same key answers the execution the first request created (header Idempotent-Replayed: true)' })),
});

export const WaitQuery = Type.Object({
  wait: Type.Optional(Type.Number({ minimum: 0, maximum: MAX_WAIT_SECONDS, description: `long poll: seconds (0 to ${MAX_WAIT_SECONDS}, fractions allowed) to wait for the execution to end before answering` })),
});

const withWait = (description: string) => ({ description: `with ?wait=, when the execution ended within the wait${description}` });
export const RunResponse = Type.Object({
  execution_id: Id(),
  /** 'started'; with `?wait=`, the terminal status when the execution ended within the wait. */
  status: StringEnum(['started', 'completed', 'failed', 'cancelled'], { description: "'started'; with ?wait=, the terminal status when the execution ended within the wait" }),
  path: Type.String(),
  version: Type.Integer(),
  commands: Type.Integer({ description: 'commands queued (and published) by the start' }),
  result: Type.Optional(Json(withWait(''))),
  error: Type.Optional(Json(withWait(''))),
  finished_at: Type.Optional(NullableTimestamp(withWait(''))),
}, { $id: 'RunResponse' });
export type RunResponse = Static<typeof RunResponse>;

export const StepView = Type.Object({
  /** `cancelled`: still running when the execution was cancelled or failed (a retry runs it again). */
  status: StringEnum(['pending', 'running', 'completed', 'failed', 'skipped', 'cancelled']),
  runs: Type.Integer(),
  result: Type.Optional(Json()),
  error: Type.Optional(Json()),
}, { $id: 'StepView' });
export type StepView = Static<typeof StepView>;

/** GET /api/execution/{id}; also the answer of POST /api/execution/{id}/cancel. */
export const ExecutionView = Type.Object({
  execution_id: Id(),
  path: Type.String(),
  version: Type.Integer(),
  catalog_id: Id(),
  parent_execution_id: NullableId(),
  root_execution_id: Id(),
  status: ExecutionStatusName,
  payload: JsonObject(),
  result: Json(),
  error: Json(),
  steps: Dict(Ref(StepView)),
  created_at: Timestamp(),
  updated_at: Timestamp(),
  finished_at: NullableTimestamp(),
  /** How many times the execution was retried (POST /api/execution/{id}/retry). */
  retries: Type.Optional(Type.Integer({ description: 'times the execution was retried' })),
  /** The execution this one runs again (POST /api/execution/{id}/rerun). */
  rerun_of: Type.Optional(NullableId({ description: 'the execution this one runs again' })),
  /** The schedule and tick that started it. */
  schedule_id: Type.Optional(NullableId({ description: 'the schedule that started it' })),
  schedule_tick: Type.Optional(NullableTimestamp({ description: 'the tick of that schedule' })),
  /** The webhook trigger (GET /api/hooks) whose delivery started it. */
  hook_id: Type.Optional(NullableId({ description: 'the webhook trigger whose delivery started it' })),
  /** Waits for a slot of its playbook's `concurrency.limit` (status `started`, nothing run yet). */
  waiting: Type.Optional(Type.Boolean({ description: "waits for a slot of its playbook's concurrency limit (status started, nothing run yet)" })),
}, { $id: 'Execution' });
export type ExecutionView = Static<typeof ExecutionView>;

/** GET /api/executions?status=&path=&parent=&limit=&offset=&view= — newest first. */
export const ExecutionListQuery = Type.Object({
  status: Type.Optional(ExecutionStatusName),
  path: Type.Optional(Type.String({ description: 'catalog path' })),
  parent: Type.Optional(IdParam({ description: 'only the children of this execution' })),
  limit: LimitQuery(EXECUTION_LIST_LIMIT),
  offset: OffsetQuery(),
  view: Type.Optional(StringEnum(['full', 'summary'], {
    description: "full (default): each execution as GET /api/execution/{id} gives it; summary: without payload, result and steps",
  })),
});

/** How GET /api/executions gives each execution: as GET /api/execution/{id} does, or without payload, result and steps. */
export type ExecutionListView = NonNullable<Static<typeof ExecutionListQuery>['view']>;

/**
 * An execution in a list. With `view=summary` it has no payload, result or steps: a console page
 * of 50 executions whose steps returned large results was megabytes, to draw ids and statuses.
 */
const { payload, result, steps, ...always } = ExecutionView.properties;
export const ExecutionListItem = Type.Object({
  ...always,
  payload: Type.Optional(payload),
  result: Type.Optional(result),
  steps: Type.Optional(steps),
}, { $id: 'ExecutionListItem' });
export type ExecutionListItem = Static<typeof ExecutionListItem>;

export const ExecutionList = Type.Object({
  executions: Type.Array(Ref(ExecutionListItem)),
  count: Type.Integer({ description: 'items in this page' }),
  limit: Type.Integer(),
  offset: Type.Integer(),
}, { $id: 'ExecutionList' });
export type ExecutionList = Static<typeof ExecutionList>;
/** The list as a client reads it: full records unless it asked for `view=summary`. */
export type ExecutionFullList = Omit<ExecutionList, 'executions'> & { executions: ExecutionView[] };
export type ExecutionSummary = Omit<ExecutionView, 'payload' | 'result' | 'steps'>;
export type ExecutionSummaryList = Omit<ExecutionList, 'executions'> & { executions: ExecutionSummary[] };

/**
 * POST /api/execution/{id}/retry — resume a failed or cancelled execution in place. `args` maps a
 * retried step to args merged over its own; `payload` is merged over the execution payload.
 */
export const RetryRequest = Type.Object({
  args: Type.Optional(Dict(JsonObject(), { description: "step name → args merged over that retried step's args" })),
  payload: Type.Optional(JsonObject({ description: 'merged over the execution payload' })),
}, { additionalProperties: false });
export type RetryRequest = Static<typeof RetryRequest>;

/** POST /api/execution/{id}/rerun — a new execution of the same version; `payload` replaces the original one. */
export const RerunRequest = Type.Object({
  payload: Type.Optional(JsonObject({ description: 'replaces the original payload' })),
}, { additionalProperties: false });
export type RerunRequest = Static<typeof RerunRequest>;

export const IdParams = Type.Object({ id: IdParam() });

/** GET /api/execution/{id}/steps: per-step counts of the log. */
export const StepCountsList = Type.Object({
  execution_id: Id(),
  steps: Type.Array(Type.Object({
    step: Type.String(),
    calls: Type.Integer({ description: 'commands issued' }),
    started: Type.Integer({ description: 'commands claimed by a worker' }),
    done: Type.Integer({ description: 'calls answered (call.done)' }),
    errors: Type.Integer({ description: 'calls answered with an error' }),
    loop_total: NullableInteger({ description: "items of the latest entry's loop; null without a loop" }),
    loop_done: Type.Integer({ description: 'items finished since that entry' }),
  })),
}, { $id: 'StepCountsList' });

export const EventView = Type.Object({
  event_id: Id(),
  execution_id: Id(),
  seq: Type.Integer(),
  name: Type.String(),
  step: NullableString(),
  command_id: NullableInteger(),
  payload: JsonObject(),
  created_at: Timestamp(),
}, { $id: 'Event' });
export type EventView = Static<typeof EventView>;

/** GET /api/events/{id}?after=&limit= — ordered by seq; pass next_after back as `after` (null: no more). */
export const EventsPage = Type.Object({
  execution_id: Id(),
  events: Type.Array(Ref(EventView)),
  next_after: NullableInteger({ description: 'pass as `after` for the next page; null when there is no more' }),
  last_seq: Type.Optional(Type.Integer({ description: "the execution's latest seq when the page was read (its event count: seq is 1, 2, 3…)" })),
}, { $id: 'EventsPage' });
export type EventsPage = Static<typeof EventsPage>;

export const EventsPageQuery = Type.Object({
  after: Type.Optional(Type.Integer({ minimum: 0, maximum: 2147483647, description: 'last seq already seen' })),
  limit: LimitQuery(EVENTS_PAGE_LIMIT),
  wait: Type.Optional(Type.Number({ minimum: 0, maximum: 30, description: 'long poll: seconds to wait for a first new event' })),
  step: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'only the events of this step' })),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'only events of this name (e.g. vars_set)' })),
});

export const executionSchemas = [RunResponse, StepView, ExecutionView, ExecutionListItem, ExecutionList, StepCountsList, EventView, EventsPage];
