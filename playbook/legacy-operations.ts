/**
 * The legacy task-guide operations (`http.get`, `db.insert`, `notify.slack`, …) and their
 * rewrite into v2 tools. HTTP and SQL statements map onto the real http/postgres tools; table
 * operations and the remaining families keep their meaning in an `operation` field so the
 * worker's legacy tools can run them without guessing SQL quoting for templated values.
 */
import type { Json, JsonObject, Tool, ToolKind } from './types.js';
import { Issues, type PathSeg } from './issues.js';

interface OperationDef {
  kind: ToolKind;
  required: string[];
  optional: string[];
  /** Builds the tool from the operation's parameters. */
  build: (p: JsonObject) => Omit<Tool, 'kind'>;
}

const pick = (p: JsonObject, names: string[]): JsonObject => {
  const out: JsonObject = {};
  for (const n of names) if (p[n] !== undefined) out[n] = p[n];
  return out;
};

const http = (method: string, optional: string[]): OperationDef => ({
  kind: 'http',
  required: ['url'],
  optional,
  build: (p) => ({ method, endpoint: p.url, ...pick(p, optional) }),
});

const operation = (kind: ToolKind, op: string, required: string[], optional: string[] = []): OperationDef => ({
  kind,
  required,
  optional,
  build: (p) => ({ operation: op, ...pick(p, [...required, ...optional]) }),
});

/** Postgres table operations: `connection` is the auth reference of the db.* family. */
const dbOperation = (op: string, required: string[]): OperationDef => ({
  kind: 'postgres',
  required: ['connection', ...required],
  optional: [],
  build: (p) => ({ operation: op, auth: p.connection, ...pick(p, required) }),
});

export const LEGACY_OPERATIONS: Record<string, OperationDef> = {
  'http.get': http('GET', ['params', 'headers', 'timeout', 'verify']),
  'http.post': http('POST', ['data', 'json', 'params', 'headers', 'timeout', 'verify']),
  'http.put': http('PUT', ['data', 'json', 'params', 'headers', 'timeout', 'verify']),
  'http.delete': http('DELETE', ['params', 'headers', 'timeout', 'verify']),
  'db.query': {
    kind: 'postgres',
    required: ['connection', 'query'],
    optional: ['params'],
    build: (p) => ({ auth: p.connection, command: p.query, ...pick(p, ['params']) }),
  },
  'db.execute': {
    kind: 'postgres',
    required: ['connection', 'statement'],
    optional: ['params'],
    build: (p) => ({ auth: p.connection, command: p.statement, ...pick(p, ['params']) }),
  },
  'db.insert': dbOperation('insert', ['table', 'data']),
  'db.update': dbOperation('update', ['table', 'data', 'where']),
  'db.delete': dbOperation('delete', ['table', 'where']),
  'file.read': operation('file', 'read', ['path'], ['format', 'encoding']),
  'file.write': operation('file', 'write', ['path', 'data'], ['format', 'encoding', 'mode']),
  'file.append': operation('file', 'append', ['path', 'data'], ['format', 'encoding']),
  'file.delete': operation('file', 'delete', ['path']),
  'transform.map': operation('transform', 'map', ['data', 'function']),
  'transform.filter': operation('transform', 'filter', ['data', 'condition']),
  'transform.reduce': operation('transform', 'reduce', ['data', 'function'], ['initial']),
  'transform.merge': operation('transform', 'merge', ['objects']),
  'notify.email': operation('email', 'send', ['to', 'subject', 'body'], ['from', 'cc', 'bcc', 'attachments']),
  'notify.slack': operation('slack', 'send', ['webhook', 'message'], ['channel', 'username', 'icon_emoji', 'attachments']),
  'notify.webhook': operation('webhook', 'send', ['url', 'data'], ['method', 'headers']),
  'console.print': operation('console', 'print', ['message']),
};

export function isLegacyOperation(name: unknown): name is string {
  return typeof name === 'string' && Object.hasOwn(LEGACY_OPERATIONS, name);
}

/**
 * Rewrites one operation call. Missing required parameters are errors at `paramsPath.<name>`;
 * parameters the operation does not know are errors too, since they were silently ignored
 * before and usually hide a typo.
 */
export function operationToTool(op: string, params: JsonObject, paramsPath: readonly PathSeg[], issues: Issues): Tool {
  const def = LEGACY_OPERATIONS[op];
  for (const name of def.required) {
    if (params[name] === undefined) issues.error([...paramsPath, name], `operation '${op}' requires '${name}'`);
  }
  const known = new Set([...def.required, ...def.optional]);
  for (const name of Object.keys(params)) {
    if (!known.has(name)) {
      issues.error([...paramsPath, name], `operation '${op}' has no parameter '${name}'; it accepts ${[...known].join(', ')}`);
    }
  }
  const tool: Tool = { kind: def.kind, ...(def.build(params) as Record<string, Json>) };
  return tool;
}
