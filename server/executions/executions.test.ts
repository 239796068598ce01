/**
 * The execution core end to end through the services, on real PostgreSQL (a database per suite)
 * with the in-process broker; broker-specific behaviour (NATS outage, JetStream) is in
 * outbox.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedCommand, WorkerEvent } from '../../common/protocol.js';
import type { JsonObject } from '../../playbook/types.js';
import type { TestDatabase } from '../../test/helpers/pg.js';
import { MemoryBroker } from '../../common/broker/memory.js';
import type { ServerCore } from '../core.js';
import { AppError } from '../errors.js';
import { buildApp } from '../app/index.js';
import type { ExecutionHooks } from '../services.js';
import { callDone, chainPlaybook, runWorker, terminal, testCore, testDatabase, type Script } from './testkit.js';

let tdb: TestDatabase;
let core: ServerCore;
const hookCalls: Array<[string, ...unknown[]]> = [];
const hooks: ExecutionHooks = {
  async onVarsSet(_c, id, vars, step) {
    hookCalls.push(['onVarsSet', id, vars, step]);
  },
  async loadVars(_c, id) {
    hookCalls.push(['loadVars', id]);
    return { api_var: 'from-api' };
  },
  async onExecutionTerminal(_c, e) {
    hookCalls.push(['onExecutionTerminal', e.execution_id, e.root_execution_id, e.catalog_id]);
  },
};

beforeAll(async () => {
  tdb = await testDatabase('pf_exec');
  core = await testCore(tdb.url, { hooks });
  await core.deps.catalog.register(chainPlaybook('t/chain3', 3));
  await core.deps.catalog.register(chainPlaybook('t/chain1', 1));
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: vars, path: t/vars }
workload: { greeting: hi }
workflow:
  - step: fetch
    tool: { kind: python, code: "result = 1" }
    vars:
      answer: "{{ result.value }}"
    next: use
  - step: use
    tool:
      kind: python
      code: "result = 2"
      args: { answer: "{{ vars.answer }}", api: "{{ vars.api_var }}" }
`);
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: parent, path: t/parent }
workflow:
  - step: start
    loop: { in: [Ada, Grace], iterator: who }
    tool: { kind: playbook, path: t/child, args: { name: "{{ who }}" } }
    next: after
  - step: after
    tool: { kind: python, code: "result = 3", args: { got: "{{ start }}" } }
`);
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: child, path: t/child }
workflow:
  - step: hello
    tool: { kind: python, code: "result = 4", args: { name: "{{ payload.name }}" } }
`);
});
afterAll(async () => {
  await core?.stop();
  await tdb?.drop();
});

const echo: Script = (c) => ({ response: { step: c.step, ...(c.tool.args as JsonObject), i: (c.tool.args as JsonObject)?.i ?? null } });

/**
 * Malformed input is refused at the HTTP edge (common/contract schemas); the service trusts what
 * passed it. These send such a request through the app and answer the refusal like `refusal`.
 */
async function httpRefusal(method: 'POST', url: string, payload: object): Promise<{ statusCode: number; code: string; message: string }> {
  const app = await buildApp(core.deps);
  try {
    const r = await app.inject({ method, url, payload });
    return { statusCode: r.statusCode, ...r.json().error };
  } finally {
    await app.close();
  }
}

async function refusal(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError');
}

async function queueRows(id: string) {
  const { rows } = await core.db.pool.query('SELECT * FROM queue WHERE execution_id = $1 ORDER BY command_id', [id]);
  return rows;
}

/** Claims the next notified command (of `executionId` when given; others are acked and skipped). */
async function nextClaim(workerId = 'w1', leaseSeconds?: number, executionId?: string): Promise<ClaimedCommand> {
  for (;;) {
    const [m] = await core.broker.fetch({ max: 1, expiresMs: 2000 });
    if (!m) throw new Error('no notification');
    m.ack();
    if (executionId && m.data.execution_id !== executionId) continue;
    return core.deps.executions.claim(m.data.queue_id, { worker_id: workerId, lease_seconds: leaseSeconds });
  }
}

