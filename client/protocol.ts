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
