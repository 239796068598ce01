/**
 * JSON Schema (draft-07) of the playbook document as authors write it: the v2 language plus the
 * deprecated forms the spec still accepts during the transition (`call` steps, loop
 * `collection`/`element`, legacy retry objects, `loop.pagination`). It is structural on purpose —
 * no `oneOf` — because it is also the source of the Kubernetes CRD schema; free-form parts
 * (workload, args, vars, legacy tool configs) are open objects. Semantic rules (targets exist,
 * removed v1 fields with their v2 replacement, legacy operation parameters) live in validate.ts
 * and normalize.ts, which give better messages than a schema can.
 */
import { API_VERSIONS, TOOL_KINDS } from './types.js';

type Schema = Record<string, unknown>;

const str: Schema = { type: 'string' };
const nonEmpty: Schema = { type: 'string', minLength: 1 };
/** A worker pool's name (a DNS-1123 label: it names the broker consumer and the WorkerPool's target). */
export const POOL_NAME_PATTERN = '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$';
const pool: Schema = {
  type: 'string', pattern: POOL_NAME_PATTERN,
  description: "Worker pool that runs the step's calls (a DNS-1123 label); default: the playbook's pool, else `default`",
};
const openObject: Schema = { type: 'object', additionalProperties: true };
/**
 * An object-typed field that may instead be one whole-expression template rendering to the
 * object (`params: "{{ workload.query }}"`). Text around the braces would render to a string,
 * so only a single `{{ … }}` is accepted.
 */
export const WHOLE_TEMPLATE_PATTERN = '^\\s*\\{\\{[\\s\\S]*\\}\\}\\s*$';
const objectOrTemplate: Schema = { type: ['object', 'string'], pattern: WHOLE_TEMPLATE_PATTERN, additionalProperties: true };
/** Numbers and booleans may also be templates rendered at run time. */
const num: Schema = { type: ['number', 'string'] };
const int: Schema = { type: ['integer', 'string'] };
const bool: Schema = { type: ['boolean', 'string'] };
/** Backoff jitter: a fraction of the delay (0..1), or false for none. */
const jitter: Schema = { type: ['number', 'boolean', 'string'] };

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'] as const;

const auth: Schema = {
  description: 'Credential reference name (may be a template), or {type, inline} / {type, credential}',
  type: ['string', 'object'],
  properties: {
    type: str,
    credential: str,
    inline: {
      // an object of connection fields, or one template rendering to such an object
      type: ['object', 'string'],
      properties: { host: str, port: int, user: str, password: str, database: str },
      additionalProperties: true,
    },
  },
  additionalProperties: true,
};

/**
 * The table sink of postgres and duckdb: `table` with `args` (or `data`) as one row object or a
 * list of rows, written with generated, parameterised SQL; `mode: upsert` needs `key` (a column
 * or a list of columns of a unique constraint).
 */
function tableSink(): Record<string, Schema> {
  return {
    table: nonEmpty,
    data: { type: ['object', 'array', 'string'] },
    mode: { type: 'string', enum: ['insert', 'upsert'] },
    key: { type: ['string', 'array'], items: nonEmpty, minLength: 1 },
  };
}

/** Fields per tool kind. `null` = free-form (kinds whose fields the spec does not fix). */
const TOOL_FIELDS: Record<(typeof TOOL_KINDS)[number], Record<string, Schema> | null> = {
  http: {
    method: { type: 'string', enum: [...HTTP_METHODS, ...HTTP_METHODS.map((m) => m.toLowerCase())] },
    endpoint: nonEmpty,
    url: nonEmpty,
    params: objectOrTemplate,
    headers: objectOrTemplate,
    json: { type: ['object', 'array', 'string'] },
    data: { type: ['object', 'array', 'string'] },
    payload: { type: ['object', 'string'] },
    timeout: num,
    verify: bool,
    auth,
    args: objectOrTemplate,
  },
  postgres: {
    command: nonEmpty,
    query: nonEmpty,
    script: { type: ['string', 'object'] },
    // bind parameters: a list for $1..$n, or an object whose values bind in order
    args: { type: ['object', 'array', 'string'] },
    params: { type: ['array', 'object', 'string'] },
    auth,
    database: str,
    // written by normalisation of the legacy db.insert/update/delete operations
    operation: { type: 'string', enum: ['insert', 'update', 'delete'] },
    ...tableSink(),
    where: { type: ['object', 'string'] },
  },
  duckdb: { database: str, query: nonEmpty, command: nonEmpty, args: { type: ['object', 'array', 'string'] }, auth, ...tableSink() },
  python: {
    code: nonEmpty,
    // reference convention: text (rewritten to code), or {path} / {url} the worker loads
    script: { type: ['string', 'object'] },
    args: objectOrTemplate,
    libs: { type: 'object', additionalProperties: { type: 'string' } },
    with: openObject,
    timeout: num,
  },
  playbook: { path: nonEmpty, args: objectOrTemplate, with: objectOrTemplate, version: { type: ['integer', 'string'] } },
  workbook: { name: nonEmpty, args: objectOrTemplate, with: objectOrTemplate },
  secret: null,
  file: null,
  email: null,
  slack: null,
  webhook: null,
  transform: null,
  console: null,
};

