/**
 * A large step result is sent to PostgreSQL once per write (store/shared-values.ts) and stored
 * beside the documents that hold it (migration 280: once in the event log, beside the summary and
 * the snapshot) — or inside them, as the previous version reads them, while a server of that
 * version is live (values-gate.ts). Either way every reader returns it in full: every event that
 * carries it, the execution's result, the step's summary and the snapshot. Small results stay
 * inline.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import pg from 'pg';
import type { TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import * as eventStore from '../store/events.js';
import * as execStore from '../store/executions.js';
import { VALUES_BESIDE_FEATURE } from './values-gate.js';
import { SHARE_MIN_CHARS } from '../store/shared-values.js';
import { chainPlaybook, runWorker, terminal, testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
let core: ServerCore;

beforeAll(async () => {
  tdb = await testDatabase('pf_large');
  core = await testCore(tdb.url);
  await core.deps.catalog.register(chainPlaybook('l/chain', 2));
});
afterAll(async () => {
  await core?.stop();
  await tdb?.drop();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The text parameters of every decision write, in order. */
function spyWrites(): string[][] {
  const writes: string[][] = [];
  const query = pg.Client.prototype.query;
  vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const cfg = args[0] as { name?: string; values?: unknown[] };
    if (cfg && typeof cfg === 'object' && cfg.name === 'playflow.write_decision') {
      writes.push((cfg.values ?? []).map((v) => (typeof v === 'string' ? v : JSON.stringify(v ?? null))));
    }
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof pg.Client.prototype.query);
  return writes;
}

/** What the readers return (values put back), and the raw rows (where the values are stored). */
async function stored(id: string) {
  const q = <T extends pg.QueryResultRow>(sql: string) => core.db.pool.query<T>(sql, [id]).then((r) => r.rows);
  const row = (await execStore.get(core.db.pool, id))!;
  return {
    events: await eventStore.list(core.db.pool, id),
    result: row.result,
    summaries: row.steps,
    snapshot: (await eventStore.loadSnapshot(core.db.pool, id))?.state,
    raw: {
      events: await q<{ name: string; step: string | null; payload: Record<string, unknown>; value: unknown; value_seq: number | null }>(
        'SELECT name, step, payload, value, value_seq FROM event WHERE execution_id = $1 ORDER BY seq'),
      result: (await q<{ result: unknown }>('SELECT result FROM execution WHERE execution_id = $1'))[0]!.result,
      summaries: await q<{ step: string; summary: unknown; result_value: unknown }>('SELECT step, summary, result_value FROM execution_step WHERE execution_id = $1 ORDER BY step'),
      snapshot: (await q<{ state: unknown }>('SELECT state FROM execution_snapshot WHERE execution_id = $1'))[0]?.state,
      snapshotValues: await q<{ path: string; value: unknown }>('SELECT path, value FROM execution_snapshot_value WHERE execution_id = $1 ORDER BY path'),
    },
  };
}

const big = (step: string) => ({ step, i: 1, rows: Array.from({ length: 400 }, (_, i) => ({ i, text: `${step}-${'x'.repeat(100)}` })) });
const hasBig = (v: unknown) => JSON.stringify(v ?? null).includes('x'.repeat(100));

/**
 * Runs the two-step chain returning big(step) and checks what every reader returns. `copies`: how
 * many times the last write carries s2's result (the inside layout, a transition, sends the
 * snapshot whole: s2's result is twice in it).
 */