describe('executions', () => {
  it('a scripted worker drives an execution to completion; events are consecutive; queue rows done and published', async () => {
    const run = await core.deps.executions.start({ path: 't/chain3', payload: { x: 1 } });
    expect(run).toMatchObject({ status: 'started', path: 't/chain3', version: 1, commands: 1 });
    expect(typeof run.execution_id).toBe('string');
    const w = await runWorker(core, echo, { until: () => terminal(core, run.execution_id) });
    expect(w.claimed.map((c) => c.step)).toEqual(['s1', 's2', 's3']);
    expect(w.claimed[1].args).toEqual({ prev: 1 });
    expect(w.claimed[0].context).toMatchObject({ execution_id: run.execution_id, workload: {}, vars: { api_var: 'from-api' } });
    const rec = (await core.deps.executions.get(run.execution_id))!;
    expect(rec.status).toBe('completed');
    expect(rec.result).toMatchObject({ step: 's3', i: 3 });
    expect(rec.finished_at).not.toBeNull();
    expect(Object.values(rec.steps).map((s) => s.status)).toEqual(['completed', 'completed', 'completed']);
    const { events, next_after } = await core.deps.executions.events(run.execution_id);
    expect(next_after).toBeNull();
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events[0].name).toBe('execution_started');
    expect(events.at(-1)!.name).toBe('execution_completed');
    expect(events.filter((e) => e.name === 'action_started')).toHaveLength(3);
    const rows = await queueRows(run.execution_id);
    expect(rows.map((r) => [r.status, r.attempts])).toEqual([['done', 1], ['done', 1], ['done', 1]]);
    for (const r of rows) expect(r.published_at).not.toBeNull();
    expect(hookCalls.some((c) => c[0] === 'onExecutionTerminal' && c[1] === run.execution_id && c[2] === run.execution_id)).toBe(true);
    // paging
    const p1 = await core.deps.executions.events(run.execution_id, { limit: 5 });
    expect(p1.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(p1.next_after).toBe(5);
    const p2 = await core.deps.executions.events(run.execution_id, { after: 5, limit: 5 });
    expect(p2.events[0].seq).toBe(6);
    // list
    expect((await core.deps.executions.list({ path: 't/chain3', status: 'completed' })).map((e) => e.execution_id)).toContain(run.execution_id);
  });

  it('start: unknown path 404, bad payload 400; unknown execution 404 for events', async () => {
    expect((await refusal(core.deps.executions.start({ path: 'no/such' }))).statusCode).toBe(404);
    expect((await httpRefusal('POST', '/api/v2/execute', { path: 't/chain1', payload: [1] })).statusCode).toBe(400);
    expect((await refusal(core.deps.executions.events('999999'))).statusCode).toBe(404);
    expect((await refusal(core.deps.executions.handleEvents([{ execution_id: '999999', step: 's', name: 'call.done', payload: {} }]))).statusCode).toBe(404);
    expect((await httpRefusal('POST', '/api/v2/events', { execution_id: 'abc', step: 's', name: 'call.done', payload: {} })).statusCode).toBe(400);
    expect(await core.deps.executions.get('999999')).toBeNull();
  });

  it('claim conflicts: 409 already_claimed, 410 finished, 404 unknown, 425 not_due; heartbeat 409/410', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const c = await nextClaim('w1');
    expect(c.execution_id).toBe(run.execution_id);
    const again = await refusal(core.deps.executions.claim(c.queue_id, { worker_id: 'w2' }));
    expect([again.statusCode, again.code]).toEqual([409, 'already_claimed']);
    const same = await refusal(core.deps.executions.claim(c.queue_id, { worker_id: 'w1' }));
    expect([same.statusCode, same.code]).toEqual([409, 'already_claimed']);
    const notOwner = await refusal(core.deps.executions.heartbeat(c.queue_id, { worker_id: 'w2', lease_token: c.lease_token }));
    expect([notOwner.statusCode, notOwner.code]).toEqual([409, 'not_owner']);
    const hb = await core.deps.executions.heartbeat(c.queue_id, { worker_id: 'w1', lease_token: c.lease_token, lease_seconds: 120 });
    expect(new Date(hb.lease_until).getTime()).toBeGreaterThan(Date.now() + 100_000);
    await core.deps.executions.handleEvents([{ execution_id: c.execution_id, step: c.step, name: 'call.done', queue_id: c.queue_id, worker_id: c.worker_id, lease_token: c.lease_token, payload: { response: { ok: true } } }]);
    const fin = await refusal(core.deps.executions.claim(c.queue_id, { worker_id: 'w3' }));
    expect([fin.statusCode, fin.code]).toEqual([410, 'finished']);
    const hbFin = await refusal(core.deps.executions.heartbeat(c.queue_id, { worker_id: 'w1', lease_token: c.lease_token }));
    expect([hbFin.statusCode, hbFin.code]).toEqual([410, 'finished']);
    const unknown = await refusal(core.deps.executions.claim('987654321', { worker_id: 'w1' }));
    expect(unknown.statusCode).toBe(404);
    expect((await httpRefusal('POST', `/api/v2/commands/${c.queue_id}/claim`, { worker_id: '' })).statusCode).toBe(400);

    const run2 = await core.deps.executions.start({ path: 't/chain1' });
    const [row] = await queueRows(run2.execution_id);
    await core.db.pool.query(`UPDATE queue SET available_at = now() + interval '1 hour' WHERE queue_id = $1`, [row.queue_id]);
    const early = await refusal(core.deps.executions.claim(row.queue_id, { worker_id: 'w1' }));
    expect([early.statusCode, early.code]).toEqual([425, 'not_due']);
    await core.deps.executions.cancel(run2.execution_id);
    (await core.broker.fetch({ max: 10, expiresMs: 200 })).forEach((m) => m.ack());
  });

  it('many workers claiming one command at once: exactly one wins, the others get 409', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const [row] = await queueRows(run.execution_id);
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => core.deps.executions.claim(row.queue_id, { worker_id: `racer-${i}` })));
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as AppError).code).toBe('already_claimed');
    const { events } = await core.deps.executions.events(run.execution_id);
    expect(events.filter((e) => e.name === 'action_started')).toHaveLength(1);
    await core.deps.executions.cancel(run.execution_id);
    (await core.broker.fetch({ max: 10, expiresMs: 200 })).forEach((m) => m.ack());
  });

  it('a workbook command carries the workbook table; context carries workload and keychain definitions', async () => {
    await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: wb, path: t/wb }
workload: { base: 10 }
keychain:
  - { name: api_token, kind: env, scope: local, map: { token: API_TOKEN } }
workflow:
  - step: task
    tool: { kind: workbook, name: plus_one, args: { v: "{{ workload.base }}" } }
workbook:
  - name: plus_one
    tool: { kind: python, code: "result = v + 1" }
`);
    const run = await core.deps.executions.start({ path: 't/wb' });
    const c = await nextClaim('w1', undefined, run.execution_id);
    expect(c.tool).toMatchObject({ kind: 'workbook', name: 'plus_one' });
    expect(c.workbook).toEqual([expect.objectContaining({ name: 'plus_one', tool: expect.objectContaining({ kind: 'python' }) })]);
    expect(c.context.workload).toEqual({ base: 10 });
    expect(c.context.keychain_defs).toEqual([expect.objectContaining({ name: 'api_token', kind: 'env' })]);
    expect(c).toMatchObject({ path: 't/wb', root_execution_id: run.execution_id, parent_execution_id: null, attempt: 1, iteration: null });
    await core.deps.executions.cancel(run.execution_id);
  });

  it('a duplicate call.done is counted and not applied', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const c = await nextClaim();
    const ev = { execution_id: c.execution_id, step: c.step, name: 'call.done', queue_id: c.queue_id, worker_id: c.worker_id, lease_token: c.lease_token, payload: { response: { n: 1 } } };
    const first = await core.deps.executions.handleEvents([ev]);
    expect(first).toMatchObject({ accepted: 1, duplicates: 0 });
    const before = (await core.deps.executions.events(run.execution_id)).events.length;
    const second = await core.deps.executions.handleEvents([ev, { ...ev, payload: { response: { n: 2 } } }]);
    expect(second).toMatchObject({ accepted: 0, duplicates: 2, commands: 0 });
    expect((await core.deps.executions.events(run.execution_id)).events.length).toBe(before);
    const rec = await core.deps.executions.get(run.execution_id);
    expect(rec?.status).toBe('completed');
    expect(rec?.result).toEqual({ n: 1 });
  });

  it('events the server records itself cannot be sent; a queue_id of another execution is refused', async () => {
    const a = await core.deps.executions.start({ path: 't/chain1' });
    const b = await core.deps.executions.start({ path: 't/chain1' });
    const [qa] = await queueRows(a.execution_id);
    expect((await refusal(core.deps.executions.handleEvents([{ execution_id: a.execution_id, step: null, name: 'execution_completed', payload: {} }]))).statusCode).toBe(400);
    expect((await refusal(core.deps.executions.handleEvents([{ execution_id: b.execution_id, step: 's1', name: 'call.done', queue_id: qa.queue_id, worker_id: qa.worker_id, lease_token: qa.lease_token, payload: {} }]))).statusCode).toBe(400);
    await core.deps.executions.cancel(a.execution_id);
    await core.deps.executions.cancel(b.execution_id);
    (await core.broker.fetch({ max: 10, expiresMs: 200 })).forEach((m) => m.ack());
  });

  it('an expired lease is queued again, and after max deliveries the call fails so the execution ends', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const expire = () => core.db.pool.query(`UPDATE queue SET lease_until = now() - interval '1 second' WHERE execution_id = $1 AND status = 'leased'`, [run.execution_id]);
    for (let attempt = 1; attempt <= 3; attempt++) {
      const c = await nextClaim(`crasher-${attempt}`, 5); // claims, then "crashes"
      expect(c.execution_id).toBe(run.execution_id);
      await expire();
      const r = await core.sweeper.tick();
      if (attempt < 3) expect(r.requeued).toBe(1);
      else expect(r.failed).toBe(1);
    }
    const rec = (await core.deps.executions.get(run.execution_id))!;
    expect(rec.status).toBe('failed');
    expect(rec.steps.s1.status).toBe('failed');
    const [row] = await queueRows(run.execution_id);
    expect([row.status, row.attempts]).toEqual(['failed', 3]);
    const done = (await core.deps.executions.events(run.execution_id)).events.find((e) => e.name === 'call.done')!;
    expect(done.payload.error).toEqual({ message: 'lease expired after 3 attempts', code: 'lease_expired' });
    expect(await core.broker.fetch({ max: 1, expiresMs: 200 })).toEqual([]);
  });

  it('a late call.done from a worker whose lease was reclaimed and claimed again is refused (409); the new holder completes it once', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const c = await nextClaim('slow', 5);
    await core.db.pool.query(`UPDATE queue SET lease_until = now() - interval '1 second' WHERE queue_id = $1`, [c.queue_id]);
    expect((await core.sweeper.tick()).requeued).toBe(1);
    const c2 = await nextClaim('fast');
    expect(c2.queue_id).toBe(c.queue_id);
    expect(c2.lease_token).not.toBe(c.lease_token);
    const late = await refusal(core.deps.executions.handleEvents([callDone(c, { response: 'slow' })]));
    expect([late.statusCode, late.code]).toEqual([409, 'not_lease_holder']);
    const ack = await core.deps.executions.handleEvents([callDone(c2, { response: 'fast' })]);
    expect(ack.accepted).toBe(1);
    // the holder's own retry of a call.done already recorded is a duplicate, not an error
    expect((await core.deps.executions.handleEvents([callDone(c2, { response: 'fast' })])).duplicates).toBe(1);
    expect((await core.deps.executions.get(run.execution_id))?.result).toBe('fast');
  });

  it('call.done and heartbeats are accepted only from the lease holder (worker_id + lease_token)', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const c = await nextClaim('holder');
    expect(c.lease_token).toMatch(/^[\w-]{16,}$/);
    const cases: Array<[string, WorkerEvent]> = [
      ['another worker', { ...callDone(c, { response: 1 }), worker_id: 'intruder' }],
      ['the right worker id, no token', { ...callDone(c, { response: 1 }), lease_token: undefined }],
      ['the right worker id, a wrong token', { ...callDone(c, { response: 1 }), lease_token: 'guessed' }],
      ['no queue_id', { execution_id: c.execution_id, step: c.step, name: 'call.done', worker_id: c.worker_id, lease_token: c.lease_token, payload: { response: 1 } }],
    ];
    for (const [what, ev] of cases) {
      const r = await refusal(core.deps.executions.handleEvents([ev]));
      expect([what, r.statusCode, r.code]).toEqual([what, 409, 'not_lease_holder']);
    }
    const hb = await refusal(core.deps.executions.heartbeat(c.queue_id, { worker_id: 'holder', lease_token: 'guessed' }));
    expect([hb.statusCode, hb.code]).toEqual([409, 'not_owner']);
    expect((await core.deps.executions.heartbeat(c.queue_id, { worker_id: 'holder', lease_token: c.lease_token })).lease_until).toBeDefined();
    expect((await core.deps.executions.get(run.execution_id))?.status).toBe('running');
    expect((await core.deps.executions.events(run.execution_id)).events.filter((e) => e.name === 'call.done')).toEqual([]);
    expect((await core.deps.executions.handleEvents([callDone(c, { response: 1 })])).accepted).toBe(1);
    expect((await core.deps.executions.get(run.execution_id))?.status).toBe('completed');
    const stored = (await core.db.pool.query(`SELECT payload::text FROM event WHERE execution_id = $1`, [run.execution_id])).rows.map((r) => r.payload).join('\n');
    expect(stored).not.toContain(c.lease_token); // the token is never stored in an event
  });

  it('a worker restarting with the same id releases its previous leases at once', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const c = await nextClaim('restarting', 3600);
    expect(await core.deps.executions.releaseWorker('someone-else')).toEqual({ released: 0 });
    expect(await core.deps.executions.releaseWorker('restarting')).toEqual({ released: 1 });
    const [row] = await queueRows(run.execution_id);
    expect([row.status, row.worker_id]).toEqual(['queued', null]);
    const again = await nextClaim('restarting', undefined, run.execution_id);
    expect(again.queue_id).toBe(c.queue_id);
    const stale = await refusal(core.deps.executions.handleEvents([callDone(c, { response: 'old' })]));
    expect(stale.statusCode).toBe(409);
    await core.deps.executions.handleEvents([callDone(again, { response: 'new' })]);
    expect((await core.deps.executions.get(run.execution_id))?.result).toBe('new');
  });

  it('vars: onVarsSet gets vars_set, loadVars reaches templates and the claim context', async () => {
    hookCalls.length = 0;
    const run = await core.deps.executions.start({ path: 't/vars' });
    const w = await runWorker(core, (c) => ({ response: (c.step === 'fetch' ? { value: 42 } : { ok: true }) as JsonObject }), { until: () => terminal(core, run.execution_id) });
    expect((await core.deps.executions.get(run.execution_id))?.status).toBe('completed');
    expect(hookCalls.find((c) => c[0] === 'onVarsSet')).toEqual(['onVarsSet', run.execution_id, { answer: 42 }, 'fetch']);
    const use = w.claimed.find((c) => c.step === 'use')!;
    expect(use.tool.args).toEqual({ answer: 42, api: 'from-api' });
    expect(use.context.vars).toMatchObject({ answer: 42, api_var: 'from-api' });
  });

  it('an early loop break cancels the queue rows of the items it made obsolete', async () => {
    await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: brk, path: t/break }
workflow:
  - step: start
    loop: { in: [1, 2, 3, 4, 5, 6], iterator: n, mode: async }
    tool: { kind: python, code: "result = n", args: { n: "{{ n }}" } }
    case:
      - when: "{{ event.name == 'call.done' and response.n == 1 }}"
        then:
          next: [{ step: done }]
  - step: done
    tool: { kind: python, code: "result = 'done'" }
`);
    const run = await core.deps.executions.start({ path: 't/break', payload: {} });
    expect((await queueRows(run.execution_id)).map((r) => r.status)).toEqual(Array(6).fill('queued'));
    // Answer item 1 only: the case rule breaks the loop while items 2..6 are still queued.
    const first = await nextClaim('w1', undefined, run.execution_id);
    expect(first.args).toBeDefined();
    await core.deps.executions.handleEvents([{ execution_id: run.execution_id, step: 'start', name: 'call.done', queue_id: first.queue_id, worker_id: first.worker_id, lease_token: first.lease_token, payload: { response: { n: 1 } } }]);
    const rows = await queueRows(run.execution_id);
    expect(rows.filter((r) => r.step === 'start').map((r) => r.status)).toEqual(['done', 'cancelled', 'cancelled', 'cancelled', 'cancelled', 'cancelled']);
    expect(rows.filter((r) => r.step === 'done').map((r) => r.status)).toEqual(['queued']);
    const stale = rows.find((r) => r.step === 'start' && r.command_id === 2)!;
    const refused = await refusal(core.deps.executions.claim(String(stale.queue_id), { worker_id: 'w2' }));
    expect(refused.statusCode).toBe(410);
  });

  it('cancel: open queue rows are cancelled, claims answer 410, cancelling twice is harmless', async () => {
    const run = await core.deps.executions.start({ path: 't/chain3' });
    const rec = await core.deps.executions.cancel(run.execution_id);
    expect(rec.status).toBe('cancelled');
    expect(rec.finished_at).not.toBeNull();
    const [row] = await queueRows(run.execution_id);
    expect(row.status).toBe('cancelled');
    const e = await refusal(core.deps.executions.claim(row.queue_id, { worker_id: 'w' }));
    expect([e.statusCode, e.code]).toEqual([410, 'finished']);
    expect((await core.deps.executions.cancel(run.execution_id)).status).toBe('cancelled');
    (await core.broker.fetch({ max: 10, expiresMs: 200 })).forEach((m) => m.ack());
  });

  it('child executions: the parent step gets call.done with the child result; the child is started once', async () => {
    const run = await core.deps.executions.start({ path: 't/parent' });
    const w = await runWorker(core, (c) => {
      return { response: { hello: (c.tool.args as JsonObject).name } };
    }, { until: () => terminal(core, run.execution_id) });
    const parent = (await core.deps.executions.get(run.execution_id))!;
    expect(parent.status).toBe('completed');
    expect(parent.steps.start.result).toEqual([{ hello: 'Ada' }, { hello: 'Grace' }]);
    const children = (await core.deps.executions.list({ path: 't/child' })).filter((e) => e.parent_execution_id === run.execution_id);
    expect(children).toHaveLength(2);
    for (const ch of children) {
      expect(ch.status).toBe('completed');
      expect(ch.root_execution_id).toBe(run.execution_id);
    }
    // a worker retrying "start child" for the same parent command gets the same child back
    const pc = w.claimed.find((c) => c.tool.kind === 'playbook')!;
    const again = await core.deps.executions.start({ path: 't/child', payload: {}, parent_execution_id: run.execution_id, parent_queue_id: pc.queue_id });
    expect(children.map((c) => c.execution_id)).toContain(again.execution_id);
    const rows = await queueRows(run.execution_id);
    expect(rows.every((r) => r.status === 'done')).toBe(true);
  });

  it('a failed child fails the parent step; cancelling a parent cancels its running child', async () => {
    const run = await core.deps.executions.start({ path: 't/parent' });
    await runWorker(core, () => ({ error: { message: 'boom' } }), { until: () => terminal(core, run.execution_id) });
    const parent = (await core.deps.executions.get(run.execution_id))!;
    expect(parent.status).toBe('failed');
    const done = (await core.deps.executions.events(run.execution_id)).events.filter((e) => e.name === 'call.done');
    expect(done.length).toBeGreaterThanOrEqual(1);
    expect(done[0].payload.error).toMatchObject({ code: 'child_failed' });

    const run2 = await core.deps.executions.start({ path: 't/parent' });
    // start the child of the first (sequential) loop item but do not answer it
    const c = await nextClaim('w1', undefined, run2.execution_id);
    await core.deps.executions.start({ path: c.child!.path, payload: c.child!.payload, parent_execution_id: c.execution_id, parent_queue_id: c.queue_id, worker_id: c.worker_id, lease_token: c.lease_token });
    const kids = (await core.deps.executions.list({ path: 't/child', status: 'started' })).filter((e) => e.parent_execution_id === run2.execution_id);
    expect(kids).toHaveLength(1);
    const held = (await queueRows(run2.execution_id))[0];
    expect([held.status, held.worker_id]).toEqual(['leased', `execution:${kids[0].execution_id}`]);
    const leasedBefore = (await core.deps.queue.stats()).leased;
    await core.db.pool.query(`UPDATE queue SET worker_id = 'w-x' WHERE queue_id = $1`, [held.queue_id]);
    expect((await core.deps.queue.stats()).leased).toBe(leasedBefore + 1); // a row held by a child uses no worker
    await core.db.pool.query(`UPDATE queue SET worker_id = $2 WHERE queue_id = $1`, [held.queue_id, held.worker_id]);
    expect((await core.sweeper.tick()).requeued).toBe(0); // never expires
    await core.deps.executions.cancel(run2.execution_id);
    for (const k of kids) expect((await core.deps.executions.get(k.execution_id))?.status).toBe('cancelled');
    (await core.broker.fetch({ max: 10, expiresMs: 200 })).forEach((m) => m.ack());
  });

  it('the snapshot can be dropped at any time: state rebuilt from the log equals the cached one', async () => {
    const json = (v: unknown) => JSON.parse(JSON.stringify(v));
    const run = await core.deps.executions.start({ path: 't/chain3' });
    const id = run.execution_id;
    let n = 0;
    await runWorker(core, (c) => {
      n++;
      return echo(c);
    }, { until: async () => n >= 1 });
    const viaLog = json(await core.executions.foldState(id));
    expect(json(await core.executions.loadState(id))).toEqual(viaLog); // process cache / snapshot path
    const { rows } = await core.db.pool.query('SELECT seq, state FROM execution_snapshot WHERE execution_id = $1', [id]);
    if (rows[0]) expect(json(await core.executions.foldState(id, rows[0].seq))).toEqual(rows[0].state);
    await core.executions.dropSnapshots(id);
    expect(json(await core.executions.loadState(id))).toEqual(viaLog); // rebuilt from the log alone
    await runWorker(core, echo, { until: () => terminal(core, id) });
    const rec = (await core.deps.executions.get(id))!;
    expect(rec.status).toBe('completed');
    const snap = await core.db.pool.query('SELECT seq, state FROM execution_snapshot WHERE execution_id = $1', [id]);
    const { events } = await core.deps.executions.events(id);
    expect(snap.rows[0].seq).toBe(events.at(-1)!.seq); // always written at the end
    expect(json(await core.executions.foldState(id))).toEqual(snap.rows[0].state);
  });

  it("a snapshot of the previous version (execution_state) is read, and never written: a rolling upgrade's old servers do not see the new layout", async () => {
    const strict = await testCore(tdb.url, { snapshotEvery: 1, snapshotGrowth: 0, stateCacheSize: 0, serverName: 'upgrade' });
    try {
      const run = await strict.deps.executions.start({ path: 't/chain3' });
      const id = run.execution_id;
      let n = 0;
      await runWorker(strict, (c) => {
        n++;
        return echo(c);
      }, { until: async () => n >= 1 });
      // as if an old server had written the latest snapshot
      await strict.db.pool.query('INSERT INTO execution_state SELECT * FROM execution_snapshot WHERE execution_id = $1', [id]);
      await strict.db.pool.query('DELETE FROM execution_snapshot WHERE execution_id = $1', [id]);
      const old = (await strict.db.pool.query('SELECT seq, state FROM execution_state WHERE execution_id = $1', [id])).rows[0];
      expect(old).toBeDefined();
      await runWorker(strict, echo, { until: () => terminal(strict, id) });
      expect((await strict.deps.executions.get(id))?.result).toMatchObject({ step: 's3', i: 3 });
      expect((await strict.db.pool.query('SELECT seq, state FROM execution_state WHERE execution_id = $1', [id])).rows[0]).toEqual(old);
      const { events } = await strict.deps.executions.events(id);
      expect((await strict.db.pool.query('SELECT seq FROM execution_snapshot WHERE execution_id = $1', [id])).rows[0].seq).toBe(events.at(-1)!.seq);
    } finally {
      await strict.close();
    }
  });

  it('a snapshot after every event and no process cache give the same execution', async () => {
    const json = (v: unknown) => JSON.parse(JSON.stringify(v));
    const strict = await testCore(tdb.url, { snapshotEvery: 1, snapshotGrowth: 0, stateCacheSize: 0, serverName: 'strict' });
    try {
      const run = await strict.deps.executions.start({ path: 't/chain3' });
      let n = 0;
      await runWorker(strict, (c) => {
        n++;
        return echo(c);
      }, { until: async () => n >= 2 });
      const { rows } = await strict.db.pool.query('SELECT seq, state FROM execution_snapshot WHERE execution_id = $1', [run.execution_id]);
      const { events } = await strict.deps.executions.events(run.execution_id);
      expect(rows[0].seq).toBe(events.at(-1)!.seq);
      expect(json(await strict.executions.foldState(run.execution_id))).toEqual(rows[0].state);
      await runWorker(strict, echo, { until: () => terminal(strict, run.execution_id) });
      expect((await strict.deps.executions.get(run.execution_id))?.result).toMatchObject({ step: 's3', i: 3 });
    } finally {
      await strict.stop();
    }
  });

  it('queue stats and runtime registrations', async () => {
    const run = await core.deps.executions.start({ path: 't/chain1' });
    const stats = await core.deps.queue.stats();
    expect(stats.queued).toBeGreaterThanOrEqual(1);
    expect(stats.oldest_age_seconds).toBeGreaterThanOrEqual(0);
    await core.db.pool.query(`UPDATE queue SET available_at = now() + interval '1 hour' WHERE execution_id = $1`, [run.execution_id]);
    const delayed = await core.deps.queue.stats();
    expect(delayed.delayed).toBe(stats.delayed + 1);
    expect(delayed.queued).toBe(stats.queued - 1);
    await core.deps.executions.cancel(run.execution_id);
    expect((await core.deps.queue.stats()).delayed).toBe(stats.delayed);
    await core.deps.runtime.register({ kind: 'worker', name: 'w-1', info: { pool: 'default' } });
    await core.deps.runtime.heartbeat('worker', 'w-1');
    const list = await core.deps.runtime.list();
    expect(list.find((r) => r.kind === 'server' && r.name === core.serverName)).toBeTruthy();
    expect(list.find((r) => r.name === 'w-1')).toMatchObject({ kind: 'worker', info: { pool: 'default' } });
    expect((await refusal(core.deps.runtime.register({ kind: 'x' as 'worker', name: 'n' }))).statusCode).toBe(400);
    (await core.broker.fetch({ max: 10, expiresMs: 200 })).forEach((m) => m.ack());
  });
});

