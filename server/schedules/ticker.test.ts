import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { migratedDb, type MigratedDb } from '../../test/helpers/migrated-db.js';
import type { ClosableDb } from '../db.js';
import type { Db } from '../services.js';
import { ScheduleTicker } from './ticker.js';

let t: MigratedDb;
let db: ClosableDb;
beforeAll(async () => {
  t = await migratedDb('pf_ticker');
  db = t.db;
});
afterAll(() => t?.close());
beforeEach(async () => {
  await db.pool.query('DELETE FROM schedule');
});

// a whole minute in the past: both schedules are due by the database's clock
const M = Math.floor(Date.now() / 60_000) * 60_000 - 120_000;

async function schedule(name: string, cron: string, nextRun: number): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO schedule (name, cron, path, next_run) VALUES ($1, $2, 'p/x', $3) RETURNING schedule_id::text AS id`, [name, cron, new Date(nextRun)]);
  return rows[0].id;
}

function ticker(d: Db) {
  const started: Array<{ schedule_id: unknown; tick: string }> = [];
  const warnings: Array<{ fields: Record<string, unknown>; msg?: string }> = [];
  const logger = { debug() {}, info() {}, error() {}, warn: (fields: Record<string, unknown>, msg?: string) => void warnings.push({ fields, msg }) };
  const executions = {
    async start(_req: unknown, from: { schedule_id: string; schedule_tick: Date }) {
      started.push({ schedule_id: from.schedule_id, tick: from.schedule_tick.toISOString() });
      return { execution_id: String(1000 + started.length) };
    },
    async cancel() {},
  };
  // the ticker's clock just past both ticks, so each has exactly one due tick
  const t = new ScheduleTicker({ db: d, executions: executions as never, logger, now: () => M + 1500 });
  return { t, started, warnings };
}

describe('schedule ticker', () => {
  it('a tick already decided is left as it is, and the schedules due after it still fire', async () => {
    // `a` points at a tick another replica decided already (a replica whose clock was behind set
    // next_run back onto it); `b` is due a second later
    const a = await schedule('a', '0 * * * * *', M);
    const b = await schedule('b', '1 * * * * *', M + 1000);
    await db.pool.query(`INSERT INTO schedule_tick (schedule_id, tick, outcome, execution_id) VALUES ($1, $2, 'started', 77)`, [a, new Date(M)]);
    const { t, started, warnings } = ticker(db);

    await t.pass();

    expect(started).toEqual([{ schedule_id: b, tick: new Date(M + 1000).toISOString() }]);
    expect(warnings).toEqual([]);
    const { rows } = await db.pool.query(
      `SELECT s.name, s.next_run, k.tick, k.outcome, k.execution_id::text FROM schedule s JOIN schedule_tick k USING (schedule_id) ORDER BY s.name`);
    expect(rows).toEqual([
      { name: 'a', next_run: new Date(M + 60_000), tick: new Date(M), outcome: 'started', execution_id: '77' },
      { name: 'b', next_run: new Date(M + 61_000), tick: new Date(M + 1000), outcome: 'started', execution_id: '1001' },
    ]);
  });

  it('a schedule that cannot be decided is logged, and the schedules due after it still fire', async () => {
    const a = await schedule('a', '0 * * * * *', M);
    const b = await schedule('b', '1 * * * * *', M + 1000);
    let calls = 0;
    const failing: Db = {
      pool: db.pool,
      tx: (fn) => (++calls === 1 ? Promise.reject(new Error('could not serialize access')) : db.tx(fn)),
    } as Db;
    const { t, started, warnings } = ticker(failing);

    await t.pass();

    expect(started).toEqual([{ schedule_id: b, tick: new Date(M + 1000).toISOString() }]);
    expect(warnings).toEqual([{ fields: { schedule_id: a, err: 'Error: could not serialize access' }, msg: 'a due schedule could not be decided' }]);
    expect(t.stats.failed).toBe(1);
    // `a` is still due: the next pass decides it
    await t.pass();
    expect(started.map((s) => s.schedule_id)).toEqual([b, a]);
  });
});
