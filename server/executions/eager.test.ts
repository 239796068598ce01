/**
 * Eager dispatch: a call.done sent with claim_next answers with the commands it issued, already
 * leased to that worker in the same transaction — recorded like a claim, never published.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedCommand, EventsAck, WorkerEvent } from '../../common/protocol.js';
import type { TestDatabase } from '../../test/helpers/pg.js';
import { buildApp } from '../app/index.js';
import type { ServerCore } from '../core.js';
import { AppError } from '../errors.js';
import { chainPlaybook, loopPlaybook, testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
let core: ServerCore;
let app: FastifyInstance;
let base: string;

const loop = (path: string, n: number) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: ${path.split('/').pop()}, path: ${path} }
workflow:
  - step: first
    tool: { kind: python, code: "result = 1" }
    next: [{ step: items }]
  - step: items
    loop: { in: "{{ range(${n}) | list }}", iterator: i, mode: async, max_in_flight: ${n} }
    tool: { kind: python, code: "result = i", args: { i: "{{ i }}" } }
`;

const retrying = `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: retrying, path: e/retrying }
workflow:
  - step: flaky
    tool: { kind: python, code: "result = 1" }
    case:
      - when: "{{ error is defined }}"
        then:
          retry: { max_attempts: 3, initial_delay: 5, backoff_multiplier: 1 }
`;

const bounded = loopPlaybook('e/bounded', '{{ range(9) | list }}', 3, 'i');

beforeAll(async () => {
  tdb = await testDatabase('pf_eager');
  core = await testCore(tdb.url);
  await core.deps.catalog.register(chainPlaybook('e/chain', 5));
  await core.deps.catalog.register(loop('e/loop', 3));
  await core.deps.catalog.register(bounded);
  await core.deps.catalog.register(retrying);
  app = await buildApp(core.deps);
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await app?.close();
  await core?.stop();
  await tdb?.drop();
});

/** Queue ids of the notifications now waiting for `executionId` (acked, so they are gone). */
async function notified(executionId: string): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const msgs = await core.broker.fetch({ max: 16, expiresMs: 150 });
    if (msgs.length === 0) return ids;
    for (const m of msgs) {
      m.ack();
      if (m.data.execution_id === executionId) ids.push(m.data.queue_id);
    }
  }
}

/** call.done of `cmd`; by default the result a chain step returns ({i}), which the next step's args read. */
const done = (cmd: ClaimedCommand, reply: object = { response: { i: (cmd.tool.args as { i?: number } | undefined)?.i ?? 1 } }): WorkerEvent => ({
  execution_id: cmd.execution_id, step: cmd.step, name: 'call.done', queue_id: cmd.queue_id, worker_id: cmd.worker_id, lease_token: cmd.lease_token,
  payload: { ...reply, meta: { duration_ms: 1 } },
});

async function firstCommand(path: string): Promise<{ id: string; cmd: ClaimedCommand }> {
  const { execution_id: id } = await core.deps.executions.start({ path, payload: {} });
  const [queueId] = await notified(id);
  expect(queueId).toBeDefined();
  return { id, cmd: await core.deps.executions.claim(queueId, { worker_id: 'w-eager' }) };
}