async function runBig(copies: 1 | 3) {
  const size = JSON.stringify(big('s2')).length;
  expect(size).toBeGreaterThan(2 * SHARE_MIN_CHARS);
  const writes = spyWrites();
  const id = (await core.executions.start({ path: 'l/chain', payload: {} })).execution_id;
  await runWorker(core, (cmd) => ({ response: big(cmd.step) }), { until: () => terminal(core, id) });
  vi.restoreAllMocks();

  const s = await stored(id);
  const folded = await core.executions.foldState(id);
  expect(folded.status).toBe('completed');
  expect(s.result).toEqual(big('s2'));
  expect(s.summaries.s2).toEqual({ status: 'completed', runs: 1, result: big('s2') });
  expect(s.summaries.s1).toEqual({ status: 'completed', runs: 1, result: big('s1') });
  expect(s.snapshot).toEqual(JSON.parse(JSON.stringify(folded)));
  const byName = (name: string, step: string | null) => s.events.find((e) => e.name === name && e.step === step)!.payload;
  expect(byName('call.done', 's2').response).toEqual(big('s2'));
  expect(byName('step.exit', 's2').result).toEqual(big('s2'));
  expect(byName('step_completed', 's2').result).toEqual(big('s2'));
  expect((byName('action_completed', 's2').effects as { done: { result: unknown } }).done.result).toEqual(big('s2'));
  expect(byName('execution_completed', null).result).toEqual(big('s2'));

  // the write that ended the execution held s2's result seven times; it carried it `copies` times
  // (plus s1's, which is in that snapshot once, inline)
  const last = writes.at(-1)!;
  const sent = last.reduce((n, v) => n + v.length, 0);
  expect(sent).toBeGreaterThan(copies * size);
  expect(sent).toBeLessThan((copies + 1) * size + JSON.stringify(big('s1')).length);
  return { id, s };
}

