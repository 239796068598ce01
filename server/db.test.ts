/**
 * The transaction helper's session statements against the real PostgreSQL: prepared with the first
 * BEGIN of a connection that lacks them, never twice on one connection, and a connection whose
 * prelude failed after some PREPAREs ran is dropped instead of being handed out again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../test/helpers/pg.js';
import { createDb, sessionStatement, type ClosableDb } from './db.js';

let tdb: TestDatabase;
let db: ClosableDb;

const TWICE = sessionStatement('test_twice', ['integer'], 'SELECT $1 * 2 AS v');
const BACKEND = 'SELECT pg_backend_pid() AS pid, (SELECT count(*)::int FROM pg_prepared_statements WHERE name = \'test_twice\') AS n';

beforeAll(async () => {
  tdb = await createTestDatabase('pfdb');
  db = createDb(tdb.url, { max: 1 });
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
