/**
 * JSON Schemas of the HTTP API. Request schemas are inlined in the routes (validated by ajv, see
 * support.ts); response shapes are shared schemas registered once with `app.addSchema` and
 * referenced as `{$ref: 'Name#'}` so the OpenAPI document (/docs/json) names them under
 * components.schemas. They mirror client/protocol.ts.
 *
 * Response schemas never list `required` for optional wire fields: fast-json-stringify would turn
 * a missing optional field into a 500. IDs are `string` (decimal): a number from a service is
 * serialised as its decimal string.
 */

/** Any JSON value. */
export const anyJson = {} as const;
export const jsonObject = { type: 'object', additionalProperties: true } as const;
const timestamp = { type: 'string', format: 'date-time' } as const;
const nullableTimestamp = { type: ['string', 'null'], format: 'date-time' } as const;
export const idString = { type: 'string', pattern: '^[0-9]+$', description: 'int64 id as a decimal string' } as const;
const nullableId = { type: ['string', 'null'], pattern: '^[0-9]+$', description: 'int64 id as a decimal string, or null' } as const;

/** Input id: decimal string or non-negative integer (send strings above 2^53). */
export const idInput = {
  anyOf: [{ type: 'string', pattern: '^[0-9]{1,19}$' }, { type: 'integer', minimum: 0 }],
  description: 'int64 id: decimal string (preferred) or integer',
  'x-message': 'must be an id: a decimal string or a non-negative integer',
} as const;

/** Path parameter id (always a string on the wire). */
export const idParam = {
  type: 'string',
  pattern: '^[0-9]{1,19}$',
  description: 'int64 id (decimal)',
  'x-message': 'must be a decimal integer id',
} as const;

export const limitQuery = (dflt: number, max: number) =>
  ({ type: 'integer', minimum: 1, maximum: max, default: dflt, description: `page size, default ${dflt}, at most ${max}` }) as const;
export const offsetQuery = { type: 'integer', minimum: 0, maximum: 2147483647, default: 0, description: 'rows to skip' } as const;

export const EXECUTION_STATUSES = ['started', 'running', 'completed', 'failed', 'cancelled'] as const;

