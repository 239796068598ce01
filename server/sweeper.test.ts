import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDb, type MigratedDb } from '../test/helpers/migrated-db.js';
import type { ClosableDb } from './db.js';
import { Sweeper } from './sweeper.js';
import type { PgExecutionService } from './executions/service.js';
import type { Outbox } from './executions/outbox.js';

let t: MigratedDb;
let db: ClosableDb;
beforeAll(async () => {
  t = await migratedDb('pf_sweeper');
  db = t.db;
});
afterAll(() => t?.close());

describe('sweeper', () => {
  it('a lease that cannot be reclaimed is logged and the ones after it are still reclaimed', async () => {
    // three leases expired in this order: the first one's execution cannot be decided
    const { rows } = await db.pool.query<{ queue_id: string }>(
      `INSERT INTO queue (execution_id, command_id, step, command, status, attempts, worker_id, lease_until)
       SELECT 900 + n, 1, 's', '{}'::jsonb, 'leased', 1, 'w', now() - make_interval(secs => 60 - n) FROM generate_series(1, 3) AS n
       RETURNING queue_id::text AS queue_id`);
    const tried: string[] = [];
    const executions = {
      async reclaimLease(queueId: string, executionId: string) {
        tried.push(queueId);
        if (executionId === '901') throw new Error('execution 901 cannot be loaded');
        return 'requeued' as const;
      },
      async cancelOrphans() { return 0; },
    } as unknown as PgExecutionService;
    const outbox = { publishDue: async () => 0 } as unknown as Outbox;
    const warnings: Array<{ fields: object; msg?: string }> = [];
    const logger = { debug() {}, info() {}, error() {}, warn: (fields: object, msg?: string) => void warnings.push({ fields, msg }) };
    const sweeper = new Sweeper({ db, executions, outbox, logger });
    const r = await sweeper.tick();
    expect(tried).toEqual(rows.map((x) => x.queue_id));
    expect(r.requeued).toBe(2);
    expect(warnings).toEqual([{
      fields: { queue_id: rows[0].queue_id, execution_id: '901', err: 'Error: execution 901 cannot be loaded' },
      msg: 'sweeper: reclaiming an expired lease failed',
    }]);
  });
});
