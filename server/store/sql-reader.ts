/**
 * The connection pool of POST /api/postgres/execute: its own small pool, logged in as a role
 * without superuser power, every request one READ ONLY transaction with a statement timeout, one
 * statement per request (extended protocol: `COMMIT; …` cannot leave the read-only transaction).
 *
 * The role is PLAYFLOW_SQL_API_URL's user when that is set (a read-only role the DBA provides),
 * else `playflow_sql_reader` (migration 200): the server gives it LOGIN and a password derived
 * from DATABASE_URL and the encryption key, identical on every replica, and connects as it to the
 * same database. Either way a superuser (or a role able to run programs or read server files) is
 * refused at start, so `COPY … TO PROGRAM` and `pg_read_file` stay out of reach.
 */
import { createHmac } from 'node:crypto';
import pg from 'pg';
import { zonelessParser } from '../../common/pg-zoneless.js';
import { guardPool } from '../db.js';

export const SQL_READER_ROLE = 'playflow_sql_reader';

export interface SqlReaderOptions {
  /** The server's DATABASE_URL; its pool manages the reader role. */
  databaseUrl: string;
  adminPool: pg.Pool;
  /** PLAYFLOW_SQL_API_URL: connect as this role instead of playflow_sql_reader. */
  roleUrl?: string;
  /** Mixed into the derived password (PLAYFLOW_ENCRYPTION_KEY). */
  secret?: string;
  /** statement_timeout, ms. */
  timeoutMs: number;
  poolSize?: number;
}

export interface SqlReader {
  /** Runs one statement read-only; rows and column names of its result. */
  run(query: string, schema?: string): Promise<pg.QueryResult>;
  close(): Promise<void>;
}

export class SqlReaderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SqlReaderError';
  }
}

const quoteIdent = (s: string) => `"${s.replace(/"/g, '""')}"`;
const quoteLiteral = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** Roles whose members can run programs or touch server files: never for the SQL API. */
const DANGEROUS_ROLES = ['pg_execute_server_program', 'pg_read_server_files', 'pg_write_server_files'];

async function readerUrl(opts: SqlReaderOptions): Promise<string> {
  if (opts.roleUrl) return opts.roleUrl;
  const { rows } = await opts.adminPool.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [SQL_READER_ROLE]);
  if (rows.length === 0) {
    throw new SqlReaderError(`PLAYFLOW_SQL_API=on: role ${SQL_READER_ROLE} does not exist (the DATABASE_URL user may not create roles); set PLAYFLOW_SQL_API_URL to a read-only role`);
  }
  const password = createHmac('sha256', `${opts.secret ?? ''}\u0000${opts.databaseUrl}`).update(SQL_READER_ROLE).digest('base64url');
  try {
    await opts.adminPool.query(`ALTER ROLE ${SQL_READER_ROLE} WITH LOGIN PASSWORD ${quoteLiteral(password)}`);
  } catch (err) {
    throw new SqlReaderError(`PLAYFLOW_SQL_API=on: cannot enable login for ${SQL_READER_ROLE} (${(err as Error).message}); set PLAYFLOW_SQL_API_URL to a read-only role`);
  }
  const u = new URL(opts.databaseUrl);
  u.username = SQL_READER_ROLE;
  u.password = password;
  return u.toString();
}

/** The driver's parsers, but zone-less dates and timestamps the same on every host (common/pg-zoneless.ts). */
const READER_TYPES = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    return zonelessParser(oid, format, pg.types) ?? pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

export async function createSqlReader(opts: SqlReaderOptions): Promise<SqlReader> {
  const pool = guardPool(new pg.Pool({
    connectionString: await readerUrl(opts),
    max: opts.poolSize ?? 2,
    application_name: 'playflow-sql-api',
    connectionTimeoutMillis: 10_000,
    types: READER_TYPES,
  }));
  try {
    const { rows } = await pool.query(
      `SELECT current_user AS name, r.rolsuper, r.rolcreaterole, r.rolbypassrls,
              (SELECT array_agg(g.rolname::text) FROM pg_roles g WHERE g.rolname = ANY($1) AND pg_has_role(current_user, g.oid, 'USAGE')) AS granted
         FROM pg_roles r WHERE r.rolname = current_user`,
      [DANGEROUS_ROLES],
    );
    const me = rows[0];
    const powers = [me.rolsuper && 'superuser', me.rolcreaterole && 'createrole', me.rolbypassrls && 'bypassrls', ...(me.granted ?? [])].filter(Boolean);
    if (powers.length) {
      throw new SqlReaderError(`PLAYFLOW_SQL_API=on: the SQL API role ${me.name} has ${powers.join(', ')}; give it a role without (PLAYFLOW_SQL_API_URL)`);
    }
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  const timeout = Math.max(1, Math.floor(opts.timeoutMs));
  return {
    async run(query, schema) {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query(`BEGIN READ ONLY; SET LOCAL statement_timeout = ${timeout}${schema ? `; SET LOCAL search_path TO ${quoteIdent(schema)}` : ''}`);
        try {
          // extended protocol: exactly one statement, so the transaction cannot be ended from inside
          return await client.query({ text: query, queryMode: 'extended' } as pg.QueryConfig);
        } finally {
          await client.query('ROLLBACK').catch(() => (broken = true));
        }
      } catch (err) {
        broken ||= !(err as { code?: string }).code;
        throw err;
      } finally {
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}
