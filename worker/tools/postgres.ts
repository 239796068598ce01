/**
 * `postgres` tool (pg). Fields: command (`query`, legacy `statement`/`sql` also read), args
 * (legacy `params`), auth, legacy `connection` (a postgres:// URL or an auth reference), legacy
 * `operation` (query | execute | insert | update | delete; a `db.` prefix is accepted), and the
 * table sink: `table` with `args` (or `data`) as one row object or a list of rows, `mode: insert |
 * upsert` with `key`, written as one generated, parameterised statement (sql.ts).
 *
 * Bind parameters: `args` is a positional array bound to $1..$n, or an object whose values are
 * bound in insertion order to $1..$n (names are documentation only). With several statements and
 * args, each statement receives the first $k args where $k is its highest placeholder.
 *
 * Connection: auth (credential name, `{type, credential}`, `{type, inline}`) whose data has
 * `db_host/db_port/db_user/db_password/db_name` or `host/port/user/password/database`
 * (or `dsn`/`url`/`connection_string`), `sslmode`/`ssl` optional. One pg.Pool per DSN, at most
 * `maxPools` pools (least recently used closed first), `poolSize` connections each.
 *
 * Response: one statement → `{command, row_count, rows, columns}` (rows as objects; int8 as a
 * number when safe else a string, numeric likewise, timestamps ISO 8601, json parsed);
 * several statements → a list of those, in order. (numeric: a number when it converts without
 * losing digits, else its string.) SQL errors are error outcomes with
 * `code: 'sql_error'` and `data: {sqlstate, detail, position}`.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { zonelessParser } from '../../common/pg-zoneless.js';
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { loadAuth, pick } from './auth-ref.js';
import { bigintToJson, decimalToJson, isObject, str, toJson } from './json.js';
import { withScript } from './script.js';
import { maxPlaceholder, quoteIdent, splitStatements, tableWriteOf, tableWriteSql } from './sql.js';
import { ToolConfigError, fail, ok, type ToolContext, type ToolOutcome } from './types.js';

export interface PostgresSettings {
  maxPools: number;
  poolSize: number;
  idleTimeoutMs: number;
  connectTimeoutMs: number;
}
const settings: PostgresSettings = { maxPools: 16, poolSize: 4, idleTimeoutMs: 30_000, connectTimeoutMs: 10_000 };
export function configurePostgres(s: Partial<PostgresSettings>): void {
  Object.assign(settings, s);
}

const pools = new Map<string, pg.Pool>();

const INT8 = 20;
const NUMERIC = 1700;
/** The driver, loaded by the first postgres step: a worker that runs none does not start it. */
let driver: typeof pg | undefined;

const typeParsers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8) return (v: string) => bigintToJson(BigInt(v));
    if (oid === NUMERIC) return (v: string) => decimalToJson(v);
    return zonelessParser(oid, format, driver!.types, { dateAsText: true }) ?? driver!.types.getTypeParser(oid, format as any);
  },
} as pg.CustomTypesConfig;

function poolFor(loaded: typeof pg, config: pg.PoolConfig): pg.Pool {
  const key = createHash('sha256').update(JSON.stringify(config)).digest('hex');
  let pool = pools.get(key);
  if (pool) {
    pools.delete(key);
    pools.set(key, pool); // most recently used last
    return pool;
  }
  while (pools.size >= settings.maxPools) {
    const [oldKey, old] = pools.entries().next().value as [string, pg.Pool];
    pools.delete(oldKey);
    void old.end().catch(() => {});
  }
  pool = new loaded.Pool({
    ...config,
    max: settings.poolSize,
    idleTimeoutMillis: settings.idleTimeoutMs,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    types: typeParsers,
    application_name: 'playflow-worker',
  });
  pool.on('error', () => {}); // idle client errors: the next checkout reconnects
  pools.set(key, pool);
  return pool;
}

export async function closePostgresPools(): Promise<void> {
  const all = [...pools.values()];
  pools.clear();
  await Promise.allSettled(all.map((p) => p.end()));
}

