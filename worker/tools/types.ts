/**
 * The worker's tool contract. A tool gets a `ToolContext` and returns a `ToolOutcome`; it never
 * throws for a failure of the thing it calls (HTTP 500, SQL error, Python exception): those are
 * outcomes with `error`, reported to the server as `call.done` events. A throw from a tool is a
 * bug or a worker-side fault and the runtime treats it as such.
 */
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { type Logger } from '../../common/logger.js';
import { parsedOnRead } from '../../common/raw-json.js';

export type { Json, JsonObject, Tool };

export interface ToolErrorBody {
  message: string;
  /** HTTP status for http-like tools (`error.status in [500, 503]` in case rules). */
  status?: number;
  /** Machine-readable: `timeout`, `network`, `http_error`, `bad_config`, `python_error`, `sql_error`, … */
  code?: string;
  data?: Json;
}

export type ToolOutcome =
  /**
   * `responseJson`: the response as the JSON text the tool received, when it is large and the
   * worker only forwards it (python); `response` is then parsed from it on first use.
   */
  | { response: Json; responseJson?: string; log?: string; error?: undefined }
  | { error: ToolErrorBody; log?: string; response?: undefined; responseJson?: undefined };

/** Decrypted credential data (fields as stored, e.g. `db_host`, `access_token`, `api_key`). */
export type AuthData = JsonObject;

/**
 * Resolves an auth reference: a credential name (string), `{type, credential: <name>}`, or
 * anything else the credential module accepts. `{type, inline: {...}}` never reaches it (tools
 * read inline data directly). Pluggable: the credentials/keychain module provides the real one.
 */
export type ResolveAuth = (auth: Json) => Promise<AuthData>;

export interface ToolContext {
  /** The step's rendered args (ClaimedCommand.args). */
  args: JsonObject;
  execution_id: string;
  step: string;
  resolveAuth: ResolveAuth;
  /** The playbook's `workbook:` task table (ClaimedCommand.workbook). */
  workbook?: JsonObject[];
  /** Template context the server sent (workload, vars, …) for late rendering (workbook tasks). */
  template?: JsonObject;
  /** Aborted when the worker shuts down past its grace period or the call is cancelled. */
  signal: AbortSignal;
  logger: Logger;
  /** Nesting depth of workbook → tool calls (guards against a task calling itself). */
  depth?: number;
  /** Finishes a tool config rendered late (a workbook task): secret references such as
   *  `{{ keychain.x.y }}`. Supplied by the runtime (the keychain module's renderer). */
  prepareTool?: (tool: Tool) => Promise<Tool>;
  /** Per-worker runners consulted before the global registry (e.g. `secret`, bound to this worker's client). */
  runners?: Record<string, ToolRunner>;
}

export type ToolRunner = (tool: Tool, ctx: ToolContext) => Promise<ToolOutcome>;


export function fail(message: string, extra: Omit<ToolErrorBody, 'message'> = {}, log?: string): ToolOutcome {
  const error: ToolErrorBody = { message, ...extra };
  return log === undefined ? { error } : { error, log };
}

export function ok(response: Json, log?: string): ToolOutcome {
  return log === undefined ? { response } : { response, log };
}

/** A success whose response stays JSON text until something reads `response` (see ToolOutcome). */
export function okJson(responseJson: string, log?: string): ToolOutcome {
  return parsedOnRead({ responseJson, ...(log === undefined ? {} : { log }) }, 'response', responseJson) as ToolOutcome;
}

/** Thrown inside a tool for a bad tool configuration; `runTool` turns it into an error outcome. */
export class ToolConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolConfigError';
  }
}

/**
 * A fault of the worker's side (server unreachable while resolving auth, …), not of the call:
 * `runTool` rethrows it and the runtime negatively acknowledges the notification so the broker
 * redelivers it. Every other failure becomes an error outcome.
 */
export class WorkerFault extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'WorkerFault';
  }
}