describe('a large result', () => {
  it('crosses to PostgreSQL once per write, is stored beside the documents, and every reader returns it in full', async () => {
    expect(await core.executions.valuesGate.refresh()).toBe(true);
    const { id, s } = await runBig(1);

    // stored once in the log: one row holds it, the others of that write name that row
    const holding = s.raw.events.filter((r) => r.value !== null);
    expect(holding.map((r) => [r.name, r.step])).toEqual([['call.done', 's1'], ['call.done', 's2']]);
    expect(holding[1]!.value).toEqual(big('s2'));
    expect(s.raw.events.filter((r) => hasBig(r.payload))).toEqual([]);
    const naming = s.raw.events.filter((r) => r.value_seq !== null);
    expect(naming.map((r) => r.name).sort()).toEqual(['action_completed', 'action_completed', 'execution_completed', 'step.exit', 'step.exit', 'step_completed', 'step_completed']);
    // the summaries' results and the snapshot's beside them
    expect(s.raw.summaries.map((r) => [r.step, hasBig(r.summary), r.result_value])).toEqual([['s1', false, big('s1')], ['s2', false, big('s2')]]);
    expect(hasBig(s.raw.snapshot)).toBe(true); // s1's result: once in that write, inline
    expect((s.raw.snapshot as { result?: unknown }).result).toBeUndefined();
    expect(s.raw.snapshotValues).toEqual([{ path: '["result"]', value: big('s2') }, { path: '["steps","s2","result"]', value: big('s2') }]);
    expect(s.raw.result).toEqual(big('s2'));

    // a page that starts after the event holding the value still reads it in full
    const doneSeq = s.events.find((e) => e.name === 'call.done' && e.step === 's2')!.seq;
    const later = await eventStore.list(core.db.pool, id, doneSeq);
    expect(later.find((e) => e.name === 'step_completed' && e.step === 's2')!.payload.result).toEqual(big('s2'));
    const page = await eventStore.listWhere(core.db.pool, id, { after: 0, limit: 10, name: 'execution_completed' });
    expect(page[0]!.payload.result).toEqual(big('s2'));
  });

  it('while a live server of the previous version is registered, stores every value inside its documents, as that server reads them', async () => {
    // a server registered without the feature, as the previous version registers
    await core.db.pool.query(`INSERT INTO runtime (kind, name, info) VALUES ('server', 'previous-version', '{"pid": 1}')`);
    try {
      expect(await core.executions.valuesGate.refresh()).toBe(false);
      const { s } = await runBig(3);
      expect(s.raw.events.filter((r) => r.value !== null || r.value_seq !== null)).toEqual([]);
      const inline = (name: string, step: string | null) => s.raw.events.find((e) => e.name === name && e.step === step)!.payload;
      expect(inline('step_completed', 's2').result).toEqual(big('s2'));
      expect((inline('action_completed', 's2').effects as { done: { result: unknown } }).done.result).toEqual(big('s2'));
      expect(inline('execution_completed', null).result).toEqual(big('s2'));
      expect(s.raw.summaries.map((r) => [r.step, r.summary, r.result_value])).toEqual([
        ['s1', { status: 'completed', runs: 1, result: big('s1') }, null], ['s2', { status: 'completed', runs: 1, result: big('s2') }, null]]);
      expect(s.raw.snapshot).toEqual(s.snapshot);
      expect(s.raw.snapshotValues).toEqual([]);

      // once its heartbeat is older than the stale limit, it is gone: the gate opens again
      await core.db.pool.query(`UPDATE runtime SET last_heartbeat = now() - interval '10 minutes' WHERE name = 'previous-version'`);
      expect(await core.executions.valuesGate.refresh()).toBe(true);
    } finally {
      await core.db.pool.query(`DELETE FROM runtime WHERE name = 'previous-version'`);
    }
  });

  it('a server that loads every state from the snapshot (no cache) gets the values beside it back', async () => {
    const strict = await testCore(tdb.url, { snapshotEvery: 1, snapshotGrowth: 0, stateCacheSize: 0, serverName: 'strict-beside' });
    try {
      expect(await strict.executions.valuesGate.refresh()).toBe(true);
      const id = (await strict.executions.start({ path: 'l/chain', payload: {} })).execution_id;
      const prev: Record<string, unknown> = {};
      await runWorker(strict, (cmd) => {
        prev[cmd.step] = (cmd.args as { prev?: unknown }).prev;
        return { response: { ...big(cmd.step), i: cmd.step === 's1' ? 41 : 42 } };
      }, { until: () => terminal(strict, id) });
      // s2's args were rendered from s1's result, which was in a snapshot value only
      expect(String(prev.s2)).toBe('41');
      const snapValues = await strict.db.pool.query('SELECT count(*)::int AS n FROM execution_snapshot_value WHERE execution_id = $1', [id]);
      expect(snapValues.rows[0].n).toBeGreaterThan(0);
      expect((await eventStore.loadSnapshot(strict.db.pool, id))?.state).toEqual(JSON.parse(JSON.stringify(await strict.executions.foldState(id))));
    } finally {
      await strict.stop();
    }
  });

  it('a server of this version does not close the gate', async () => {
    await core.db.pool.query(`INSERT INTO runtime (kind, name, info) VALUES ('server', 'same-version', $1)`, [JSON.stringify({ features: [VALUES_BESIDE_FEATURE] })]);
    try {
      expect(await core.executions.valuesGate.refresh()).toBe(true);
    } finally {
      await core.db.pool.query(`DELETE FROM runtime WHERE name = 'same-version'`);
    }
  });

  it('small results stay inline: nothing shared', async () => {
    const writes = spyWrites();
    const id = (await core.executions.start({ path: 'l/chain', payload: {} })).execution_id;
    await runWorker(core, (cmd) => ({ response: { step: cmd.step, i: 1, ok: true } }), { until: () => terminal(core, id) });
    vi.restoreAllMocks();
    expect(writes.length).toBeGreaterThan(0);
    // parameter 13 is the shared array
    for (const w of writes) expect(w[12]).toBe('null');
    const s = await stored(id);
    expect(s.result).toEqual({ step: 's2', i: 1, ok: true });
    expect(s.snapshot).toEqual(JSON.parse(JSON.stringify(await core.executions.foldState(id))));
    expect(s.raw.events.filter((r) => r.value !== null || r.value_seq !== null)).toEqual([]);
  });
});
