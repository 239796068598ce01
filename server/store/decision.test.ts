/**
 * The decision write (migration 340's function) on its own, against the real database: a
 * speculation's guard, a missing execution, the queue ids it reserves, and the guard's predicates.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bareExecution, migratedDb, type MigratedDb } from '../../test/helpers/migrated-db.js';
import { explainOn, plansOf } from '../../test/helpers/plans.js';
import type { ClosableDb } from '../db.js';
import type { Command, EngineEvent } from '../engine/contract.js';
import { guardedValues, StaleDecision, WRITE_DECISION_NAME, WRITE_DECISION_SQL, writeDecision, type DecisionWrite } from './decision.js';
import { API_VAR_ROW } from './vars.js';

let t: MigratedDb;
let db: ClosableDb;
beforeAll(async () => {
  t = await migratedDb('pf_decision');
  db = t.db;
});
afterAll(() => t?.close());

const execution = () => bareExecution(db);

const command = (id: number, step: string): Command => ({ command_id: id, step, tool: { kind: 'python', code: 'result = 1' }, args: {}, attempt: 1, available_at: 0, max_deliveries: 3 });

/** A step's write: its call.done (for command `done`, when given) and the next command issued, leased to w1 under `queueId`. */
function stepWrite(executionId: string, firstSeq: number, next: number, queueId: string, done?: number): DecisionWrite {
  const cmd = command(next, `s${next}`);
  const events: EngineEvent[] = [
    ...(done ? [{ name: 'call.done', step: `s${done}`, command_id: done, payload: { response: { i: done } } }] : []),
    { name: 'command_issued', step: cmd.step, command_id: next, payload: { command: cmd as never } },
  ];
  return {
    executionId, firstSeq, events, commands: [cmd], nowMs: 0, closes: done ? [{ command_id: done, status: 'done' }] : [],
    execution: { status: 'running', result: null, error: null, steps: { [cmd.step]: { status: 'running', runs: 1 } }, terminal: false },
    stepsChanged: { [cmd.step]: { status: 'running', runs: 1 } },
    leases: new Map([[next, { queue_id: queueId, worker_id: 'w1', lease_token: `t${next}`, lease_until: new Date(Date.now() + 60_000) }]]),
  };
}

/** The write as a speculation sends it: its values with the guard filled in and `reserve` ids asked. */
async function speculate(w: DecisionWrite, guard: { lastSeq: number; holders: Array<{ queue_id: string; worker_id: string; lease_token: string }> }, reserve = 0) {
  let values: unknown[] = [];
  await writeDecision({ query: async (c: { values: unknown[] }) => { values = c.values; return { rows: [{ current: true, updated_at: new Date(), finished_at: null, inserted: [], cancelled: '0', reserved: [] }] }; } } as never, w);
  const { rows: [r] } = await db.pool.query({ name: WRITE_DECISION_NAME, text: WRITE_DECISION_SQL, values: guardedValues(values, { ...guard, vars: {} }, reserve) });
  return r as { current: boolean; updated_at: Date | null; reserved: string[] };
}

const names = async (id: string) => (await db.pool.query('SELECT seq, name FROM event WHERE execution_id = $1 ORDER BY seq', [id])).rows;
const queueRows = async (id: string) => (await db.pool.query('SELECT queue_id::text, command_id, status, worker_id FROM queue WHERE execution_id = $1 ORDER BY queue_id', [id])).rows;

