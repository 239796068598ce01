/**
 * `duckdb` tool (@duckdb/node-api). Fields: database (file path, or `:memory:` — the default),
 * query (`command`/`sql` also read; several statements allowed), args (a positional array bound
 * to `?`/`$1…`, or an object bound by name to `$name`), timeout (seconds, optional: the query is
 * interrupted), or the table sink: `table` with `args`/`data` rows, `mode: insert | upsert`, `key`.
 *
 * `:memory:` gives each call its own fresh database (nothing leaks between executions); a file
 * database is opened once per worker process (DuckDB's instance cache) and a connection is made
 * per call.
 *
 * Response: one statement → `{rows, columns, row_count}`; several → a list of those. Values:
 * BIGINT/HUGEINT/DECIMAL → number when exact else string, DATE/TIMESTAMP → ISO strings, BLOB → base64,
 * LIST/STRUCT/MAP → arrays and objects.
 */
import { DuckDBInstance, DuckDBTypeId, StatementType, type DuckDBConnection, type DuckDBPreparedStatement, type DuckDBValue } from '@duckdb/node-api';
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { decimalToJson, isObject, toJson } from './json.js';
import { timeoutMs } from './http.js';
import { tableWriteOf, tableWriteSql } from './sql.js';
import { ToolConfigError, fail, ok, type ToolContext, type ToolOutcome } from './types.js';

function toDuck(v: Json): DuckDBValue {
  if (v === null || typeof v !== 'object') return v as unknown as DuckDBValue;
  if (Array.isArray(v) && v.every((x) => x === null || typeof x !== 'object')) return v as unknown as DuckDBValue;
  return JSON.stringify(v);
}

function bind(prepared: DuckDBPreparedStatement, args: Json | undefined): void {
  const n = prepared.parameterCount;
  if (n === 0 || args === undefined || args === null) return;
  if (Array.isArray(args)) {
    for (let i = 1; i <= n; i++) {
      const name = prepared.parameterName(i);
      const idx = /^\d+$/.test(name) ? Number(name) - 1 : i - 1;
      if (idx >= args.length) throw new ToolConfigError(`duckdb statement expects ${n} parameters, got ${args.length}`);
      prepared.bindValue(i, toDuck(args[idx]));
    }
    return;
  }
  if (!isObject(args)) throw new ToolConfigError('duckdb args must be a list or an object');
  const values = Object.values(args);
  for (let i = 1; i <= n; i++) {
    const name = prepared.parameterName(i);
    if (Object.prototype.hasOwnProperty.call(args, name)) prepared.bindValue(i, toDuck(args[name]));
    else if (/^\d+$/.test(name) && Number(name) - 1 < values.length) prepared.bindValue(i, toDuck(values[Number(name) - 1]));
    else throw new ToolConfigError(`duckdb parameter $${name} has no value in args`);
  }
}

async function runAll(conn: DuckDBConnection, sql: string, args: Json | undefined): Promise<JsonObject[]> {
  const extracted = await conn.extractStatements(sql);
  if (extracted.count === 0) throw new ToolConfigError('duckdb query has no statement');
  const results: JsonObject[] = [];
  for (let i = 0; i < extracted.count; i++) {
    const prepared = await extracted.prepare(i);
    bind(prepared, args);
    const reader = await prepared.runAndReadAll();
    const columns = reader.columnNames();
    const rows = reader.getRowObjectsJS().map((r) => toJson(r)) as JsonObject[];
    // DECIMAL as JS would be a double: take its exact text and keep it a string when a number would lose digits.
    const decimals = reader.columnTypes().map((t, i) => (t.typeId === DuckDBTypeId.DECIMAL ? columns[i] : null)).filter((c): c is string => c !== null);
    if (decimals.length > 0) {
      reader.getRowObjects().forEach((raw, i) => {
        for (const c of decimals) rows[i][c] = raw[c] === null ? null : decimalToJson(String(raw[c]));
      });
    }
    const t = reader.statementType;
    const changes = t === StatementType.INSERT || t === StatementType.UPDATE || t === StatementType.DELETE;
    results.push({ rows, columns, row_count: changes ? reader.rowsChanged : rows.length });
  }
  return results;
}

export async function runDuckdb(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  let sql = tool.query ?? tool.command ?? tool.sql;
  let args: Json | undefined = tool.args ?? tool.params;
  let write: ReturnType<typeof tableWriteOf>;
  try {
    write = tableWriteOf(tool, 'duckdb');
  } catch (err) {
    throw new ToolConfigError((err as Error).message);
  }
  if (write) {
    // the table sink: one generated statement, values bound positionally ($1..$n)
    const generated = tableWriteSql(write, false);
    sql = generated.text;
    args = generated.values as Json[];
  }
  if (typeof sql !== 'string' || !sql.trim()) throw new ToolConfigError('duckdb tool needs query (SQL text), or table with args for a table write');
  const database = tool.database ?? ':memory:';
  if (typeof database !== 'string' || !database) throw new ToolConfigError('duckdb database must be a path or :memory:');
  const memory = database === ':memory:';
  const limit = tool.timeout === undefined || tool.timeout === null ? undefined : timeoutMs(tool.timeout, 0);
  let instance: DuckDBInstance;
  try {
    instance = memory ? await DuckDBInstance.create(':memory:') : await DuckDBInstance.fromCache(database);
  } catch (err) {
    return fail(`duckdb: cannot open ${database}: ${(err as Error).message}`, { code: 'duckdb_error' });
  }
  const conn = await instance.connect();
  let timedOut = false;
  const onAbort = () => conn.interrupt();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  const timer = limit ? setTimeout(() => { timedOut = true; conn.interrupt(); }, limit) : undefined;
  try {
    const results = await runAll(conn, sql, args);
    return ok(results.length === 1 ? results[0] : results);
  } catch (err) {
    if (err instanceof ToolConfigError) throw err;
    if (timedOut) return fail(`duckdb query timed out after ${limit! / 1000}s`, { code: 'timeout' });
    return fail(`duckdb: ${(err as Error).message}`, { code: 'duckdb_error' });
  } finally {
    if (timer) clearTimeout(timer);
    ctx.signal.removeEventListener('abort', onAbort);
    conn.closeSync();
    if (memory) instance.closeSync();
  }
}