function toolSchema(): Schema {
  return {
    type: 'object',
    required: ['kind'],
    properties: { kind: { type: 'string', enum: [...TOOL_KINDS] } },
    additionalProperties: true,
    allOf: Object.entries(TOOL_FIELDS)
      .filter(([, fields]) => fields !== null)
      .map(([kind, fields]) => ({
        if: { properties: { kind: { const: kind } }, required: ['kind'] },
        then: { properties: { kind: str, ...fields }, additionalProperties: false },
      })),
  };
}

const nextTarget: Schema = {
  description: 'A step name, or {step, args}',
  type: ['string', 'object'],
  minLength: 1,
  properties: { step: nonEmpty, args: objectOrTemplate },
  required: ['step'],
  additionalProperties: false,
};
const next: Schema = {
  description: 'next: <step> | [<step>, ...] | [{step, args}, ...]',
  type: ['string', 'array'],
  minLength: 1,
  items: nextTarget,
};

const retryThen: Schema = {
  type: 'object',
  properties: {
    max_attempts: int,
    backoff_multiplier: num,
    initial_delay: num,
    jitter,
    max_delay: num,
    next_call: openObject,
    collect: {
      type: 'object',
      properties: { strategy: { type: 'string', enum: ['append', 'replace', 'merge'] }, path: str, into: str },
      additionalProperties: false,
    },
    sink: openObject,
    per_iteration: { type: 'object', properties: { sink: openObject }, additionalProperties: false },
  },
  additionalProperties: false,
};

const retry: Schema = {
  description: 'List of {when, then} policies; the legacy {on_error, on_success} and {when, max_attempts} objects are accepted (deprecated)',
  type: ['array', 'object'],
  items: {
    type: 'object',
    required: ['when', 'then'],
    properties: { when: nonEmpty, then: retryThen },
    additionalProperties: false,
  },
  properties: {
    on_error: {
      type: 'object',
      properties: { when: str, max_attempts: int, backoff_multiplier: num, initial_delay: num },
      additionalProperties: false,
    },
    on_success: {
      type: 'object',
      properties: {
        while: str,
        when: str,
        max_attempts: int,
        next_call: openObject,
        collect: retryThen.properties && (retryThen.properties as Schema).collect,
        sink: openObject,
        per_iteration: { type: 'object', properties: { sink: openObject }, additionalProperties: false },
      },
      additionalProperties: false,
    },
    when: nonEmpty,
    then: retryThen,
    max_attempts: int,
    backoff_multiplier: num,
    initial_delay: num,
  },
  additionalProperties: false,
};

