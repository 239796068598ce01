/**
 * A large step result is sent to PostgreSQL once per write (store/shared-values.ts), stored once
 * in the event log (beside the payload of the first event holding it; migration 280), and read
 * back in full: in every event that carries it, the execution's result, the step's summary and the
 * snapshot. Small results stay inline.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import pg from 'pg';
import type { TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import * as eventStore from '../store/events.js';
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

async function stored(id: string) {
  const q = <T extends pg.QueryResultRow>(sql: string) => core.db.pool.query<T>(sql, [id]).then((r) => r.rows);
  return {
    // the log as it reads, values put back in their payloads
    events: await eventStore.list(core.db.pool, id),
    rows: await q<{ name: string; step: string | null; payload: Record<string, unknown>; value: unknown; value_seq: number | null }>(
      'SELECT name, step, payload, value, value_seq FROM event WHERE execution_id = $1 ORDER BY seq'),
    result: (await q<{ result: unknown }>('SELECT result FROM execution WHERE execution_id = $1'))[0]!.result,
    summaries: Object.fromEntries((await q<{ step: string; summary: unknown }>('SELECT step, summary FROM execution_step WHERE execution_id = $1')).map((r) => [r.step, r.summary])),
    snapshot: (await q<{ state: unknown }>('SELECT state FROM execution_snapshot WHERE execution_id = $1'))[0]?.state,
  };
}

describe('a large result', () => {
  it('crosses to PostgreSQL once per write and is stored in full everywhere it belongs', async () => {
    const big = (step: string) => ({ step, i: 1, rows: Array.from({ length: 400 }, (_, i) => ({ i, text: `${step}-${'x'.repeat(100)}` })) });
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

    // stored once in the log: one row holds it, the others of that write name that row
    const holding = s.rows.filter((r) => r.value !== null);
    expect(holding.map((r) => [r.name, r.step])).toEqual([['call.done', 's1'], ['call.done', 's2']]);
    expect(holding[1]!.value).toEqual(big('s2'));
    expect(s.rows.filter((r) => JSON.stringify(r.payload).includes('x'.repeat(100)))).toEqual([]);
    const naming = s.rows.filter((r) => r.value_seq !== null);
    expect(naming.map((r) => r.name).sort()).toEqual(['action_completed', 'action_completed', 'execution_completed', 'step.exit', 'step.exit', 'step_completed', 'step_completed']);

    // a page that starts after the event holding the value still reads it in full
    const doneSeq = (await eventStore.list(core.db.pool, id)).find((e) => e.name === 'call.done' && e.step === 's2')!.seq;
    const later = await eventStore.list(core.db.pool, id, doneSeq);
    expect(later.find((e) => e.name === 'step_completed' && e.step === 's2')!.payload.result).toEqual(big('s2'));
    const page = await eventStore.listWhere(core.db.pool, id, { after: 0, limit: 10, name: 'execution_completed' });
    expect(page[0]!.payload.result).toEqual(big('s2'));

    // the write that ended the execution held s2's result seven times; it carried it once
    // (plus s1's, which is in that snapshot once, inline)
    const last = writes.at(-1)!;
    const sent = last.reduce((n, v) => n + v.length, 0);
    expect(sent).toBeGreaterThan(size);
    expect(sent).toBeLessThan(2 * size + JSON.stringify(big('s1')).length);
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
  });
});
