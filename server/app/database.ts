/**
 * POST /api/postgres/execute `{query, schema?}` → `{status: 'ok', result: [rows]}`.
 *
 * Runs one statement against the server's own database, read-only, on a pool of its own as a
 * role without superuser power (server/store/sql-reader.ts), with `SET LOCAL search_path` to
 * `schema` when given and a statement timeout; its rows are returned (int8/numeric as strings,
 * timestamps as ISO strings). SQL errors (writes, several statements, a refused COPY … TO
 * PROGRAM, the timeout) → 400 `sql_error` with the database's message and its fields (SQLSTATE
 * code, position, detail, hint) in details; a lost connection is this request's 503.
 *
 * Off by default (403 `sql_api_disabled`); PLAYFLOW_SQL_API=on enables it, and it is then only
 * served with an API token configured (else 403 `sql_api_requires_token`). Workers do not need
 * it: they claim commands through /api/v2/commands.
 */
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { PostgresExecuteRequest, PostgresExecuteResponse } from '../../common/contract/index.js';
import { AppError } from '../errors.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema } from './support.js';

const SQL_ERROR_FIELDS = ['code', 'position', 'detail', 'hint', 'schema', 'table', 'column', 'constraint', 'where'] as const;

export async function databaseRoutes(fastify: FastifyInstance, { deps, options }: AppContext) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post('/api/postgres/execute', {
    schema: routeSchema('database', "Run one read-only SQL statement on the server's database (off unless PLAYFLOW_SQL_API=on)", {
      body: PostgresExecuteRequest,
      response: {
        200: PostgresExecuteResponse,
        ...errors(400, 403, 503),
      },
    }),
  }, async (req) => {
    if (!options.sqlApi) {
      throw new AppError(403, 'sql_api_disabled', 'POST /api/postgres/execute is disabled on this server (PLAYFLOW_SQL_API=off, the default; enable it with PLAYFLOW_SQL_API=on and a PLAYFLOW_API_TOKEN)');
    }
    if (!options.apiToken) {
      throw new AppError(403, 'sql_api_requires_token', 'POST /api/postgres/execute is only served behind the API token: set PLAYFLOW_API_TOKEN');
    }
    if (!deps.sql) throw new AppError(503, 'sql_api_unavailable', 'the SQL API has no read-only connection pool on this server');
    const { query, schema } = req.body;
    try {
      const res = await deps.sql.run(query, schema);
      return { status: 'ok' as const, result: Array.isArray(res.fields) && res.fields.length > 0 ? res.rows : [] };
    } catch (err) {
      throw sqlError(err);
    }
  });
}

/**
 * A database error caused by the statement → 400 `sql_error` naming the database's message.
 * Errors of the database itself (connection, resources, shutdown, internal: SQLSTATE classes 08,
 * 53, 57P, 58, XX) stay faults (500).
 */
function sqlError(err: unknown): unknown {
  const e = err as Record<string, unknown> & { message?: string };
  const code = e?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return err;
  if (/^(08|53|57P|58|XX)/.test(code) && code !== '57014') return err;
  const details: Record<string, unknown> = {};
  for (const f of SQL_ERROR_FIELDS) if (e[f] !== undefined) details[f] = e[f];
  return new AppError(400, 'sql_error', e.message ?? 'SQL error', details);
}