describe('the decision write', () => {
  it('applies a speculation that is current and reserves the next queue ids after its rows', async () => {
    const id = await execution();
    await writeDecision(db.pool, stepWrite(id, 1, 1, '9000001'));
    const r = await speculate(stepWrite(id, 2, 2, '9000002', 1), { lastSeq: 1, holders: [{ queue_id: '9000001', worker_id: 'w1', lease_token: 't1' }] }, 3);
    expect(r.current).toBe(true);
    expect(r.reserved).toHaveLength(3);
    expect(r.reserved.every((q) => BigInt(q) > 0n)).toBe(true);
    expect(await names(id)).toEqual([{ seq: 1, name: 'command_issued' }, { seq: 2, name: 'call.done' }, { seq: 3, name: 'command_issued' }]);
    expect(await queueRows(id)).toEqual([
      { queue_id: '9000001', command_id: 1, status: 'done', worker_id: 'w1' },
      { queue_id: '9000002', command_id: 2, status: 'leased', worker_id: 'w1' },
    ]);
  });

  it('writes nothing when the log moved on, or a lease it reports on is no longer held', async () => {
    const id = await execution();
    await writeDecision(db.pool, stepWrite(id, 1, 1, '9000011'));
    const holders = [{ queue_id: '9000011', worker_id: 'w1', lease_token: 't1' }];
    expect((await speculate(stepWrite(id, 2, 2, '9000012', 1), { lastSeq: 0, holders })).current).toBe(false);
    expect((await speculate(stepWrite(id, 2, 2, '9000012', 1), { lastSeq: 1, holders: [{ ...holders[0], lease_token: 'another' }] })).current).toBe(false);
    expect((await speculate(stepWrite(id, 2, 2, '9000012', 1), { lastSeq: 1, holders: [{ ...holders[0], queue_id: '9000099' }] })).current).toBe(false);
    expect(await names(id)).toEqual([{ seq: 1, name: 'command_issued' }]);
    expect(await queueRows(id)).toEqual([{ queue_id: '9000011', command_id: 1, status: 'leased', worker_id: 'w1' }]);
    // the same write, current, applies
    expect((await speculate(stepWrite(id, 2, 2, '9000012', 1), { lastSeq: 1, holders })).current).toBe(true);
  });

  it('writes nothing for an execution that is not there', async () => {
    await expect(writeDecision(db.pool, stepWrite('987654321', 1, 1, '9000021'))).rejects.toThrow(/not found while writing/);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM event WHERE execution_id = 987654321`)).rows[0].n).toBe(0);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM queue WHERE queue_id = 9000021`)).rows[0].n).toBe(0);
  });

  it('a stale guard is StaleDecision from writeDecision', async () => {
    const id = await execution();
    await writeDecision(db.pool, stepWrite(id, 1, 1, '9000031'));
    const stale = { query: (c: { values: unknown[] }) => db.pool.query({ name: WRITE_DECISION_NAME, text: WRITE_DECISION_SQL, values: guardedValues(c.values, { lastSeq: 5, holders: [], vars: {} }) }) };
    await expect(writeDecision(stale as never, stepWrite(id, 2, 2, '9000032', 1))).rejects.toBeInstanceOf(StaleDecision);
  });

  it('reads each lease the guard checks and each row a speculation claims by the primary key, whatever plan the connection kept', async () => {
    // planned while the queue held few open rows, the statements before migration 390 took a
    // partial index on status and kept it: with many rows leased later, each check walked them all
    const client = await db.pool.connect();
    try {
      // a queue in use, not analyzed yet (a fresh database): finished rows, one leased, one queued
      await db.pool.query(`INSERT INTO queue (execution_id, command_id, step, command, status) SELECT 986000, c, 's', '{}', 'done' FROM generate_series(1, 5000) c`);
      const id = await execution();
      await writeDecision(db.pool, stepWrite(id, 1, 1, '9000041'));
      await db.pool.query(`INSERT INTO queue (queue_id, execution_id, command_id, step, command) VALUES (9000042, $1, 2, 's2', '{}')`, [id]);
      const guard = async () => (await client.query('SELECT playflow_decision_current($1, 1, $2, $3) AS current',
        [id, JSON.stringify([{ queue_id: '9000041', worker_id: 'w1', lease_token: 't1' }]), '{}'])).rows[0].current;
      const claim = async () => {
        await client.query('BEGIN');
        try {
          return await writeDecision(client, {
            executionId: id, firstSeq: 2, events: [{ name: 'action_started', step: 's2', command_id: 2, payload: {} }], commands: [], nowMs: 0, closes: [],
            execution: { status: 'running', result: null, error: null, steps: {}, terminal: false }, stepsChanged: {},
            claims: [{ queue_id: '9000042', worker_id: 'w1', lease_token: 'c2', lease_until: new Date(Date.now() + 60_000) }],
          });
        } finally {
          await client.query('ROLLBACK');
        }
      };
      for (let i = 0; i < 6; i++) {
        expect(await guard()).toBe(true);
        await claim();
      }
      await db.pool.query(`INSERT INTO queue (execution_id, command_id, step, command, status, worker_id, lease_token)
        SELECT 987000, c, 's', '{}', CASE WHEN c % 2 = 0 THEN 'leased' ELSE 'queued' END, 'w9', 't' FROM generate_series(1, 4000) c`);
      await explainOn(client);
      const plans = await plansOf(client, async () => {
        expect(await guard()).toBe(true);
        expect((await claim()).inserted).toEqual([]);
      });
      const reads = plans.filter((p) => /FROM queue q WHERE q\.queue_id = /.test(p));
      expect(reads).toHaveLength(2);
      for (const p of reads) expect(p).toMatch(/Index Scan using queue_pkey on queue q\s/);
    } finally {
      client.release(true); // auto_explain stays loaded in that session
    }
  });

  it("the guard selects the API vars with the loader's predicate (store/vars.ts API_VAR_ROW)", async () => {
    const { rows: [fn] } = await db.pool.query(`SELECT prosrc FROM pg_proc WHERE proname = 'playflow_decision_current'`);
    expect(fn.prosrc).toContain(API_VAR_ROW);
  });
});