export const sharedSchemas = [
  {
    $id: 'ErrorBody',
    description: 'Every error answer',
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: { type: 'string', description: 'stable machine-readable code, e.g. not_found, bad_request, playbook_invalid' },
          message: { type: 'string' },
          details: { description: 'code-specific: validation problems, playbook issues, SQL error fields' },
        },
      },
    },
  },
  {
    $id: 'HealthResponse',
    type: 'object',
    required: ['status', 'checks'],
    properties: {
      status: { type: 'string', enum: ['ok', 'degraded'] },
      version: { type: 'string' },
      uptime_seconds: { type: 'number' },
      checks: {
        type: 'object',
        additionalProperties: {
          type: 'object',
          properties: {
            status: { type: 'string', enum: ['ok', 'error', 'skipped'] },
            latency_ms: { type: 'number' },
            error: { type: 'string' },
          },
        },
      },
    },
  },
  {
    $id: 'PlaybookIssue',
    type: 'object',
    properties: {
      path: { type: 'string', description: 'JSON path into the document as written, e.g. workflow[3].next[0]' },
      message: { type: 'string' },
      severity: { type: 'string', enum: ['error', 'warning'] },
    },
  },
  {
    $id: 'RegisterPlaybookResponse',
    type: 'object',
    required: ['catalog_id', 'path', 'version', 'created', 'warnings'],
    properties: {
      catalog_id: idString,
      path: { type: 'string' },
      version: { type: 'integer' },
      created: { type: 'boolean', description: 'false when identical content was already the latest version' },
      warnings: { type: 'array', items: { $ref: 'PlaybookIssue#' } },
    },
  },
  {
    $id: 'CatalogEntry',
    type: 'object',
    required: ['catalog_id', 'path', 'version', 'content'],
    properties: {
      catalog_id: idString,
      path: { type: 'string' },
      version: { type: 'integer' },
      content: { type: 'string', description: 'the YAML as registered' },
      playbook: { ...jsonObject, description: 'the normalised playbook' },
      created_at: timestamp,
    },
  },
  {
    $id: 'CatalogSummary',
    type: 'object',
    properties: {
      catalog_id: idString,
      path: { type: 'string' },
      version: { type: 'integer' },
      name: { type: 'string' },
      description: { type: 'string' },
      created_at: timestamp,
    },
  },
  {
    $id: 'PlaybookList',
    type: 'object',
    required: ['playbooks', 'count'],
    properties: {
      playbooks: { type: 'array', items: { $ref: 'CatalogSummary#' } },
      count: { type: 'integer', description: 'items in this page' },
      limit: { type: 'integer' },
      offset: { type: 'integer' },
    },
  },
  {
    $id: 'RunResponse',
    type: 'object',
    required: ['execution_id', 'status', 'path'],
    properties: {
      execution_id: idString,
      status: { type: 'string', enum: ['started'] },
      path: { type: 'string' },
      version: { type: 'integer' },
      commands: { type: 'integer', description: 'commands queued (and published) by the start' },
    },
  },
  {
    $id: 'StepView',
    type: 'object',
    properties: {
      status: { type: 'string', enum: ['pending', 'running', 'completed', 'failed', 'skipped'] },
      runs: { type: 'integer' },
      result: anyJson,
      error: anyJson,
    },
  },
  {
    $id: 'Execution',
    type: 'object',
    required: ['execution_id', 'status', 'path'],
    properties: {
      execution_id: idString,
      path: { type: 'string' },
      version: { type: 'integer' },
      catalog_id: idString,
      parent_execution_id: nullableId,
      root_execution_id: idString,
      status: { type: 'string', enum: [...EXECUTION_STATUSES] },
      payload: jsonObject,
      result: anyJson,
      error: anyJson,
      steps: { type: 'object', additionalProperties: { $ref: 'StepView#' } },
      created_at: timestamp,
      updated_at: timestamp,
      finished_at: nullableTimestamp,
    },
  },
  {
    $id: 'ExecutionList',
    type: 'object',
    required: ['executions', 'count'],
    properties: {
      executions: { type: 'array', items: { $ref: 'Execution#' } },
      count: { type: 'integer', description: 'items in this page' },
      limit: { type: 'integer' },
      offset: { type: 'integer' },
    },
  },
  {
    $id: 'Event',
    type: 'object',
    properties: {
      event_id: idString,
      execution_id: idString,
      seq: { type: 'integer' },
      name: { type: 'string' },
      step: { type: ['string', 'null'] },
      command_id: { type: ['integer', 'null'] },
      payload: jsonObject,
      created_at: timestamp,
    },
  },
  {
    $id: 'EventsPage',
    type: 'object',
    required: ['execution_id', 'events', 'next_after'],
    properties: {
      execution_id: idString,
      events: { type: 'array', items: { $ref: 'Event#' } },
      next_after: { type: ['integer', 'null'], description: 'pass as `after` for the next page; null when there is no more' },
    },
  },
  {
    $id: 'EventsAck',
    type: 'object',
    required: ['status', 'accepted', 'duplicates', 'commands'],
    properties: {
      status: { type: 'string', enum: ['ok'] },
      accepted: { type: 'integer' },
      duplicates: { type: 'integer' },
      commands: { type: 'integer', description: 'commands queued as a result' },
      claimed: { type: 'array', items: { $ref: 'ClaimedCommand#' }, description: 'with claim_next: the commands leased to its worker' },
    },
  },
  {
    $id: 'ClaimedCommand',
    type: 'object',
    properties: {
      queue_id: idString,
      execution_id: idString,
      catalog_id: idString,
      parent_execution_id: nullableId,
      root_execution_id: idString,
      path: { type: 'string' },
      step: { type: 'string' },
      command_id: { type: 'integer' },
      attempt: { type: 'integer' },
      iteration: { type: ['integer', 'null'] },
      tool: { ...jsonObject, description: 'rendered tool config (secret references left for the worker)' },
      args: jsonObject,
      context: jsonObject,
      child: {
        type: 'object',
        properties: { path: { type: 'string' }, payload: jsonObject },
      },
      workbook: { type: 'array', items: jsonObject },
      lease_until: timestamp,
      worker_id: { type: 'string' },
    },
  },
  {
    $id: 'HeartbeatResponse',
    type: 'object',
    required: ['lease_until'],
    properties: { lease_until: timestamp },
  },
  {
    $id: 'QueueStats',
    type: 'object',
    required: ['queued', 'leased', 'delayed', 'oldest_age_seconds'],
    properties: {
      queued: { type: 'integer' },
      leased: { type: 'integer' },
      delayed: { type: 'integer' },
      oldest_age_seconds: { type: 'number' },
    },
  },
  {
    $id: 'RuntimeList',
    type: 'object',
    required: ['runtimes', 'count'],
    properties: {
      runtimes: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            kind: { type: 'string', enum: ['server', 'worker'] },
            name: { type: 'string' },
            info: jsonObject,
            registered_at: timestamp,
            last_heartbeat: timestamp,
          },
        },
      },
      count: { type: 'integer' },
    },
  },
  {
    $id: 'StatusOk',
    type: 'object',
    required: ['status'],
    properties: { status: { type: 'string', enum: ['ok'] } },
  },
];

export const ref = (id: string) => ({ $ref: `${id}#` }) as const;

/** Error answers a route documents, e.g. `errors(400, 404)`. 401 is added where auth applies. */
export function errors(...codes: number[]): Record<number, { $ref: string; description: string }> {
  const text: Record<number, string> = {
    400: 'Bad request: malformed JSON or a field failing validation (details lists each)',
    401: 'Missing or wrong bearer token',
    403: 'Forbidden',
    404: 'Not found',
    409: 'Conflict',
    410: 'Gone',
    422: 'Playbook invalid: details lists every problem with its path',
    425: 'Too early',
    500: 'Internal fault',
    503: 'Unavailable',
  };
  const out: Record<number, { $ref: string; description: string }> = {};
  for (const c of [...codes, 401]) out[c] = { $ref: 'ErrorBody#', description: text[c] ?? 'Error' };
  return out;
}
