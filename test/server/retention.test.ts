/** Execution retention against the real core and PostgreSQL: what ended long ago goes, with its events and queue rows; nothing else. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';
import { sweepRetention } from '../../server/store/retention.js';
import { loadConfig } from '../../server/config.js';
import { writeDecision } from '../../server/store/decision.js';
import type { Command } from '../../server/engine/contract.js';

let s: TestServer;
const routing = `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: r, path: ret/route}\nworkflow:\n  - step: start\n`;

async function start(path: string): Promise<string> {
  const r = await s.call('POST', '/api/run/playbook', { path, payload: {} });
  expect(r.statusCode).toBe(201);
  return r.json().execution_id;
}
const count = async (table: string, id: string) =>
  Number((await s.core.db.pool.query(`SELECT count(*) AS n FROM ${table} WHERE execution_id = $1`, [id])).rows[0].n);

beforeAll(async () => {
  s = await startTestServer();
  expect((await s.call('POST', '/api/catalog/playbook', { content: routing })).statusCode).toBe(201);
  expect((await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('ret/tool') })).statusCode).toBe(201);
});
afterAll(async () => s?.close());

describe('retention', () => {
  it('deletes terminal executions that ended more than N days ago with their events and queue rows, and nothing else', async () => {
    const oldDone = await start('ret/route'); // completes at once (routing step)
    const oldCancelled = await start('ret/tool'); // has a queue row; cancelled below
    const recent = await start('ret/route');
    const oldOpen = await start('ret/tool'); // never claimed: stays started
    expect((await s.call('POST', `/api/execution/${oldCancelled}/cancel`)).json().status).toBe('cancelled');
    expect((await s.call('GET', `/api/execution/${oldDone}`)).json().status).toBe('completed');
    await s.core.db.pool.query(
      `UPDATE execution SET finished_at = now() - interval '10 days', created_at = now() - interval '10 days' WHERE execution_id = ANY($1::bigint[])`,
      [[oldDone, oldCancelled, oldOpen]]);
    expect(await count('queue', oldCancelled)).toBe(1);
    expect(await count('event', oldDone)).toBeGreaterThan(0);
    expect(await count('execution_step', oldDone)).toBeGreaterThan(0);

    expect(await sweepRetention(s.core.db.pool, 7, 1)).toBe(2); // batches of one: the loop continues
    for (const id of [oldDone, oldCancelled]) {
      expect((await s.call('GET', `/api/execution/${id}`)).statusCode).toBe(404);
      expect(await count('event', id)).toBe(0);
      expect(await count('queue', id)).toBe(0);
      expect(await count('execution_state', id)).toBe(0);
      expect(await count('execution_snapshot', id)).toBe(0);
      expect(await count('execution_step', id)).toBe(0);
    }
    for (const id of [recent, oldOpen]) {
      expect((await s.call('GET', `/api/execution/${id}`)).statusCode).toBe(200);
      expect(await count('event', id)).toBeGreaterThan(0);
    }
    expect(await count('queue', oldOpen)).toBe(1);
    expect(await sweepRetention(s.core.db.pool, 7)).toBe(0);
  });

  it('an execution deleted by any statement takes its events, queue rows and step summaries along (no foreign keys since migration 290)', async () => {
    // as a server of the previous version's retention, or an operator by hand, would delete it
    const id = await start('ret/tool');
    const other = await start('ret/tool');
    expect(await count('event', id)).toBeGreaterThan(0);
    expect(await count('queue', id)).toBe(1);
    expect(await count('execution_step', id)).toBeGreaterThan(0);
    await s.core.db.pool.query('DELETE FROM execution WHERE execution_id = $1', [id]);
    for (const table of ['event', 'queue', 'execution_step', 'execution_snapshot']) expect(await count(table, id)).toBe(0);
    expect(await count('event', other)).toBeGreaterThan(0);
    expect(await count('queue', other)).toBe(1);
    await s.call('POST', `/api/execution/${other}/cancel`);
  });

  it('a decision write for an execution that is not there writes nothing, even with its COMMIT sent', async () => {
    const gone = '987654321';
    const client = await s.core.db.pool.connect();
    try {
      await client.query('BEGIN');
      const write = writeDecision(client, {
        executionId: gone, firstSeq: 1, nowMs: Date.now(), closes: [],
        events: [{ name: 'step.enter', step: 'start', payload: {} }],
        commands: [{ command_id: 1, step: 'start', tool: { kind: 'python', code: 'result = 1' }, args: {}, attempt: 1, max_deliveries: 3 } as unknown as Command],
        execution: { status: 'running', result: null, error: null, steps: { start: { status: 'running', runs: 1 } }, terminal: false },
      });
      await expect(write).rejects.toThrow(/not found/);
      await client.query('COMMIT'); // a failed statement aborted nothing: the write itself inserted no row
    } finally {
      client.release();
    }
    for (const table of ['event', 'queue', 'execution_step']) expect(await count(table, gone)).toBe(0);
  });

  it('PLAYFLOW_RETENTION_DAYS is checked', () => {
    expect(loadConfig({ PLAYFLOW_RETENTION_DAYS: '30' }).retentionDays).toBe(30);
    expect(loadConfig({}).retentionDays).toBeUndefined();
    expect(() => loadConfig({ PLAYFLOW_RETENTION_DAYS: 'soon' })).toThrow(/PLAYFLOW_RETENTION_DAYS/);
  });
});
