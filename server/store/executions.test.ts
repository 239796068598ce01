/**
 * Reads of executions by parent against a real PostgreSQL with many executions running: the rows
 * they return, and that they go through the parent index (migration 300) instead of scanning
 * every running execution or the whole table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { createDb, type ClosableDb } from '../db.js';
import { migrate } from './migrate.js';
import * as execStore from './executions.js';

let tdb: TestDatabase;
let db: ClosableDb;
let parent: string;
const expectedOpen: string[] = [];

beforeAll(async () => {
  tdb = await createTestDatabase('pf_exec_store');
  db = createDb(tdb.url, { max: 2 });
  await migrate(db.pool);
  const q = (sql: string, params: unknown[] = []) => db.pool.query(sql, params);
  await q(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('t/p', 1, 'x', '{}', 'h')`);
  // 20,000 top-level executions, 2,000 of them running: what an end's read of its children
  // scanned before the index.
  await q(`INSERT INTO execution (catalog_id, path, version, payload, root_execution_id, status)
           SELECT 1, 't/p', 1, '{}', g, CASE WHEN g % 10 = 0 THEN 'running' ELSE 'completed' END FROM generate_series(1, 20000) g`);
  parent = (await q(`SELECT max(execution_id)::text AS id FROM execution`)).rows[0].id;
  const child = async (status: string, commandId: number | null) => {
    const { rows } = await q(
      `INSERT INTO execution (catalog_id, path, version, payload, root_execution_id, parent_execution_id, parent_command_id, status)
       VALUES (1, 't/p', 1, '{}', $1, $1, $2, $3) RETURNING execution_id::text AS id`, [parent, commandId, status]);
    return rows[0].id as string;
  };
  expectedOpen.push(await child('running', 1));
  expectedOpen.push(await child('started', null)); // started through the API: a parent, no parent command
  await child('completed', 2);
  await child('failed', null);
  await q('ANALYZE execution');
});

afterAll(async () => {
  await db?.close();
  await tdb?.drop();
});

/** The plan PostgreSQL picks for `sql`, as the index names it scans (and 'seq' for a table scan). */
async function scans(sql: string): Promise<string[]> {
  const { rows } = await db.pool.query(`EXPLAIN (FORMAT JSON) ${sql}`);
  const out: string[] = [];
  const walk = (n: { 'Node Type': string; 'Index Name'?: string; Plans?: unknown[] }) => {
    if (n['Index Name']) out.push(n['Index Name']);
    if (n['Node Type'].includes('Seq Scan')) out.push('seq');
    for (const c of n.Plans ?? []) walk(c as typeof n);
  };
  walk(rows[0]['QUERY PLAN'][0].Plan);
  return out;
}

describe('executions by parent', () => {
  it("an end's read of running children finds both kinds, through the parent index, in the prepared form too", async () => {
    const { rows } = await db.pool.query(execStore.openChildrenSql(parent));
    expect(rows.map((r) => r.execution_id)).toEqual(expectedOpen);
    expect(await scans(execStore.openChildrenSql(parent))).toEqual(['execution_parent']);

    const client = await db.pool.connect();
    try {
      await client.query(execStore.OPEN_CHILDREN_STATEMENT.text);
      await client.query('SET plan_cache_mode = force_generic_plan'); // the plan a pooled connection settles on
      const plan = await client.query(`EXPLAIN (FORMAT JSON) ${execStore.OPEN_CHILDREN_STATEMENT.execute(`${parent}::bigint`)}`);
      expect(JSON.stringify(plan.rows[0]['QUERY PLAN'])).toContain('"Index Name":"execution_parent"');
      const got = await client.query(execStore.OPEN_CHILDREN_STATEMENT.execute(`${parent}::bigint`));
      expect(got.rows.map((r) => r.execution_id)).toEqual(expectedOpen);
    } finally {
      await client.query('RESET plan_cache_mode; DEALLOCATE ALL');
      client.release();
    }
  });

  it("lists an end's running children in id order, also across a power of ten", async () => {
    const ids = ['99999', '100000'];
    for (const id of [...ids].reverse()) {
      await db.pool.query(
        `INSERT INTO execution (execution_id, catalog_id, path, version, payload, root_execution_id, parent_execution_id, status)
         VALUES ($1, 1, 't/p', 1, '{}', 1, 1, 'running')`, [id]);
    }
    const { rows } = await db.pool.query(execStore.openChildrenSql('1'));
    expect(rows.map((r) => r.execution_id)).toEqual(ids);
    await db.pool.query('DELETE FROM execution WHERE execution_id = ANY($1::bigint[])', [ids]);
  });

  it('a page of children is read through the parent index, newest first', async () => {
    const page = await execStore.list(db.pool, { parent, limit: 50, offset: 0 });
    expect(page).toHaveLength(4);
    expect(page.map((e) => e.execution_id)).toEqual([...page.map((e) => e.execution_id)].sort((a, b) => Number(b) - Number(a)));
    expect(await scans(`SELECT * FROM execution WHERE parent_execution_id = ${parent} ORDER BY execution_id DESC LIMIT 50 OFFSET 0`)).toEqual(['execution_parent']);
  });
});

describe('orderedSteps', () => {
  const summary = { status: 'completed' as const, runs: 1 };
  const order = (names: string[]) => Object.keys(execStore.orderedSteps(Object.fromEntries(names.map((n) => [n, summary]))));

  it('orders step names as PostgreSQL aggregates them: shorter first (in code points), then by UTF-8 bytes', async () => {
    // U+FF5E sorts before U+1F600 in code points and in UTF-8, after it in UTF-16 units (a surrogate)
    const names = ['aa', '\u{1F600}', 'b', '\uFF5E', 'a', 'é', 'B'];
    expect(order(names)).toEqual(['B', 'a', 'b', 'é', '\uFF5E', '\u{1F600}', 'aa']);
    expect(order(['step_10', 'step_2', 'start', 'step_1'])).toEqual(['start', 'step_1', 'step_2', 'step_10']);
    const { rows } = await db.pool.query(
      `SELECT json_object_agg(n, 1 ORDER BY length(n), n COLLATE "C") AS o FROM unnest($1::text[]) AS n`, [names]);
    expect(Object.keys(rows[0].o)).toEqual(order(names));
  });
});