describe('call.done with claim_next', () => {
  it('runs a chain with one notification: each answer is the next step, leased, recorded as claimed', async () => {
    const { id, cmd: first } = await firstCommand('e/chain');
    let cmd: ClaimedCommand | undefined = first;
    const steps: string[] = [];
    const eagerIds: string[] = [];
    while (cmd) {
      steps.push(cmd.step);
      const ack = await core.deps.executions.handleEvents([done(cmd)], { claimNext: { worker_id: 'w-eager', lease_seconds: 30 } });
      expect(ack.accepted).toBe(1);
      expect(ack.claimed).toBeDefined();
      expect(ack.claimed!.length).toBeLessThanOrEqual(1);
      cmd = ack.claimed![0];
      if (cmd) {
        eagerIds.push(String(cmd.queue_id));
        expect(cmd).toMatchObject({ worker_id: 'w-eager', attempt: 1, execution_id: id, tool: { kind: 'python' } });
        expect(Date.parse(cmd.lease_until) - Date.now()).toBeGreaterThan(20_000);
        // the args rendered from the previous step's result, as a claim would give them
        expect(cmd.tool.args).toMatchObject({ i: steps.length + 1, prev: steps.length });
      }
    }
    expect(steps).toEqual(['s1', 's2', 's3', 's4', 's5']);
    expect((await core.deps.executions.get(id))?.status).toBe('completed');
    expect(await notified(id)).toEqual([]); // only s1's notification was ever published

    const { events } = await core.deps.executions.events(id);
    const started = events.filter((e) => e.name === 'action_started');
    expect(started.map((e) => e.step)).toEqual(steps);
    for (const qid of eagerIds) {
      const ev = started.find((e) => e.payload.queue_id === qid)!;
      expect(ev.payload).toMatchObject({ worker_id: 'w-eager', delivery: 1 });
      // issued, then started, then done: in that order in the log
      const issued = events.find((e) => e.name === 'command_issued' && e.command_id === ev.command_id)!;
      const finished = events.find((e) => e.name === 'call.done' && e.command_id === ev.command_id)!;
      expect(issued.seq).toBeLessThan(ev.seq);
      expect(ev.seq).toBeLessThan(finished.seq);
    }
    const { rows } = await core.db.pool.query(`SELECT status, attempts, worker_id, published_at FROM queue WHERE execution_id = $1 ORDER BY queue_id`, [id]);
    expect(rows).toHaveLength(5);
    for (const r of rows) expect(r).toMatchObject({ status: 'done', attempts: 1, worker_id: 'w-eager' });
    expect(rows.slice(1).every((r) => r.published_at === null)).toBe(true);
    // the state the service keeps is the fold of the log
    expect(await core.executions.foldState(id)).toEqual(await core.executions.loadState(id));
  });

  it('an eagerly leased row behaves as a claimed one: 409 to a claim, heartbeats for its owner only', async () => {
    const { id, cmd } = await firstCommand('e/chain');
    const ack = await core.deps.executions.handleEvents([done(cmd)], { claimNext: { worker_id: 'w-eager' } });
    const next = ack.claimed![0];
    const refused = await core.deps.executions.claim(String(next.queue_id), { worker_id: 'w-other' }).catch((e: AppError) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).statusCode).toBe(409);
    const beat = await core.deps.executions.heartbeat(String(next.queue_id), { worker_id: 'w-eager', lease_token: next.lease_token, lease_seconds: 120 });
    expect(Date.parse(beat.lease_until) - Date.now()).toBeGreaterThan(100_000);
    await expect(core.deps.executions.heartbeat(String(next.queue_id), { worker_id: 'w-other', lease_token: next.lease_token })).rejects.toMatchObject({ statusCode: 409 });
    // the eager claim's own token: without it the owner's id alone is not enough
    await expect(core.deps.executions.heartbeat(String(next.queue_id), { worker_id: 'w-eager' })).rejects.toMatchObject({ statusCode: 409 });
    await core.deps.executions.cancel(id);
  });

  it('an eager lease that lapses is reclaimed like any other: queued again and published', async () => {
    const { id, cmd } = await firstCommand('e/chain');
    const ack = await core.deps.executions.handleEvents([done(cmd)], { claimNext: { worker_id: 'w-gone', lease_seconds: 1 } });
    const next = ack.claimed![0];
    await new Promise((r) => setTimeout(r, 1200));
    expect(await core.executions.reclaimLease(String(next.queue_id), id)).toBe('requeued');
    expect(await notified(id)).toEqual([String(next.queue_id)]);
    const again = await core.deps.executions.claim(String(next.queue_id), { worker_id: 'w-back' });
    expect(again).toMatchObject({ step: 's2', worker_id: 'w-back' });
    await core.deps.executions.cancel(id);
  });

  it('a call.done resent because its answer was lost (claim_next.resent): the commands that answer held are queued and announced again, no other lease is touched', async () => {
    const { id, cmd: s1 } = await firstCommand('e/chain');
    const eager = { claimNext: { worker_id: 'w-eager', lease_seconds: 300 } };
    const resent = { claimNext: { ...eager.claimNext, resent: true } };
    const s2 = (await core.deps.executions.handleEvents([done(s1)], eager)).claimed![0];
    const s3 = (await core.deps.executions.handleEvents([done(s2)], eager)).claimed![0];
    expect(s3).toMatchObject({ step: 's3', worker_id: 'w-eager' });
    const status = async (qid: string | number) => (await core.db.pool.query('SELECT status, worker_id, attempts FROM queue WHERE queue_id = $1', [qid])).rows[0];

    // repeated without `resent`, a report changes nothing (its sender may run what it was handed)
    expect(await core.deps.executions.handleEvents([done(s2)], eager)).toMatchObject({ accepted: 0, duplicates: 1, claimed: [] });
    expect(await status(s3.queue_id)).toMatchObject({ status: 'leased', worker_id: 'w-eager' });
    // an older call.done resent (s1's): its answer's command (s2) is done, and s3 is not its to end
    expect(await core.deps.executions.handleEvents([done(s1)], resent)).toMatchObject({ accepted: 0, duplicates: 1, claimed: [] });
    expect(await status(s3.queue_id)).toMatchObject({ status: 'leased', worker_id: 'w-eager' });
    expect(await notified(id)).toEqual([]);

    // s2's answer (s3) was lost, and its worker sends the call.done again
    expect(await core.deps.executions.handleEvents([done(s2)], resent)).toMatchObject({ accepted: 0, duplicates: 1, claimed: [] });
    expect(await status(s3.queue_id)).toMatchObject({ status: 'queued', attempts: 1 });
    expect(await notified(id)).toEqual([String(s3.queue_id)]);
    // the lost answer's lease is gone: its token extends nothing; the command is anyone's to claim
    await expect(core.deps.executions.heartbeat(String(s3.queue_id), { worker_id: 'w-eager', lease_token: s3.lease_token })).rejects.toMatchObject({ statusCode: 409 });
    const again = await core.deps.executions.claim(String(s3.queue_id), { worker_id: 'w-other' });
    expect(again).toMatchObject({ step: 's3', worker_id: 'w-other' });
    expect(again.lease_token).not.toBe(s3.lease_token);
    // a third time: nothing left to end
    expect(await core.deps.executions.handleEvents([done(s2)], resent)).toMatchObject({ duplicates: 1 });
    expect(await status(s3.queue_id)).toMatchObject({ status: 'leased', worker_id: 'w-other' });
    expect(await core.executions.foldState(id)).toEqual(await core.executions.loadState(id));
    await core.deps.executions.cancel(id);
  });

  it('call.dones arriving together (one group commit) each get their own next item', async () => {
    const { execution_id: id } = await core.deps.executions.start({ path: 'e/bounded', payload: {} });
    const first = await notified(id);
    expect(first).toHaveLength(3);
    let running = await Promise.all(first.map((q) => core.deps.executions.claim(q, { worker_id: 'w-eager' })));
    const seen = new Set(running.map((c) => String(c.queue_id)));
    const batchesBefore = core.executions.groupCommits.transactions;
    const requests = { n: 0 };
    while (running.length) {
      const acks = await Promise.all(running.map((c) => core.deps.executions.handleEvents([done(c, { response: (c.tool.args as { i?: number } | undefined)?.i ?? null })], { claimNext: { worker_id: 'w-eager' } })));
      requests.n += running.length;
      running = acks.flatMap((a) => a.claimed ?? []);
      for (const c of running) {
        expect(seen.has(String(c.queue_id))).toBe(false); // every handed-over command is a new row
        seen.add(String(c.queue_id));
      }
    }
    expect(seen.size).toBe(9);
    // some of those requests shared a transaction, and still each got its own command
    expect(core.executions.groupCommits.transactions - batchesBefore).toBeLessThan(requests.n);
    const x = await core.deps.executions.get(id);
    expect(x?.status).toBe('completed');
    expect(x?.result).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(await notified(id)).toEqual([]);
    const { rows } = await core.db.pool.query(`SELECT count(*)::int AS n FROM queue WHERE execution_id = $1 AND status = 'done' AND attempts = 1`, [id]);
    expect(rows[0].n).toBe(9);
  });

  it('takes at most max of the due commands; the rest are published for any worker', async () => {
    const { id, cmd } = await firstCommand('e/loop');
    const ack = await core.deps.executions.handleEvents([done(cmd)], { claimNext: { worker_id: 'w-eager', max: 2 } });
    expect(ack.commands).toBe(3);
    expect(ack.claimed!.map((c) => c.step)).toEqual(['items', 'items']);
    const published = await notified(id);
    expect(published).toHaveLength(1);
    expect(ack.claimed!.map((c) => String(c.queue_id))).not.toContain(published[0]);
    await core.deps.executions.cancel(id);
  });

  it('does not lease a delayed command (a retry with backoff) or anything after the end', async () => {
    const { id, cmd } = await firstCommand('e/retrying');
    const ack = await core.deps.executions.handleEvents([done(cmd, { error: { message: 'boom' } })], { claimNext: { worker_id: 'w-eager' } });
    expect(ack.commands).toBe(1);
    expect(ack.claimed).toEqual([]);
    const { rows } = await core.db.pool.query(`SELECT status, attempts FROM queue WHERE execution_id = $1 ORDER BY queue_id`, [id]);
    expect(rows[1]).toMatchObject({ status: 'queued', attempts: 0 });
    await core.deps.executions.cancel(id);

    const chain = await firstCommand('e/chain');
    let c: ClaimedCommand | undefined = chain.cmd;
    let last: ClaimedCommand[] | undefined;
    while (c) {
      last = (await core.deps.executions.handleEvents([done(c)], { claimNext: { worker_id: 'w-eager' } })).claimed;
      c = last?.[0];
    }
    expect(last).toEqual([]);
  });

  it('refuses a bad claim_next with the field named, over HTTP too, and records nothing', async () => {
    const { id, cmd } = await firstCommand('e/chain');
    // claim_next is validated at the edge (common/contract ClaimNextRequest); the service trusts it
    const refused = async (claim_next: object) => {
      const r = await app.inject({ method: 'POST', url: '/api/v2/events', payload: { events: [done(cmd)], claim_next } });
      throw { statusCode: r.statusCode, ...r.json().error };
    };
    await expect(refused({ worker_id: 'w', max: 0 })).rejects.toMatchObject({ statusCode: 400, message: expect.stringContaining('claim_next.max') });
    await expect(refused({ worker_id: '' })).rejects.toMatchObject({ statusCode: 400, message: expect.stringContaining('worker_id') });
    const res = await fetch(`${base}/api/v2/events`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ events: [done(cmd)], claim_next: { worker_id: 'w', max: 'two' } }),
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain('claim_next');
    expect((await core.deps.executions.events(id)).events.filter((e) => e.name === 'call.done')).toEqual([]);

    // and the same request, well formed, over HTTP
    const ok = await fetch(`${base}/api/v2/events`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ events: [done(cmd)], claim_next: { worker_id: 'w-http', lease_seconds: 10 } }),
    });
    expect(ok.status).toBe(200);
    const ack = (await ok.json()) as { claimed: ClaimedCommand[] };
    expect(ack).toMatchObject({ accepted: 1, commands: 1, claimed: [{ step: 's2', worker_id: 'w-http', attempt: 1 }] });
    expect(ack.claimed[0].context.workload).toBeDefined();
    await core.deps.executions.cancel(id);
  });
});