const pagination: Schema = {
  description: 'Legacy HTTP pagination (deprecated in favour of retry)',
  type: 'object',
  required: ['type', 'continue_while', 'merge_strategy'],
  properties: {
    type: { type: 'string', enum: ['response_based'] },
    continue_while: nonEmpty,
    next_page: {
      type: 'object',
      properties: { params: openObject, body: openObject, headers: openObject },
      additionalProperties: false,
    },
    merge_strategy: { type: 'string', enum: ['append', 'extend', 'replace', 'collect'] },
    merge_path: str,
    max_iterations: int,
    retry: {
      type: 'object',
      properties: {
        max_attempts: int,
        backoff: { type: 'string', enum: ['fixed', 'exponential'] },
        initial_delay: num,
        max_delay: num,
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
};

const loop: Schema = {
  type: 'object',
  properties: {
    in: { description: 'Template expression or literal list' },
    iterator: nonEmpty,
    mode: { type: 'string', enum: ['sequential', 'async'] },
    max_in_flight: int,
    collection: { description: 'Legacy synonym of in' },
    element: nonEmpty,
    pagination,
  },
  additionalProperties: false,
};

const actions: Record<string, Schema> = {
  call: { type: ['object', 'null', 'boolean'], additionalProperties: true },
  retry: {
    type: ['object', 'null', 'boolean'],
    properties: { max_attempts: int, backoff_multiplier: num, initial_delay: num, jitter, max_delay: num },
    additionalProperties: false,
  },
  collect: {
    type: 'object',
    required: ['from', 'into'],
    properties: { from: {}, into: nonEmpty, mode: { type: 'string', enum: ['append', 'extend'] } },
    additionalProperties: false,
  },
  sink: openObject,
  set: { type: 'object', required: ['ctx'], properties: { ctx: openObject }, additionalProperties: false },
  result: { type: ['object', 'string'], properties: { from: {} }, additionalProperties: false },
  next,
  fail: { type: ['object', 'null', 'boolean', 'string'], properties: { message: str }, additionalProperties: false },
  skip: { type: ['object', 'null', 'boolean'] },
};
const actionBlock: Schema = { type: 'object', properties: actions, additionalProperties: false };

const caseEntry: Schema = {
  type: 'object',
  required: ['when', 'then'],
  properties: {
    when: nonEmpty,
    then: { type: ['object', 'array'], properties: actions, additionalProperties: false, items: actionBlock },
  },
  additionalProperties: false,
};

const call: Schema = {
  description: 'Legacy task-guide call (deprecated): {name, type, args}',
  type: 'object',
  properties: { name: str, type: str, args: openObject },
  additionalProperties: false,
};

function stepSchema(v1: boolean): Schema {
  return {
    type: 'object',
    required: ['step'],
    properties: {
      step: nonEmpty,
      desc: str,
      pool,
      args: openObject,
      loop,
      tool: toolSchema(),
      case: { type: 'array', items: caseEntry },
      next: v1 ? { type: ['string', 'array'] } : next,
      vars: openObject,
      retry,
      call,
    },
    // v1 steps carry their tool attributes inline; normalize.ts lifts and checks them.
    additionalProperties: v1,
  };
}

const keychainEntry: Schema = {
  type: 'object',
  required: ['name', 'kind'],
  properties: {
    name: nonEmpty,
    kind: { type: 'string', enum: ['secret_manager', 'oauth2', 'http', 'env', 'file'] },
    provider: { type: 'string', enum: ['gcp', 'aws', 'azure'] },
    scope: { type: 'string', enum: ['global', 'local', 'shared'] },
    auth: str,
    map: { type: 'object', additionalProperties: { type: 'string' } },
    endpoint: str,
    method: str,
    headers: openObject,
    data: {},
    auto_renew: bool,
    ttl_seconds: int,
  },
  additionalProperties: true,
};

function documentSchema(v1: boolean): Schema {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $id: v1 ? 'https://playflow.io/schemas/playbook-v1.json' : 'https://playflow.io/schemas/playbook.json',
    title: 'Playflow playbook',
    type: 'object',
    required: v1 ? ['apiVersion', 'kind', 'workflow'] : ['apiVersion', 'kind', 'metadata', 'workflow'],
    properties: {
      apiVersion: { type: 'string', enum: [...API_VERSIONS] },
      kind: { type: 'string', const: 'Playbook' },
      metadata: {
        type: 'object',
        required: ['name'],
        properties: {
          name: nonEmpty,
          path: str,
          description: str,
          labels: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } },
        },
        // other keys (version, tags, owner, …) are kept as written and not interpreted
        additionalProperties: true,
      },
      workload: openObject,
      keychain: { type: 'array', items: keychainEntry },
      workbook: {
        type: 'array',
        items: v1
          ? { type: 'object' }
          : {
              type: 'object',
              required: ['name', 'tool'],
              properties: { name: nonEmpty, desc: str, tool: toolSchema() },
              additionalProperties: false,
            },
      },
      workflow: { type: 'array', minItems: 1, items: stepSchema(v1) },
      pool,
      concurrency: {
        type: 'object',
        required: ['limit'],
        properties: { limit: { type: 'integer', minimum: 1, maximum: 100000 } },
        additionalProperties: false,
      },
      schedules: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name', 'cron'],
          properties: {
            name: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,62}$' },
            cron: nonEmpty,
            timezone: nonEmpty,
            version: { type: ['integer', 'null'], minimum: 1 },
            payload: openObject,
            concurrency_policy: { type: 'string', enum: ['Allow', 'Forbid', 'Replace'] },
            missed_runs: { type: 'string', enum: ['RunOnce', 'Skip'] },
            starting_deadline_seconds: { type: ['integer', 'null'], minimum: 1 },
            suspend: { type: 'boolean' },
          },
          additionalProperties: false,
        },
      },
    },
    // v1 documents kept name/path/description at the top level.
    additionalProperties: v1,
  };
}

/** One tool spec (a step's tool, a sink, a workbook task's tool), for checks outside the document schema. */
export const toolJsonSchema: Schema = toolSchema();

/** The v2 document schema (legacy transition forms included). */
export const playbookJsonSchema: Schema = documentSchema(false);
/** Relaxed schema for v1 documents, whose inline step attributes normalisation lifts into `tool`. */
export const playbookV1JsonSchema: Schema = documentSchema(true);