describe('several server replicas', () => {
  let tdb2: TestDatabase;
  beforeAll(async () => {
    tdb2 = await testDatabase('pf_replicas');
  });
  afterAll(async () => {
    await tdb2?.drop();
  });

  it('two services (separate pools) drive the same executions concurrently: no duplicate command, no lost event', async () => {
    const broker = new MemoryBroker({ ackWaitMs: 10_000 });
    const a = await testCore(tdb2.url, { brokerInstance: broker, serverName: 'a' });
    const b = await testCore(tdb2.url, { brokerInstance: broker, serverName: 'b' });
    try {
      await a.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: fan, path: t/fan }
workflow:
  - step: start
    loop: { in: [1, 2, 3, 4, 5, 6], iterator: n, mode: async }
    tool: { kind: python, code: "result = 1", args: { n: "{{ n }}" } }
    next: [left, right]
  - step: left
    tool: { kind: python, code: "result = 1" }
    next: join
  - step: right
    tool: { kind: python, code: "result = 1" }
    next: join
  - step: join
    tool: { kind: python, code: "result = 1" }
`);
      const runs = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => (i % 2 ? a : b).deps.executions.start({ path: 't/fan' })));
      const ids = runs.map((r) => r.execution_id);
      const allDone = async () => (await Promise.all(ids.map((id) => terminal(a, id)))).every(Boolean);
      const script: Script = (c) => ({ response: { n: (c.tool.args as JsonObject)?.n ?? c.step } });
      // four workers; two talk to replica a, two to replica b; every call.done is also sent to the other replica (duplicates)
      const worker = (mine: ServerCore, other: ServerCore, id: string) => runWorker(mine, async (c) => {
        const r = await script(c);
        await other.deps.executions.handleEvents([{ execution_id: c.execution_id, step: c.step, name: 'call.done', queue_id: c.queue_id, worker_id: c.worker_id, lease_token: c.lease_token, payload: r as JsonObject }]);
        return r;
      }, { until: allDone, workerId: id, timeoutMs: 60_000 });
      const results = await Promise.all([worker(a, b, 'wa1'), worker(a, b, 'wa2'), worker(b, a, 'wb1'), worker(b, a, 'wb2')]);
      const claimed = results.flatMap((r) => r.claimed);
      const keys = claimed.map((c) => `${c.execution_id}/${c.command_id}`);
      expect(new Set(keys).size).toBe(keys.length); // never two claims of one command
      for (const id of ids) {
        const rec = (await a.deps.executions.get(id))!;
        expect(rec.status).toBe('completed');
        expect(rec.steps.join.runs).toBeGreaterThanOrEqual(1);
        const { events } = await a.deps.executions.events(id);
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
        const issued = events.filter((e) => e.name === 'command_issued').map((e) => e.command_id);
        expect(new Set(issued).size).toBe(issued.length);
        const done = events.filter((e) => e.name === 'call.done').map((e) => e.command_id);
        expect(done.sort()).toEqual([...issued].sort()); // every command finished exactly once
        const { rows } = await a.db.pool.query(`SELECT count(*) FILTER (WHERE status <> 'done') AS open, count(*) AS n FROM queue WHERE execution_id = $1`, [id]);
        expect(rows[0]).toEqual({ open: '0', n: String(issued.length) });
        expect(JSON.parse(JSON.stringify(await a.executions.foldState(id)))).toEqual(
          (await a.db.pool.query('SELECT state FROM execution_snapshot WHERE execution_id = $1', [id])).rows[0].state);
      }
    } finally {
      await a.stop();
      await b.stop();
      await broker.close();
    }
  });

  it('restart in the middle of a 20-step execution: a new core on the same database finishes it, every step run once', async () => {
    const broker = new MemoryBroker();
    let c1 = await testCore(tdb2.url, { brokerInstance: broker, serverName: 'first' });
    await c1.deps.catalog.register(chainPlaybook('t/chain20', 20));
    const run = await c1.deps.executions.start({ path: 't/chain20' });
    const ran: string[] = [];
    const script: Script = (c) => {
      ran.push(c.step);
      return { response: { i: (c.tool.args as JsonObject).i } };
    };
    await runWorker(c1, script, { until: async () => ran.length >= 9 });
    // one command claimed and in flight when the server goes away
    const [m] = await broker.fetch({ max: 1, expiresMs: 2000 });
    const inFlight = await c1.deps.executions.claim(m.data.queue_id, { worker_id: 'w1' });
    await c1.stop();
    c1 = await testCore(tdb2.url, { brokerInstance: broker, serverName: 'second' });
    try {
      // the worker finishes the command it had and reports to the new server
      ran.push(inFlight.step);
      await c1.deps.executions.handleEvents([{ execution_id: inFlight.execution_id, step: inFlight.step, name: 'call.done', queue_id: inFlight.queue_id, worker_id: inFlight.worker_id, lease_token: inFlight.lease_token, payload: { response: { i: (inFlight.tool.args as JsonObject).i } } }]);
      m.ack();
      await runWorker(c1, script, { until: () => terminal(c1, run.execution_id), timeoutMs: 60_000 });
      const rec = (await c1.deps.executions.get(run.execution_id))!;
      expect(rec.status).toBe('completed');
      expect(rec.result).toEqual({ i: 20 });
      expect(ran).toEqual(Array.from({ length: 20 }, (_, i) => `s${i + 1}`));
      for (const s of Object.values(rec.steps)) expect(s.runs).toBe(1);
    } finally {
      await c1.stop();
      await broker.close();
    }
  });
});
