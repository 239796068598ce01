/**
 * Group commit: concurrent requests (claims, worker events) of one execution share a transaction;
 * every event is recorded once, in order; each caller gets its own answer or error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedCommand, WorkerEvent } from '../../common/protocol.js';
import type { TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import { AppError } from '../errors.js';
import type { ExecutionHooks } from '../services.js';
import { testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
let core: ServerCore;
/** onVarsSet fails while this is set (a fault inside one request of a batch). */
let failVarsSet = false;
const hooks: ExecutionHooks = {
  async onVarsSet() {
    if (failVarsSet) throw new Error('vars store unavailable');
  },
  async loadVars() {
    return {};
  },
  async onExecutionTerminal() {},
};

const loop = (path: string, n: number, extra = '') => `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: ${path.split('/').pop()}, path: ${path} }
workflow:
  - step: items
    loop: { in: "{{ range(${n}) | list }}", iterator: i, mode: async, max_in_flight: ${n} }
    tool: { kind: python, code: "result = i", args: { i: "{{ i }}" } }
${extra}`;

beforeAll(async () => {
  tdb = await testDatabase('pf_group');
  core = await testCore(tdb.url, { hooks });
  await core.deps.catalog.register(loop('g/loop16', 16));
  await core.deps.catalog.register(loop('g/loop4', 4, '    vars: { finished: true }\n'));
  await core.deps.catalog.register(loop('g/loop1', 1));
});
afterAll(async () => {
  await core?.stop();
  await tdb?.drop();
});

async function notifications(executionId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  const deadline = Date.now() + 10_000;
  while (ids.length < n && Date.now() < deadline) {
    for (const m of await core.broker.fetch({ max: n, expiresMs: 200 })) {
      m.ack();
      if (m.data.execution_id === executionId) ids.push(m.data.queue_id);
    }
  }
  expect(ids).toHaveLength(n);
  return ids;
}

const done = (c: ClaimedCommand): WorkerEvent => ({
  execution_id: c.execution_id, step: c.step, name: 'call.done', queue_id: c.queue_id, worker_id: c.worker_id, lease_token: c.lease_token,
  payload: { response: (c.tool.args as { i: number }).i, meta: { duration_ms: 1 } },
});

async function eventsOf(id: string) {
  return (await core.deps.executions.events(id, { limit: 1000 })).events;
}

