/**
 * sendPipeline against PostgreSQL: one round trip of bound statements in one implicit transaction,
 * rows parsed as the pools parse them, statements prepared once per connection, and an error that
 * skips the rest and rolls back what ran before it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../test/helpers/pg.js';
import { createDb, type ClosableDb } from './db.js';
import { sendPipeline } from './pipeline.js';

let tdb: TestDatabase;
let db: ClosableDb;

beforeAll(async () => {
  tdb = await createTestDatabase('pf_pipeline');
  db = createDb(tdb.url, { max: 2 });
  await db.pool.query('CREATE TABLE t (id bigint PRIMARY KEY, doc jsonb, ok boolean)');
});
afterAll(async () => {
  await db?.close();
  await tdb?.drop();
});

const insert = (id: string, doc: unknown) => ({ name: 'pt_insert', text: 'INSERT INTO t (id, doc, ok) VALUES ($1, $2, true)', values: [id, JSON.stringify(doc)] });
const select = (from: string) => ({ name: 'pt_select', text: 'SELECT id, doc, ok FROM t WHERE id >= $1 ORDER BY id', values: [from] });

describe('sendPipeline', () => {
  it("answers each statement's rows and count in order, parsed as the pool parses them (int8 as a string)", async () => {
    const client = await db.pool.connect();
    try {
      const results = await sendPipeline(client, [insert('9007199254740993', { a: [1] }), insert('2', null), select('2')]);
      expect(results).toEqual([
        { rows: [], rowCount: 1 },
        { rows: [], rowCount: 1 },
        { rows: [{ id: '2', doc: null, ok: true }, { id: '9007199254740993', doc: { a: [1] }, ok: true }], rowCount: 2 },
      ]);
      // committed at the Sync: another session sees the rows
      expect((await db.pool.query('SELECT count(*)::int AS n FROM t')).rows[0].n).toBe(2);
    } finally {
      client.release();
    }
  });

  it('prepares each statement once per connection', async () => {
    const client = await db.pool.connect();
    try {
      await sendPipeline(client, [insert('10', {}), select('10')]);
      await sendPipeline(client, [insert('11', {}), select('11')]);
      const { rows } = await client.query(`SELECT name FROM pg_prepared_statements WHERE name LIKE 'pt_%' ORDER BY name`);
      expect(rows).toEqual([{ name: 'pt_insert' }, { name: 'pt_select' }]);
    } finally {
      client.release();
    }
  });

  it("shares the names node-postgres' own named queries prepared on the connection, either way round", async () => {
    const client = await db.pool.connect();
    try {
      await client.query(insert('30', { by: 'pg' }));
      const tens = { name: 'pt_select_shared', text: 'SELECT id, doc FROM t WHERE id BETWEEN $1 AND $1 + 9 ORDER BY id', values: ['30'] };
      await sendPipeline(client, [insert('31', { by: 'pipeline' }), tens]);
      const { rows } = await client.query(tens);
      expect(rows.map((r) => r.doc)).toEqual([{ by: 'pg' }, { by: 'pipeline' }]);
      const prepared = await client.query(`SELECT name FROM pg_prepared_statements WHERE name IN ('pt_insert', 'pt_select_shared') ORDER BY name`);
      expect(prepared.rows).toEqual([{ name: 'pt_insert' }, { name: 'pt_select_shared' }]);
    } finally {
      client.release(true);
    }
  });

  it('an error skips the statements after it and rolls back those before it: one implicit transaction', async () => {
    const client = await db.pool.connect();
    try {
      const failed = sendPipeline(client, [
        insert('20', {}),
        { name: 'pt_raise', text: `SELECT CASE WHEN $1::int > 0 THEN (SELECT 1/0) END`, values: [1] },
        insert('21', {}),
      ]);
      await expect(failed).rejects.toMatchObject({ code: '22012' });
    } finally {
      client.release(true);
    }
    expect((await db.pool.query(`SELECT id FROM t WHERE id IN (20, 21)`)).rows).toEqual([]);
  });
});
