/**
 * POST /api/postgres/execute `{query, schema?}` → `{status: 'ok', result: [rows]}`.
 *
 * Runs `query` against the server's own database in one transaction, with `SET LOCAL
 * search_path` to `schema` when given and a statement timeout; rows of the last statement are
 * returned (int8/numeric as strings, timestamps as ISO strings). SQL errors → 400 `sql_error`
 * with the database's message and its fields (SQLSTATE code, position, detail, hint) in details.
 *
 * This is arbitrary SQL on the server's database: it is behind the API token when one is set
 * (like every endpoint) and can be switched off with PLAYFLOW_SQL_API=off (then 403
 * `sql_api_disabled`). Workers do not need it: they claim commands through /api/v2/commands.
 */
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import type { PostgresExecuteRequest } from '../../client/protocol.js';
import { AppError } from '../errors.js';
import type { AppContext } from './context.js';
import { errors, jsonObject } from './schemas.js';
import { routeSchema } from './support.js';

const SQL_ERROR_FIELDS = ['code', 'position', 'detail', 'hint', 'schema', 'table', 'column', 'constraint', 'where'] as const;

function quoteIdent(s: string): string {
  return `"${s.replace(/"/g, '""')}"`;
}

export async function databaseRoutes(app: FastifyInstance, { deps, options }: AppContext) {
  app.post<{ Body: PostgresExecuteRequest }>('/api/postgres/execute', {
    schema: routeSchema('database', "Run SQL on the server's database (one transaction)", {
      body: {
        type: 'object',
        required: ['query'],
        properties: {
          query: { type: 'string', minLength: 1, description: 'SQL; several statements allowed, the last one returning rows gives the result' },
          schema: { type: 'string', minLength: 1, maxLength: 63, description: 'search_path for the transaction' },
        },
      },
      response: {
        200: {
          type: 'object',
          required: ['status', 'result'],
          properties: { status: { type: 'string', enum: ['ok'] }, result: { type: 'array', items: jsonObject } },
        },
        ...errors(400, 403),
      },
    }),
  }, async (req) => {
    if (!options.sqlApi) {
      throw new AppError(403, 'sql_api_disabled', 'POST /api/postgres/execute is disabled on this server (PLAYFLOW_SQL_API=off)');
    }
    const { query, schema } = req.body;
    const client = await deps.db.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(options.sqlTimeoutMs))}`);
      if (schema) await client.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
      let res: pg.QueryResult | pg.QueryResult[];
      try {
        res = await client.query(query);
      } catch (err) {
        await client.query('ROLLBACK').catch(() => (broken = true));
        throw sqlError(err);
      }
      await client.query('COMMIT');
      // Several statements: the rows of the last one that returns rows (e.g. `…; SELECT …; COMMIT`).
      const results = Array.isArray(res) ? res : [res];
      const withRows = [...results].reverse().find((r) => Array.isArray(r.fields) && r.fields.length > 0);
      return { status: 'ok', result: withRows?.rows ?? [] };
    } catch (err) {
      if (!(err instanceof AppError)) {
        await client.query('ROLLBACK').catch(() => (broken = true));
        const e = err as { code?: string };
        // Errors of BEGIN/SET/COMMIT are SQL errors too (e.g. a deferred constraint at COMMIT).
        if (typeof e.code === 'string') throw sqlError(err);
      }
      throw err;
    } finally {
      client.release(broken);
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
