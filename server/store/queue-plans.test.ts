/**
 * The queue's named statements that find rows by queue_id keep to the primary key, whatever plan
 * their connection made while the queue was quiet (store/queue.ts, the note on `(…) IS TRUE`).
 * The plans are read with auto_explain, sent to the client as notices (test/helpers/plans.ts).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bareExecution, migratedDb, type MigratedDb } from '../../test/helpers/migrated-db.js';
import { explainOn, plansOf } from '../../test/helpers/plans.js';
import { claimMany, markPublished } from './queue.js';

let t: MigratedDb;
beforeAll(async () => {
  t = await migratedDb('pf_queue_plans');
});
afterAll(() => t?.close());

/** Queued rows of a new execution, due now; their queue ids. */
async function queued(n: number): Promise<string[]> {
  const id = await bareExecution(t.db);
  const { rows } = await t.db.pool.query<{ queue_id: string }>(
    `INSERT INTO queue (execution_id, command_id, step, command) SELECT $1, c, 's', '{}' FROM generate_series(1, $2::integer) c RETURNING queue_id::text`, [id, n]);
  return rows.map((r) => r.queue_id);
}

/** Each plan of what `fn` runs on `client`: its statement's first line and the indexes it scans. */
async function scansOf(client: pg.PoolClient, fn: () => Promise<unknown>): Promise<Array<{ query: string; scans: string[] }>> {
  return (await plansOf(client, fn)).map((p) => ({ query: p.split('\n')[1] ?? '', scans: p.match(/(Index Scan|Index Only Scan|Bitmap Index Scan|Seq Scan) (using|on) \w+/g) ?? [] }));
}

describe('the queue read by queue id', () => {
  it('claims and marks rows published through the primary key after the queue filled up', async () => {
    // a queue in use: mostly finished rows, a few queued, analyzed
    const done = await bareExecution(t.db);
    await t.db.pool.query(`INSERT INTO queue (execution_id, command_id, step, command, status) SELECT $1, c, 's', '{}', 'done' FROM generate_series(1, 50000) c`, [done]);
    const few = await queued(3);
    await t.db.pool.query('ANALYZE queue');

    const client = await t.db.pool.connect();
    try {
      const claim = async (queueId: string) => {
        await client.query('BEGIN');
        try {
          return await claimMany(client, [{ queue_id: queueId, worker_id: 'w1', lease_seconds: 20, lease_token: 'k' }]);
        } finally {
          await client.query('ROLLBACK');
        }
      };
      // plans made and kept while three rows are queued (the plan cache keeps one after five runs)
      for (let i = 0; i < 6; i++) {
        expect(await claim(few[0]!)).toHaveLength(1);
        await markPublished(client, [few[1]!]);
      }
      // then a backlog, as when workers come back after a while
      const backlog = await queued(5000);
      await explainOn(client);
      const claimed = await scansOf(client, async () => expect(await claim(backlog[4000]!)).toMatchObject([{ queue_id: backlog[4000], status: 'leased', worker_id: 'w1' }]));
      const marked = await scansOf(client, () => markPublished(client, [backlog[4001]!]));
      expect((await t.db.pool.query('SELECT published_at IS NOT NULL AS marked FROM queue WHERE queue_id = $1', [backlog[4001]])).rows).toEqual([{ marked: true }]);

      const onQueue = [...claimed, ...marked].flatMap((p) => p.scans.filter((s) => / queue_|on queue$/.test(s)));
      expect(claimed.map((p) => p.query)).toEqual([expect.stringContaining('UPDATE queue SET')]);
      expect(marked.map((p) => p.query)).toEqual([expect.stringContaining('UPDATE queue SET published_at')]);
      // the claim finds its row by key; the mark by key, for the rows and again for their update
      expect(onQueue).toEqual(['Index Scan using queue_pkey', 'Index Scan using queue_pkey', 'Index Scan using queue_pkey']);
    } finally {
      client.release(true); // auto_explain stays loaded in that session
    }
  });
});
