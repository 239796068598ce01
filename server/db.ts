/**
 * PostgreSQL access: a pg Pool plus a transaction helper (the `Db` of services.ts).
 *
 * int8/bigint columns (ids, counts) are returned as decimal strings so int64 ids round-trip
 * exactly through JSON and JavaScript; the parser is set on this pool only, never globally.
 */
import pg from 'pg';

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/** Type parsers of our pools: int8 and numeric stay strings, everything else as pg does. */
export const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (v: string) => v;
    return pg.types.getTypeParser(oid, format ?? 'text');
  },
};

export interface Db {
  pool: pg.Pool;
  /**
   * Runs fn in one transaction (BEGIN … COMMIT, ROLLBACK on throw). `opts.begin`: statements sent
   * with BEGIN in one round trip, their results passed to fn.
   */
  tx<T>(fn: (client: pg.PoolClient, begun: pg.QueryResult[]) => Promise<T>, opts?: TxOptions): Promise<T>;
}

export interface DbOptions {
  /** Pool size; default 10. */
  max?: number;
  /** Sets `application_name` so connections are recognisable in pg_stat_activity. */
  applicationName?: string;
  /** Told about connections lost outside a query (a DBA's pg_terminate_backend, a failover). */
  onConnectionError?: (err: Error) => void;
}

/**
 * A lost connection makes pg emit 'error' on the client (when no query is running on it) and on
 * the pool (when it is idle); an 'error' event without a listener kills the process. Both get a
 * listener here: the client is then no longer queryable and the pool discards it on release, and
 * the query or transaction that needed it fails with that error (see `isConnectionError`).
 */
export function guardPool(pool: pg.Pool, onError: (err: Error) => void = () => {}): pg.Pool {
  pool.on('error', onError);
  pool.on('connect', (client) => {
    client.on('error', onError);
  });
  return pool;
}

/**
 * Errors of the connection rather than of the statement: the server went away (SQLSTATE class 08,
 * admin shutdown 57P01-57P03) or the socket closed. Such a transaction did not happen (or, for a
 * COMMIT, its outcome is unknown), and the request answers 503 so the caller retries.
 */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && /^(08|57P0[1-3])/.test(e.code)) return true;
  if (typeof e.code === 'string' && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTFOUND|EAI_AGAIN)$/.test(e.code)) return true;
  return typeof e.message === 'string' && /Connection terminated|Client has encountered a connection error|connection timeout|Client was closed and is not queryable|timeout exceeded when trying to connect/i.test(e.message);
}

export interface ClosableDb extends Db {
  close(): Promise<void>;
}

/**
 * How long a pooled connection may sit idle before it is closed (pg's default: 10 s). A new
 * connection costs PostgreSQL a backend whose first statements are planned and compiled again
 * (the write function's included): an execution of the peers' 40-step chain on fresh connections
 * took 30–40 ms more of PostgreSQL's CPU and about 45 ms longer than one on warm connections. At
 * 10 s, a pause in the traffic was enough to pay that again. Five minutes covers bursts and
 * per-minute schedules; the pool still never holds more than `max`.
 */
export const IDLE_CONNECTION_MS = 300_000;

export function createDb(connectionString: string, opts: DbOptions = {}): ClosableDb {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'playflow',
    types: types as pg.CustomTypesConfig,
    // A database that is down must fail requests (503), not queue them forever.
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: IDLE_CONNECTION_MS,
  });
  guardPool(pool, opts.onConnectionError);
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
  /** Session statements `begin` EXECUTEs: prepared first, in the same round trip, on a connection that lacks them. */
  prepare?: readonly SessionStatement[];
  /** The transaction's last statement may carry its COMMIT: see CommitRules. */
  commit?: CommitRules;
}

/**
 * How a transaction's last statement takes its COMMIT along, saving the round trip COMMIT alone
 * costs (TxOptions.commit). The function's client then commits early in two cases: a statement
 * that `last` recognises, and `queryAndCommit` (see `committingClient`). Nothing may run after
 * either; the COMMIT that would follow the function is then not sent.
 */
export interface CommitRules {
  /**
   * A statement after which the transaction never runs another, as simple-query text (its
   * parameters inlined as literals) with the session statements it EXECUTEs; null: an ordinary one.
   */
  last?(config: pg.QueryConfig | string, values?: unknown[]): SessionSql | null;
  /** Called right before a COMMIT goes out with a statement. */
  beforeCommit?(): void;
}

/** A transaction's client that can send its last statement with the COMMIT (CommitRules). */
export interface CommittingClient {
  /**
   * Runs a simple query (one or more statements, no parameters), then COMMIT, in one round trip;
   * its results without COMMIT's. `prepare`: the session statements it EXECUTEs, PREPAREd first
   * where the connection lacks them.
   */
  queryAndCommit(sql: string, prepare?: readonly SessionStatement[]): Promise<pg.QueryResult[]>;
}

/** Whether `client` is a transaction's client that can commit with its last statement. */
export function canCommitWith(client: unknown): client is CommittingClient {
  return typeof (client as Partial<CommittingClient> | null)?.queryAndCommit === 'function';
}

/**
 * A statement PREPAREd once per connection, for a `begin` that runs it with EXECUTE. A simple
 * query binds no parameters, so each of its statements is parsed and planned on every call: for
 * the lock-and-peek every step starts with, that planning cost PostgreSQL more than running it
 * (about 0.2 ms a step, pg_stat_statements with track_planning). A prepared one is planned once.
 */
