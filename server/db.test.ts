/**
 * The transaction helper against the real PostgreSQL. Session statements: prepared with the first
 * BEGIN of a connection that lacks them, never twice on one connection, and a connection whose
 * prelude failed after some PREPAREs ran is dropped instead of being handed out again. Commit
 * rules: the statement the rules call last goes with COMMIT in one round trip.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, recordQueries, type TestDatabase } from '../test/helpers/pg.js';
import { IDLE_CONNECTION_MS, canCommitWith, createDb, sessionStatement, type ClosableDb, type CommitRules } from './db.js';

let tdb: TestDatabase;
let db: ClosableDb;

const TWICE = sessionStatement('test_twice', ['integer'], 'SELECT $1 * 2 AS v');
const BACKEND = 'SELECT pg_backend_pid() AS pid, (SELECT count(*)::int FROM pg_prepared_statements WHERE name = \'test_twice\') AS n';

beforeAll(async () => {
  tdb = await createTestDatabase('pfdb');
  db = createDb(tdb.url, { max: 1 });
  await db.pool.query('CREATE TABLE t (v integer PRIMARY KEY)');
});

afterAll(async () => {
  await db?.close();
  await tdb?.drop();
});

describe('tx with session statements', () => {
  it('prepares them on the connection once and hands the begin results over without the PREPAREs', async () => {
    const first = await db.tx(async (client, begun) => {
      expect(begun.map((r) => r.rows)).toEqual([[{ v: 42 }]]);
      return (await client.query(BACKEND)).rows[0];
    }, { begin: TWICE.execute('21'), prepare: [TWICE] });
    expect(first.n).toBe(1);
    // same connection (pool of one): a second PREPARE would fail with "already exists"
    const second = await db.tx(async (client, begun) => {
      expect(begun.map((r) => r.rows)).toEqual([[{ v: 10 }]]);
      return (await client.query(BACKEND)).rows[0];
    }, { begin: TWICE.execute('5'), prepare: [TWICE] });
    expect(second).toEqual(first);
  });

  it('drops a connection whose prelude failed after its PREPAREs ran; the next transaction prepares again', async () => {
    const before = await db.tx(async (client) => (await client.query(BACKEND)).rows[0]);
    const other = sessionStatement('test_other', [], 'SELECT 1 AS one');
    await expect(db.tx(async () => 'unreached', { begin: `${other.execute()}; SELECT 1/0`, prepare: [TWICE, other] }))
      .rejects.toThrow(/division by zero/);
    const after = await db.tx(async (client, begun) => {
      expect(begun.map((r) => r.rows)).toEqual([[{ one: 1 }]]);
      return (await client.query(BACKEND)).rows[0];
    }, { begin: other.execute(), prepare: [TWICE, other] });
    expect(after.pid).not.toBe(before.pid);
    expect(after.n).toBe(1);
  });
});

describe('tx with commit rules', () => {
  const INSERT_T = sessionStatement('test_insert_t', ['integer'], 'INSERT INTO t VALUES ($1) RETURNING v');
  /** `INSERT INTO t` statements with a parameter are last: sent as EXECUTE of INSERT_T with COMMIT. */
  const rules = (announced: string[]): CommitRules => ({
    last: (config, values) => typeof config === 'string' && config.startsWith('INSERT INTO t') && values ? { sql: INSERT_T.execute(String(values![0])), prepare: [INSERT_T] } : null,
    beforeCommit: () => announced.push('commit'),
  });
  const sent = async <T>(fn: () => Promise<T>) => {
    const r = await recordQueries(fn);
    return { value: r.value, texts: r.sent };
  };
  const stored = async () => (await db.pool.query('SELECT v FROM t ORDER BY v')).rows.map((r) => r.v);

  it('sends the last statement with COMMIT in one round trip, announced before it goes, and nothing after', async () => {
    const announced: string[] = [];
    const { value, texts } = await sent(() => db.tx(async (client) => {
      await client.query('SELECT 1');
      const r = await client.query('INSERT INTO t VALUES ($1)', [1]);
      announced.push('inserted');
      await expect(client.query('SELECT 2')).rejects.toThrow(/after the transaction committed/);
      return r.rows;
    }, { commit: rules(announced) }));
    expect(value).toEqual([{ v: 1 }]);
    expect(announced).toEqual(['commit', 'inserted']);
    expect(texts).toEqual(['BEGIN', 'SELECT 1', `${INSERT_T.text}; ${INSERT_T.execute('1')}; COMMIT`]);
    expect(await stored()).toEqual([1]);
  });

  it('commits as usual when the last statement is not one the rules know', async () => {
    const { texts } = await sent(() => db.tx((client) => client.query('INSERT INTO t SELECT 2'), { commit: { last: () => null } }));
    expect(texts).toEqual(['BEGIN', 'INSERT INTO t SELECT 2', 'COMMIT']);
    expect(await stored()).toEqual([1, 2]);
  });

  it('queryAndCommit sends statements and COMMIT together and answers their results without COMMIT\'s', async () => {
    const { value, texts } = await sent(() => db.tx(async (client) => {
      expect(canCommitWith(client)).toBe(true);
      if (!canCommitWith(client)) return [];
      return (await client.queryAndCommit('INSERT INTO t VALUES (3); SELECT count(*)::int AS n FROM t')).map((r) => r.rows);
    }, { commit: {} }));
    expect(value).toEqual([[], [{ n: 3 }]]);
    expect(texts).toEqual(['BEGIN', 'INSERT INTO t VALUES (3); SELECT count(*)::int AS n FROM t; COMMIT']);
    expect(await stored()).toEqual([1, 2, 3]);
  });

  it('rolls everything back when the last statement fails: its COMMIT never ran', async () => {
    await expect(db.tx(async (client) => {
      await client.query('INSERT INTO t VALUES (10)');
      await client.query('INSERT INTO t VALUES ($1)', [1]); // duplicate key
    }, { commit: rules([]) })).rejects.toThrow(/duplicate key/);
    expect(await stored()).toEqual([1, 2, 3]);
    // the connection is usable again
    expect(await db.tx(async (client) => (await client.query('SELECT 5 AS v')).rows[0].v)).toBe(5);
  });

  it('drops a connection whose last statement failed after its PREPARE ran; the next one prepares again', async () => {
    // a statement no connection has yet: the failing query PREPAREs it, then its EXECUTE meets a duplicate key
    const fresh = sessionStatement('test_insert_t_once', ['integer'], 'INSERT INTO t VALUES ($1) RETURNING v');
    const freshRules: CommitRules = { last: (config, values) => typeof config === 'string' && values ? { sql: fresh.execute(String(values[0])), prepare: [fresh] } : null };
    const before = await db.tx(async (client) => (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    await expect(db.tx((client) => client.query('INSERT INTO t VALUES ($1)', [1]), { commit: freshRules })).rejects.toThrow(/duplicate key/);
    // kept, that connection would be told to PREPARE it again: "already exists"
    const after = await db.tx(async (client) => {
      await client.query('INSERT INTO t VALUES ($1)', [4]);
      return 0;
    }, { commit: freshRules });
    expect(after).toBe(0);
    expect(await stored()).toEqual([1, 2, 3, 4]);
    const pid = await db.tx(async (client) => (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    expect(pid).not.toBe(before);
  });

  it('gives no queryAndCommit without commit rules', async () => {
    expect(await db.tx(async (client) => canCommitWith(client))).toBe(false);
  });
});

describe('pooled connections', () => {
  it('stay open through a pause longer than pg\'s default 10 s, so the next step meets a warm backend', async () => {
    const own = createDb(tdb.url, { max: 1 });
    const pid = async () => (await own.pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    try {
      // the pool arms a connection's idle timer when a query hands it back: fake clocks from before that
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const first = await pid();
      vi.advanceTimersByTime(60_000);
      expect(own.pool.totalCount).toBe(1);
      expect(await pid()).toBe(first);
      // a server that stays quiet still lets its connections go
      vi.advanceTimersByTime(IDLE_CONNECTION_MS);
      vi.useRealTimers();
      await vi.waitFor(() => expect(own.pool.totalCount).toBe(0));
      expect(await pid()).not.toBe(first);
    } finally {
      vi.useRealTimers();
      await own.close();
    }
  });
});