describe('group commit', () => {
  it('concurrent claims and call.done of one execution share transactions; every event once, in order, action_started first', async () => {
    const run = await core.deps.executions.start({ path: 'g/loop16' });
    const id = run.execution_id;
    const queueIds = await notifications(id, 16);
    const stats = core.executions.groupCommits;

    const t0 = stats.transactions;
    const claimed = await Promise.all(queueIds.map((q, i) => core.deps.executions.claim(q, { worker_id: `w${i % 3}` })));
    const claimTx = stats.transactions - t0;
    expect(claimTx).toBeGreaterThanOrEqual(1);
    expect(claimTx).toBeLessThan(16);
    expect(new Set(claimed.map((c) => c.command_id)).size).toBe(16);
    expect(claimed.every((c) => c.context.execution_id === id)).toBe(true);
    expect((await core.deps.executions.get(id))!.status).toBe('running');

    const t1 = stats.transactions;
    const acks = await Promise.all(claimed.map((c) => core.deps.executions.handleEvents([done(c)])));
    const doneTx = stats.transactions - t1;
    expect(doneTx).toBeLessThan(16);
    expect(acks.every((a) => a.accepted === 1 && a.duplicates === 0)).toBe(true);

    const rec = (await core.deps.executions.get(id))!;
    expect(rec.status).toBe('completed');
    expect((rec.result as number[]).slice().sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i));

    const events = await eventsOf(id);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const calls = events.filter((e) => e.name === 'call.done');
    expect(calls).toHaveLength(16);
    expect(new Set(calls.map((e) => e.command_id)).size).toBe(16);
    for (const c of claimed) {
      const started = events.findIndex((e) => e.name === 'action_started' && e.command_id === c.command_id);
      const finished = events.findIndex((e) => e.name === 'call.done' && e.command_id === c.command_id);
      expect(started).toBeGreaterThanOrEqual(0);
      expect(finished).toBeGreaterThan(started);
    }
    // created_at is the transaction's start time: fewer distinct values than call.done events
    expect(new Set(calls.map((e) => e.created_at)).size).toBeLessThan(16);
    const { rows } = await core.db.pool.query('SELECT status, count(*)::int AS n FROM queue WHERE execution_id = $1 GROUP BY status', [id]);
    expect(rows).toEqual([{ status: 'done', n: 16 }]);
    // the log is the truth: folding it gives the state the group commits left
    const json = (v: unknown) => JSON.parse(JSON.stringify(v));
    const snap = await core.db.pool.query('SELECT seq, state FROM execution_snapshot WHERE execution_id = $1', [id]);
    expect(snap.rows[0].seq).toBe(events.at(-1)!.seq);
    expect(json(await core.executions.foldState(id))).toEqual(snap.rows[0].state);
  });

  it('a bad event in a concurrent burst gets its own error; the others are applied', async () => {
    const run = await core.deps.executions.start({ path: 'g/loop16' });
    const id = run.execution_id;
    const claimed = await Promise.all((await notifications(id, 16)).map((q) => core.deps.executions.claim(q, { worker_id: 'w' })));
    const burst: WorkerEvent[] = claimed.slice(0, 6).map(done);
    burst.splice(2, 0, { execution_id: id, name: 'action_started', step: 'items', payload: {} }); // server-only name
    burst.splice(4, 0, { execution_id: id, name: 'call.done', step: 'items', queue_id: '999999999', payload: {} }); // unknown queue row
    const results = await Promise.allSettled(burst.map((e) => core.deps.executions.handleEvents([e])));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(((results[2] as PromiseRejectedResult).reason as AppError).statusCode).toBe(400);
    expect(((results[4] as PromiseRejectedResult).reason as AppError).statusCode).toBe(404);
    const calls = (await eventsOf(id)).filter((e) => e.name === 'call.done');
    expect(calls.map((e) => e.command_id).sort()).toEqual(claimed.slice(0, 6).map((c) => c.command_id).sort());
    // a duplicate in the same burst is a duplicate, applied once
    const again = await Promise.all([claimed[6], claimed[6], claimed[7]].map((c) => core.deps.executions.handleEvents([done(c)])));
    expect(again.map((a) => a.accepted + a.duplicates)).toEqual([1, 1, 1]);
    expect(again.reduce((n, a) => n + a.duplicates, 0)).toBe(1);
    await core.deps.executions.cancel(id);
  });

  it('a request that fails inside a batch fails alone: the others of the batch are committed', async () => {
    const run = await core.deps.executions.start({ path: 'g/loop4' });
    const id = run.execution_id;
    const claimed = await Promise.all((await notifications(id, 4)).map((q) => core.deps.executions.claim(q, { worker_id: 'w' })));
    failVarsSet = true; // the call.done that completes the step sets vars: its hook throws
    let results: PromiseSettledResult<unknown>[];
    try {
      results = await Promise.allSettled(claimed.map((c) => core.deps.executions.handleEvents([done(c)])));
    } finally {
      failVarsSet = false;
    }
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
    expect(String((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason)).toMatch(/vars store unavailable/);
    const events = await eventsOf(id);
    expect(events.filter((e) => e.name === 'call.done')).toHaveLength(3);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect((await core.deps.executions.get(id))!.status).toBe('running');
    // the worker retries the failed one: the execution completes
    const missing = claimed.find((c) => !events.some((e) => e.name === 'call.done' && e.command_id === c.command_id))!;
    expect((await core.deps.executions.handleEvents([done(missing)])).accepted).toBe(1);
    expect((await core.deps.executions.get(id))!.status).toBe('completed');
  });

  it('concurrent claims of one row: exactly one winner, one action_started; a claim after call.done in the same burst is 410', async () => {
    const run = await core.deps.executions.start({ path: 'g/loop1' });
    const id = run.execution_id;
    const [q] = await notifications(id, 1);
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => core.deps.executions.claim(q, { worker_id: `racer-${i}` })));
    const won = results.filter((r): r is PromiseFulfilledResult<ClaimedCommand> => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as AppError).code).toBe('already_claimed');
    expect((await eventsOf(id)).filter((e) => e.name === 'action_started')).toHaveLength(1);
    const [ack, late] = await Promise.allSettled([
      core.deps.executions.handleEvents([done(won[0].value)]),
      core.deps.executions.claim(q, { worker_id: 'late' }),
    ]);
    expect(ack.status).toBe('fulfilled');
    expect(late.status).toBe('rejected');
    expect([409, 410]).toContain(((late as PromiseRejectedResult).reason as AppError).statusCode);
    expect((await core.deps.executions.get(id))!.status).toBe('completed');
  });
});