describe('an independent batch (POST /api/v2/events with independent: true)', () => {
  const post = async (body: unknown) => {
    const res = await fetch(`${base}/api/v2/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as EventsAck };
  };
  const item = (c: ClaimedCommand) => done(c, { response: (c.tool.args as { i?: number } | undefined)?.i ?? null });

  it('handles each call.done as if it came alone: a refused one stops none of the others, each gets its own next item', async () => {
    const { execution_id: id } = await core.deps.executions.start({ path: 'e/bounded', payload: {} });
    const first = await notified(id);
    expect(first).toHaveLength(3);
    const running = await Promise.all(first.map((q) => core.deps.executions.claim(q, { worker_id: 'w-batch' })));
    const forged = { ...item(running[1]), lease_token: 'not-the-token-of-this-lease' };

    const { status, body } = await post({ events: [item(running[0]), forged, item(running[2])], claim_next: { worker_id: 'w-batch' }, independent: true });
    expect(status).toBe(200);
    expect(body.results).toHaveLength(3);
    expect(body.results![1]).toMatchObject({ status: 409, error: { code: 'not_lease_holder' } });
    for (const i of [0, 2]) {
      expect(body.results![i]).toMatchObject({ status: 200, duplicate: false, commands: 1 });
      expect(body.results![i].claimed).toHaveLength(1);
      expect(body.results![i].claimed![0]).toMatchObject({ step: 'items', worker_id: 'w-batch', attempt: 1 });
    }
    expect(body).toMatchObject({ accepted: 2, duplicates: 0, commands: 2 });
    expect(body.claimed!.map((c) => c.queue_id)).toEqual([body.results![0].claimed![0].queue_id, body.results![2].claimed![0].queue_id]);
    const status1 = async (q: string) => (await core.db.pool.query('SELECT status FROM queue WHERE queue_id = $1', [q])).rows[0].status;
    expect(await status1(String(running[1].queue_id))).toBe('leased'); // the refused report changed nothing
    expect(await status1(String(running[0].queue_id))).toBe('done');

    // the same reports again: the two taken are duplicates, as any repeated report is; the third is taken now
    const again = await post({ events: [item(running[0]), item(running[1]), item(running[2])], claim_next: { worker_id: 'w-batch' }, independent: true });
    expect(again.body.results!.map((r) => [r.status, r.duplicate])).toEqual([[200, true], [200, false], [200, true]]);
    expect(again.body).toMatchObject({ accepted: 1, duplicates: 2 });
    let next = [...body.claimed!, ...again.body.results![1].claimed!];
    while (next.length) {
      const r = await post({ events: next.map(item), claim_next: { worker_id: 'w-batch' }, independent: true });
      expect(r.body.results!.every((x) => x.status === 200)).toBe(true);
      next = r.body.results!.flatMap((x) => x.claimed ?? []);
    }
    const x = await core.deps.executions.get(id);
    expect(x).toMatchObject({ status: 'completed', result: [0, 1, 2, 3, 4, 5, 6, 7, 8] });
    expect(await notified(id)).toEqual([]); // every item after the first three went to the batch's worker
    expect(await core.executions.foldState(id)).toEqual(await core.executions.loadState(id));
  });

  it('refuses a malformed independent flag, naming it, and records nothing', async () => {
    const { id, cmd } = await firstCommand('e/chain');
    const r = await post({ events: [done(cmd)], independent: 'yes' });
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('independent');
    expect((await core.deps.executions.events(id)).events.filter((e) => e.name === 'call.done')).toEqual([]);
    await core.deps.executions.cancel(id);
  });
});
