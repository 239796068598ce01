/**
 * PostgreSQL access: a pg Pool plus a transaction helper (the `Db` of services.ts).
 *
 * int8/bigint columns (ids, counts) are returned as decimal strings so int64 ids round-trip
 * exactly through JSON and JavaScript; the parser is set on this pool only, never globally.
 */
import pg from 'pg';
import type { Db } from './services.js';

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/** Type parsers of our pools: int8 and numeric stay strings, everything else as pg does. */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (v: string) => v;
    return pg.types.getTypeParser(oid, format ?? 'text');
  },
};

export interface DbOptions {
  /** Pool size; default 10. */
  max?: number;
  /** Sets `application_name` so connections are recognisable in pg_stat_activity. */
  applicationName?: string;
}

export interface ClosableDb extends Db {
  close(): Promise<void>;
}

export function createDb(connectionString: string, opts: DbOptions = {}): ClosableDb {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'playflow',
    types: types as pg.CustomTypesConfig,
  });
  // An idle client losing its connection (database restart) must not crash the process.
  pool.on('error', () => {});
  return wrapPool(pool);
}

/** A Db over an existing pool (the caller owns the pool's lifetime unless it calls close). */
export function wrapPool(pool: pg.Pool): ClosableDb {
  let closed = false;
  return {
    pool,
    tx: <T>(fn: (client: pg.PoolClient, begun: pg.QueryResult[]) => Promise<T>, opts?: TxOptions) => withTransaction(pool, fn, opts),
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}

export interface TxOptions {
  /**
   * Statements sent with BEGIN in the same round trip (simple query protocol: no parameters, so
   * only validated literals). Their results are handed to the transaction's function in order.
   */
  begin?: string;
}

export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient, begun: pg.QueryResult[]) => Promise<T>, opts: TxOptions = {}): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    let begun: pg.QueryResult[] = [];
    if (opts.begin) {
      // a multi-statement simple query answers with one result per statement; BEGIN's comes first
      const res = (await client.query(`BEGIN; ${opts.begin}`)) as unknown as pg.QueryResult[];
      begun = res.slice(1);
    } else {
      await client.query('BEGIN');
    }
    const out = await fn(client, begun);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch {
      broken = true; // connection is unusable: drop it from the pool
    }
    throw err;
  } finally {
    client.release(broken);
  }
}
