/**
 * Wire shapes between the server and its clients (worker, CLI, operator). The server's route
 * schemas and the typed client are both written against these; the OpenAPI document at /docs is
 * generated from the route schemas.
 *
 * IDs (execution_id, queue_id, catalog_id) travel as decimal strings in responses so int64 values
 * round-trip through JavaScript exactly; requests accept a string or an integer.
 */
import type { Json, JsonObject, Tool } from '../playbook/types.js';

export type Id = string;

/** Every error response: `{error: {code, message, details?}}`. */
export interface ErrorBody {
  error: { code: string; message: string; details?: Json };
}

/** Broker message on `flow.commands` (DESIGN.md §3). Never carries secrets. */
export interface CommandNotification {
  execution_id: Id;
  queue_id: Id;
  step: string;
  server_url: string;
}

/** POST /api/v2/commands/{queue_id}/claim — body. */
export interface ClaimRequest {
  worker_id: string;
  /** Lease length asked for; the server caps it. Default 60. */
  lease_seconds?: number;
}

/**
 * 200 response of a claim: the command with everything the worker needs in one round trip.
 * 409 `already_claimed` when another worker holds a live lease (or this worker claims twice),
 * 410 `finished` when the row is done, failed or cancelled, 404 for an unknown queue_id,
 * 425 `not_due` when available_at is in the future.
 */
export interface ClaimedCommand {
  queue_id: Id;
  execution_id: Id;
  catalog_id: Id;
  parent_execution_id: Id | null;
  root_execution_id: Id;
  path: string;
  step: string;
  command_id: number;
  attempt: number;
  iteration: number | null;
  /** Rendered tool config; secret references (keychain, credentials) left for the worker. */
  tool: Tool;
  args: JsonObject;
  /** Template context the worker may need to finish rendering deferred references. */
  context: { workload: JsonObject; vars: JsonObject; execution_id: Id; keychain_defs: JsonObject[] };
  /** For tool.kind === 'playbook'. */
  child?: { path: string; payload: JsonObject };
  /** The workbook task table when tool.kind === 'workbook'. */
  workbook?: JsonObject[];
  lease_until: string;
  worker_id: string;
}

/** POST /api/v2/commands/{queue_id}/heartbeat — extends the lease. 409 when not the owner, 410 when finished. */
export interface HeartbeatRequest {
  worker_id: string;
  lease_seconds?: number;
}
export interface HeartbeatResponse {
  lease_until: string;
}

/**
 * POST /api/v2/events (alias /api/events): one event, or `{events: [...]}`.
 * A worker reports `call.done` with `queue_id`; its payload holds `response` or `error`
 * (`error.status` for HTTP) and `meta` `{duration_ms, attempt, iteration, worker_id, log?}`.
 */
export interface WorkerEvent {
  execution_id: Id | number;
  step: string | null;
  name: string;
  payload: JsonObject;
  queue_id?: Id | number;
  worker_id?: string;
}
export interface EventsAck {
  status: 'ok';
  accepted: number;
  duplicates: number;
  commands: number;
  /** Commands leased to the caller by `claim_next` (present when it was asked, possibly empty). */
  claimed?: ClaimedCommand[];
}

/**
 * Eager dispatch, asked with a batch of events (`{events, claim_next}`): commands that the batch's
 * last event issues and that are due now are leased to `worker_id` in the same transaction (their
 * `action_started` recorded, no notification published) and returned in `EventsAck.claimed`, at
 * most `max` (default 1, at most 16). A worker asks for it with the call.done of the command whose
 * slot it is freeing, so a sequential chain runs without a notification and a claim per step.
 */
export interface ClaimNextRequest {
  worker_id: string;
  /** As ClaimRequest.lease_seconds. */
  lease_seconds?: number;
  max?: number;
}

/** POST /api/v2/execute and /api/run/playbook. */
export interface RunRequest {
  path: string;
  payload?: JsonObject;
  version?: number;
  /** Set by a worker running a `playbook` tool: the child's parent and the parent's command. */
  parent_execution_id?: Id | number;
  parent_queue_id?: Id | number;
}
export interface RunResponse {
  execution_id: Id;
  status: 'started';
  path: string;
  version: number;
  commands: number;
}

/** GET /api/queue/stats (the operator's WorkerPool controller reads it). */
export interface QueueStats {
  queued: number;
  leased: number;
  delayed: number;
  oldest_age_seconds: number;
}