export interface SessionStatement {
  name: string;
  /** `PREPARE <name>(<types>) AS <statement>` */
  text: string;
  /** `EXECUTE <name>(<args>)`: the arguments are SQL literals (checked ids, escaped text). */
  execute(...args: string[]): string;
}

/** A session statement; `types` empty: PostgreSQL infers the parameters' types from `sql`. */
export function sessionStatement(name: string, types: readonly string[], sql: string): SessionStatement {
  const list = (xs: readonly string[]) => (xs.length ? `(${xs.join(', ')})` : '');
  return { name, text: `PREPARE ${name}${list(types)} AS ${sql}`, execute: (...args) => `EXECUTE ${name}${list(args)}` };
}

/** Simple-query text (values inlined as literals) and the session statements it EXECUTEs. */
export interface SessionSql {
  sql: string;
  prepare: readonly SessionStatement[];
}

/** Which session statements each connection has (PREPARE is session state, and not undone by ROLLBACK). */
const preparedOn = new WeakMap<pg.PoolClient, Set<string>>();

/**
 * The statements of `wanted` that `client` lacks, and the PREPAREs to send ahead of a simple query
 * for them. Call `done()` once that query succeeded; after a failure, drop the connection (which
 * of them ran is unknown).
 */
export function sessionStatements(client: pg.PoolClient, wanted: readonly SessionStatement[] = []): { missing: number; prefix: string; done(): void } {
  let have = preparedOn.get(client);
  if (!have) preparedOn.set(client, (have = new Set()));
  const missing = wanted.filter((p) => !have.has(p.name));
  return {
    missing: missing.length,
    prefix: missing.map((p) => `${p.text}; `).join(''),
    done: () => missing.forEach((p) => have.add(p.name)),
  };
}

/** Attempts at getting a connection and opening the transaction when the connection is lost. */
const BEGIN_ATTEMPTS = 3;

/**
 * Connects and sends BEGIN (plus `opts.begin`). A pooled connection terminated while idle fails
 * here, before the transaction's work ran, so this part alone is retried on a fresh connection.
 */
async function begin(pool: pg.Pool, opts: TxOptions): Promise<{ client: pg.PoolClient; begun: pg.QueryResult[] }> {
  for (let attempt = 1; ; attempt++) {
    let client: pg.PoolClient | undefined;
    let preparing = 0;
    try {
      client = await pool.connect();
      if (opts.begin) {
        const session = sessionStatements(client, opts.prepare);
        preparing = session.missing;
        // a multi-statement simple query answers with one result per statement; BEGIN's comes after the PREPAREs
        const res = (await client.query(`${session.prefix}BEGIN; ${opts.begin}`)) as unknown as pg.QueryResult[];
        session.done();
        return { client, begun: res.slice(preparing + 1) };
      }
      await client.query('BEGIN');
      return { client, begun: [] };
    } catch (err) {
      if (client) {
        // the statements of opts.begin may fail on their own (not a lost connection): roll back.
        // Which PREPAREs ran before a failure is unknown: that connection goes, and its statements with it.
        const ok = !isConnectionError(err) && preparing === 0 && (await client.query('ROLLBACK').then(() => true, () => false));
        client.release(!ok);
      }
      if (!isConnectionError(err) || attempt >= BEGIN_ATTEMPTS) throw err;
    }
  }
}

/**
 * `conn` as the transaction's client under `rules`: a statement `rules.last` recognises, or
 * `queryAndCommit`, goes with COMMIT in one simple query. `committed` tells whether one did (an
 * error of that query means the COMMIT did not run, unless the connection was lost: unknown, as a
 * lost COMMIT always is).
 */
export function committingClient(conn: pg.PoolClient, rules: CommitRules): { client: pg.PoolClient & CommittingClient; committed(): boolean; broken(): boolean } {
  let committed = false;
  let broken = false;
  const withCommit = async (sql: string, prepare: readonly SessionStatement[] = []): Promise<pg.QueryResult[]> => {
    if (committed) throw new Error('a statement after the transaction committed');
    const session = sessionStatements(conn, prepare);
    rules.beforeCommit?.();
    committed = true;
    let results: pg.QueryResult[];
    try {
      results = (await conn.query(`${session.prefix}${sql}; COMMIT`)) as unknown as pg.QueryResult[];
    } catch (err) {
      // nothing after a failed statement ran: not the COMMIT either (a lost connection: unknown);
      // which of its PREPAREs ran is unknown, so such a connection goes (see `begin`)
      committed = false;
      broken = session.missing > 0;
      throw err;
    }
    session.done();
    return results.slice(session.missing, -1);
  };
  const client = {
    async query(config: pg.QueryConfig | string, values?: unknown[]) {
      if (committed) throw new Error('a statement after the transaction committed');
      const last = rules.last?.(config, values);
      if (last) return withCommit(last.sql, last.prepare).then((r) => r[r.length - 1]);
      return conn.query(config as pg.QueryConfig, values);
    },
    queryAndCommit: (sql: string, prepare?: readonly SessionStatement[]) => withCommit(sql, prepare),
  };
  return { client: client as unknown as pg.PoolClient & CommittingClient, committed: () => committed, broken: () => broken };
}

export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient, begun: pg.QueryResult[]) => Promise<T>, opts: TxOptions = {}): Promise<T> {
  const { client, begun } = await begin(pool, opts);
  let broken = false;
  let committing: ReturnType<typeof committingClient> | undefined;
  try {
    if (opts.commit) {
      committing = committingClient(client, opts.commit);
      const out = await fn(committing.client, begun);
      if (!committing.committed()) await client.query('COMMIT');
      return out;
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
    client.release(broken || (committing?.broken() ?? false));
  }
}