function connectionConfig(data: JsonObject): pg.PoolConfig {
  const dsn = pick(data, 'dsn', 'url', 'connection_string', 'connectionString', 'uri');
  const sslmode = str(pick(data, 'sslmode', 'ssl_mode'));
  const sslFlag = data.ssl;
  const ssl = sslmode === 'disable' || sslFlag === false || sslmode === undefined && sslFlag === undefined
    ? undefined
    : { rejectUnauthorized: sslmode === 'verify-full' || sslmode === 'verify-ca' };
  if (typeof dsn === 'string') return { connectionString: dsn, ...(ssl ? { ssl } : {}) };
  const host = str(pick(data, 'db_host', 'host', 'hostname'));
  if (!host) throw new ToolConfigError('postgres auth has no host (db_host or host)');
  const port = Number(pick(data, 'db_port', 'port') ?? 5432);
  return {
    host,
    port: Number.isFinite(port) ? port : 5432,
    user: str(pick(data, 'db_user', 'user', 'username')),
    password: str(pick(data, 'db_password', 'password')),
    database: str(pick(data, 'db_name', 'database', 'dbname', 'db')),
    ...(ssl ? { ssl } : {}),
  };
}

async function resolveConnection(tool: Tool, ctx: ToolContext): Promise<pg.PoolConfig> {
  const authRef = tool.auth ?? tool.connection;
  // A legacy `connection` may be a DSN rather than a credential name.
  if (typeof authRef === 'string' && /^postgres(ql)?:\/\//i.test(authRef)) return { connectionString: authRef };
  const auth = await loadAuth(authRef, ctx);
  if (!auth) throw new ToolConfigError('postgres tool needs auth (a credential reference or {type, inline})');
  return connectionConfig(auth.data);
}

function bindValues(args: Json | undefined): unknown[] {
  if (args === undefined || args === null) return [];
  const values = Array.isArray(args) ? args : isObject(args) ? Object.values(args) : [args];
  // pg sends JS objects as JSON text and arrays as postgres arrays; nested objects inside
  // arrays would not survive, so those go as JSON text.
  return values.map((v) => (Array.isArray(v) && v.some((x) => isObject(x)) ? JSON.stringify(v) : v));
}

interface StatementResult {
  command: string | null;
  row_count: number | null;
  rows: Json[];
  columns: string[];
}

function shape(r: pg.QueryResult): StatementResult {
  return {
    command: r.command ?? null,
    row_count: r.rowCount ?? null,
    rows: (r.rows ?? []).map((row) => toJson(row)),
    columns: (r.fields ?? []).map((f) => f.name),
  };
}

interface Plan {
  statements: Array<{ text: string; values: unknown[] }>;
  /** Send the text as one simple query (several statements, no parameters). */
  simple?: string;
}

function planLegacy(op: string, tool: Tool): Plan {
  const table = tool.table;
  if (typeof table !== 'string' || !table) throw new ToolConfigError(`db.${op} needs table`);
  const t = quoteIdent(table);
  if (op === 'insert') {
    const rows = Array.isArray(tool.data) ? tool.data : [tool.data];
    if (rows.length === 0 || !rows.every(isObject)) throw new ToolConfigError('db.insert needs data: an object or a list of objects');
    const cols = [...new Set(rows.flatMap((r) => Object.keys(r as JsonObject)))];
    if (cols.length === 0) throw new ToolConfigError('db.insert data has no fields');
    const values: unknown[] = [];
    const tuples = rows.map((r) => `(${cols.map((c) => {
      values.push(...bindValues([(r as JsonObject)[c] ?? null]));
      return `$${values.length}`;
    }).join(', ')})`);
    return { statements: [{ text: `INSERT INTO ${t} (${cols.map(quoteIdent).join(', ')}) VALUES ${tuples.join(', ')} RETURNING *`, values }] };
  }
  const values: unknown[] = [];
  let where: string;
  if (typeof tool.where === 'string' && tool.where.trim()) {
    // A SQL fragment with its own $1..$m bound from `params`/`args`; SET values follow them.
    where = tool.where;
    values.push(...bindValues(tool.params ?? tool.args));
  } else if (isObject(tool.where) && Object.keys(tool.where).length > 0) {
    where = Object.entries(tool.where).map(([k, v]) => {
      if (v === null) return `${quoteIdent(k)} IS NULL`;
      values.push(...bindValues([v]));
      return `${quoteIdent(k)} = $${values.length}`;
    }).join(' AND ');
  } else throw new ToolConfigError(`db.${op} needs where (an object of column equalities or a SQL condition)`);
  if (op === 'delete') return { statements: [{ text: `DELETE FROM ${t} WHERE ${where} RETURNING *`, values }] };
  if (!isObject(tool.data) || Object.keys(tool.data).length === 0) throw new ToolConfigError('db.update needs data: an object of column values');
  const sets = Object.entries(tool.data).map(([k, v]) => {
    values.push(...bindValues([v]));
    return `${quoteIdent(k)} = $${values.length}`;
  });
  return { statements: [{ text: `UPDATE ${t} SET ${sets.join(', ')} WHERE ${where} RETURNING *`, values }] };
}

/** The table sink (`table` + `args`/`data`, `mode`, `key`) as one parameterised statement. */
function tableWrite(tool: Tool): { text: string; values: unknown[] } | undefined {
  try {
    const w = tableWriteOf(tool, 'postgres');
    if (!w) return undefined;
    const { text, values } = tableWriteSql(w, true);
    return { text, values: bindValues(values as Json[]) };
  } catch (err) {
    throw new ToolConfigError((err as Error).message);
  }
}

function plan(tool: Tool): Plan {
  const op = typeof tool.operation === 'string' ? tool.operation.replace(/^db\./i, '').toLowerCase() : undefined;
  if (op === 'insert' || op === 'update' || op === 'delete') return planLegacy(op, tool);
  const write = tableWrite(tool);
  if (write) return { statements: [write] };
  const sql = tool.command ?? tool.query ?? tool.statement ?? tool.sql;
  if (typeof sql !== 'string' || !sql.trim()) throw new ToolConfigError('postgres tool needs command (SQL text), or table with args for a table write');
  const args = bindValues(tool.args ?? tool.params);
  const parts = splitStatements(sql);
  if (parts.length === 0) throw new ToolConfigError('postgres command has no statement');
  if (args.length === 0 && parts.length > 1) return { statements: [], simple: sql };
  return {
    statements: parts.map((text) => ({ text, values: args.slice(0, maxPlaceholder(text)) })),
  };
}

export async function runPostgres(given: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const tool = await withScript(given, 'command', ctx);
  const p = plan(tool);
  driver ??= (await import('pg')).default;
  const pool = poolFor(driver, await resolveConnection(tool, ctx));
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    return fail(`postgres connection failed: ${(err as Error).message}`, { code: 'network' });
  }
  let broken = false;
  try {
    if (p.simple !== undefined) {
      const res = (await client.query(p.simple)) as unknown as pg.QueryResult | pg.QueryResult[];
      return ok((Array.isArray(res) ? res : [res]).map(shape) as unknown as Json);
    }
    if (p.statements.length === 1) {
      const s = p.statements[0];
      return ok(shape(await client.query(s.text, s.values)) as unknown as Json);
    }
    const results: StatementResult[] = [];
    await client.query('BEGIN');
    try {
      for (const s of p.statements) results.push(shape(await client.query(s.text, s.values)));
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => { broken = true; });
      throw err;
    }
    return ok(results as unknown as Json);
  } catch (err) {
    const e = err as Error & { code?: string; detail?: string; position?: string; severity?: string };
    if (!e.code || !/^[0-9A-Z]{5}$/.test(e.code)) {
      broken = true;
      return fail(`postgres: ${e.message}`, { code: 'network' });
    }
    return fail(e.message, { code: 'sql_error', data: { sqlstate: e.code, detail: e.detail ?? null, position: e.position ?? null } });
  } finally {
    client.release(broken);
  }
}