// ---------------------------------------------------------------------------------------------
// Response shapes of the remaining endpoints (added with the HTTP layer, server/app/). The spec
// leaves them "not shown"; these are the published shapes (OpenAPI at /docs/json) and the route
// schemas in server/app/ are written to match them.
// ---------------------------------------------------------------------------------------------

/**
 * GET /health (also /readyz; /healthz is liveness only, with no checks). `status` is `degraded`
 * when a check fails; the HTTP status is 503 only when the database is unreachable.
 */
export interface HealthCheck {
  status: 'ok' | 'error' | 'skipped';
  latency_ms?: number;
  error?: string;
}
export interface HealthResponse {
  status: 'ok' | 'degraded';
  version: string;
  uptime_seconds: number;
  /** `database` and `broker` (broker `skipped` when the server has no broker probe). */
  checks: Record<string, HealthCheck>;
}

/** A problem found in a playbook: `path` is a JSON path into the document as written. */
export interface PlaybookIssueView {
  path: string;
  message: string;
  severity: 'error' | 'warning';
}

/** POST /api/catalog/playbook. */
export interface RegisterPlaybookRequest {
  content: string;
  /** Defaults to metadata.path, else metadata.name. */
  path?: string;
}
/** 201 when a new version was stored, 200 (created false) when identical content already was. */
export interface RegisterPlaybookResponse {
  catalog_id: Id;
  path: string;
  version: number;
  created: boolean;
  warnings: PlaybookIssueView[];
}

/** GET /api/catalog/playbook/{path}[?version=]. `playbook` is the normalised document. */
export interface CatalogEntryView {
  catalog_id: Id;
  path: string;
  version: number;
  content: string;
  playbook: JsonObject;
  created_at: string;
}
export interface CatalogSummaryView {
  catalog_id: Id;
  path: string;
  version: number;
  name: string;
  description?: string;
  created_at: string;
}
/** GET /api/catalog/playbooks?prefix=&limit=&offset= — latest version of each path. */
export interface PlaybookList {
  playbooks: CatalogSummaryView[];
  count: number;
  limit: number;
  offset: number;
}
/** DELETE /api/catalog/playbook/{path}. */
export interface DeletePlaybookResponse {
  status: 'deleted';
  path: string;
}

export type ExecutionStatusName = 'started' | 'running' | 'completed' | 'failed' | 'cancelled';
export interface StepView {
  status: 'pending' | 'running' | 'completed' | 'failed' | 'skipped';
  runs: number;
  result?: Json;
  error?: Json;
}
/** GET /api/execution/{id}; also the answer of POST /api/execution/{id}/cancel. */
export interface ExecutionView {
  execution_id: Id;
  path: string;
  version: number;
  catalog_id: Id;
  parent_execution_id: Id | null;
  root_execution_id: Id;
  status: ExecutionStatusName;
  payload: JsonObject;
  result: Json | null;
  error: Json | null;
  steps: Record<string, StepView>;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}
/** GET /api/executions?status=&path=&limit=&offset= — newest first. */
export interface ExecutionList {
  executions: ExecutionView[];
  count: number;
  limit: number;
  offset: number;
}

export interface EventView {
  event_id: Id;
  execution_id: Id;
  seq: number;
  name: string;
  step: string | null;
  command_id: number | null;
  payload: JsonObject;
  created_at: string;
}
/** GET /api/events/{id}?after=&limit= — ordered by seq; pass next_after back as `after` (null: no more). */
export interface EventsPage {
  execution_id: Id;
  events: EventView[];
  next_after: number | null;
}

/** POST /api/postgres/execute: runs in one transaction with `SET LOCAL search_path` to schema. */
export interface PostgresExecuteRequest {
  query: string;
  schema?: string;
}
export interface PostgresExecuteResponse {
  status: 'ok';
  result: JsonObject[];
}

/** POST /api/runtime/register, /api/runtime/heartbeat; GET /api/runtime. */
export interface RuntimeRegisterRequest {
  kind: 'server' | 'worker';
  name: string;
  info?: JsonObject;
}
export interface RuntimeHeartbeatRequest {
  kind: 'server' | 'worker';
  name: string;
}
export interface RuntimeEntry {
  kind: 'server' | 'worker';
  name: string;
  info?: JsonObject;
  registered_at: string;
  last_heartbeat: string;
}
export interface RuntimeList {
  runtimes: RuntimeEntry[];
  count: number;
}
export interface StatusOk {
  status: 'ok';
}
