/**
 * The stored step summaries (rows of `execution_step`, migration 260; formerly the execution row's
 * `steps` column) are upserted for the summaries a write changed instead of rewritten whole: after
 * every write they must equal the steps of the state folded from the log,
 * including after a retry (which re-runs steps) and when the process cache is cold.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import { writeDecision } from '../store/decision.js';
import { changedSteps, touchedSteps } from './service.js';
import { callDone, chainPlaybook, runWorker, terminal, testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
let core: ServerCore;
let db: pg.Client;

beforeAll(async () => {
  tdb = await testDatabase('pf_steps');
  core = await testCore(tdb.url);
  db = new pg.Client({ connectionString: tdb.url });
  await db.connect();
  await core.deps.catalog.register(chainPlaybook('s/chain', 6));
});
afterAll(async () => {
  await db?.end();
  await core?.stop();
  await tdb?.drop();
});

async function column(id: string): Promise<unknown> {
  // the summaries as stored: rows of execution_step (migration 260), one per step
  const { rows } = await db.query<{ steps: unknown }>(
    `SELECT COALESCE(jsonb_object_agg(step, summary), '{}'::jsonb) AS steps FROM execution_step WHERE execution_id = $1`, [id]);
  return rows[0]?.steps;
}

describe('changedSteps', () => {
  const a = { status: 'completed' as const, runs: 1, result: 1 };
  const b = { status: 'running' as const, runs: 1 };
  it('returns the summaries that are new objects, nothing when the map is the same', () => {
    const prev = { a, b };
    expect(changedSteps(prev, prev)).toEqual({});
    const c = { status: 'running' as const, runs: 1 };
    const b2 = { ...b, status: 'completed' as const, result: 2 };
    expect(changedSteps(prev, { a, b: b2, c })).toEqual({ b: b2, c });
    expect(changedSteps(prev, { a, b })).toEqual({});
  });
  it('touchedSteps: the named summaries, only when the row holds the map the decisions started from', () => {
    const prev = { a, b };
    const b2 = { ...b, status: 'completed' as const };
    const next = { a, b: b2 };
    expect(touchedSteps(prev, next, { from: prev, names: ['b'] })).toEqual({ b: b2 });
    expect(touchedSteps(prev, next, { from: { a, b }, names: ['b'] })).toBeUndefined();
    expect(touchedSteps(prev, next, { from: prev, names: ['c'] })).toBeUndefined();
    expect(touchedSteps(prev, next, undefined)).toBeUndefined();
  });
  it('returns undefined (write them all) when a summary was removed', () => {
    expect(changedSteps({ a, b }, { a })).toBeUndefined();
    expect(changedSteps({ a, b }, { a, c: b })).toBeUndefined();
  });
});

describe('the steps column', () => {
  it('equals the folded state after every step, through a failure and a retry, with a warm and a cold cache', async () => {
    const ex = core.executions;
    const started = await ex.start({ path: 's/chain', payload: {} });
    const id = started.execution_id;
    let failS4 = true;
    const seen: unknown[] = [];
    await runWorker(core, async (cmd) => {
      seen.push(await column(id));
      expect(await column(id)).toEqual((await ex.foldState(id)).steps);
      if (cmd.step === 's4' && failS4) {
        failS4 = false;
        return { error: { message: 'boom' } };
      }
      return { response: { i: 1, step: cmd.step } };
    }, { until: () => terminal(core, id) });
    expect((await ex.get(id))?.status).toBe('failed');
    expect(await column(id)).toEqual((await ex.foldState(id)).steps);
    // a cold cache: the next write starts from the row read from the database
    await ex.dropSnapshots(id);
    const fresh = await testCore(tdb.url);
    try {
      await fresh.executions.retry(id);
      await runWorker(fresh, () => ({ response: { i: 2, again: true } }), { until: () => terminal(fresh, id) });
      const x = await fresh.executions.get(id);
      expect(x?.status).toBe('completed');
      const folded = (await fresh.executions.foldState(id)).steps;
      expect(await column(id)).toEqual(folded);
      expect(Object.keys(folded)).toHaveLength(6);
      expect(folded.s4).toMatchObject({ status: 'completed', runs: 2 });
      expect(folded.s6).toMatchObject({ status: 'completed', result: { i: 2, again: true } });
    } finally {
      await fresh.stop();
    }
    expect(seen.length).toBeGreaterThanOrEqual(4);
  });
});

describe('a write without stepsChanged', () => {
  it('replaces the execution\'s summaries: the ones it no longer has are deleted, the others written', async () => {
    const ex = core.executions;
    const id = (await ex.start({ path: 's/chain', payload: {} })).execution_id;
    await runWorker(core, (cmd) => ({ response: { i: 1, step: cmd.step } }), { until: () => terminal(core, id) });
    const folded = (await ex.foldState(id)).steps;
    expect(Object.keys(folded)).toHaveLength(6);
    const s1 = { ...folded.s1, runs: 7 };
    await writeDecision(core.db.pool, {
      executionId: id, firstSeq: 1_000_000, events: [], commands: [], nowMs: Date.now(), closes: [],
      execution: { status: 'completed', result: null, error: null, steps: { s1, s2: folded.s2 }, terminal: true },
    });
    expect(await column(id)).toEqual({ s1, s2: folded.s2 });
  });
});

describe('a decision whose transaction fails', () => {
  it('leaves no half-changed state in the process cache (the engine changes the steps map in place)', async () => {
    const ex = core.executions;
    const id = (await ex.start({ path: 's/chain', payload: {} })).execution_id;
    let failed = 0;
    await runWorker(core, async (cmd) => {
      const reply = { response: { i: 3, step: cmd.step } };
      if (cmd.step === 's3' && failed === 0) {
        // the write of s3's completion fails once: its transaction rolls back after the engine decided
        await db.query(`CREATE FUNCTION pf_fail_s3() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN IF NEW.step = 's3' AND NEW.summary->>'status' = 'completed' THEN RAISE EXCEPTION 'refused s3'; END IF; RETURN NEW; END $$`);
        await db.query('CREATE TRIGGER pf_fail_s3 BEFORE INSERT OR UPDATE ON execution_step FOR EACH ROW EXECUTE FUNCTION pf_fail_s3()');
        try {
          await expect(ex.handleEvents([{ ...callDone(cmd, reply), execution_id: id }])).rejects.toThrow(/refused s3/);
          failed++;
        } finally {
          await db.query('DROP TRIGGER pf_fail_s3 ON execution_step; DROP FUNCTION pf_fail_s3()');
        }
        expect(await column(id)).toEqual((await ex.foldState(id)).steps);
        expect(await ex.loadState(id)).toEqual(await ex.foldState(id));
      }
      return reply; // sent again by the worker: now it is written
    }, { until: () => terminal(core, id) });
    expect(failed).toBe(1);
    expect((await ex.get(id))?.status).toBe('completed');
    const folded = (await ex.foldState(id)).steps;
    expect(await column(id)).toEqual(folded);
    expect(await ex.loadState(id)).toEqual(await ex.foldState(id));
    expect(folded.s3).toMatchObject({ status: 'completed', runs: 1 });
  });

  it('the single read and the list return the summaries as one {step: summary} object, newest first', async () => {
    const ex = core.executions;
    const listed = await ex.list({ path: 's/chain', limit: 2 });
    expect(listed).toHaveLength(2);
    expect(Number(listed[0].execution_id)).toBeGreaterThan(Number(listed[1].execution_id));
    for (const x of listed) {
      const stored = await column(x.execution_id);
      expect(Object.keys(stored as object).length).toBeGreaterThan(0);
      expect(x.steps).toEqual(stored);
      expect((await ex.get(x.execution_id))?.steps).toEqual(stored);
    }
    expect(listed[0].steps).toEqual((await ex.foldState(listed[0].execution_id)).steps);
    expect(listed[1].steps).toEqual({ s1: expect.objectContaining({ runs: 7 }), s2: expect.any(Object) }); // the replaced ones above
  });
});
