/**
 * Transactional outbox and sweeper against real NATS JetStream (unique names per suite) and the
 * in-process broker: nothing is lost while NATS is down, delayed commands wait, stale
 * notifications are republished, replicas sweeping together publish each row once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JsonObject } from '../../playbook/types.js';
import { BROKER_URL, uniqueBrokerNames } from '../../test/helpers/nats.js';
import { recordQueries, type TestDatabase } from '../../test/helpers/pg.js';
import { MemoryBroker } from '../../common/broker/memory.js';
import type { BrokerMessage } from '../../common/broker/types.js';
import { createServerCore, type ServerCore } from '../core.js';
import { Outbox } from './outbox.js';
import { silentLogger, type Logger } from '../../common/logger.js';
import type { Db } from '../db.js';
import { chainPlaybook, runWorker, terminal, testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
const names = uniqueBrokerNames('OB');

beforeAll(async () => {
  tdb = await testDatabase('pf_outbox');
});
afterAll(async () => {
  const nc = await connect({ servers: BROKER_URL });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(names.stream).catch(() => {});
  await nc.close();
  await tdb?.drop();
});

async function drain(fetch: () => Promise<BrokerMessage[]>): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const batch = await fetch();
    if (batch.length === 0) return ids;
    for (const m of batch) {
      ids.push(m.data.queue_id);
      m.ack();
    }
  }
}

async function unpublished(core: ServerCore): Promise<string[]> {
  const { rows } = await core.db.pool.query(`SELECT queue_id FROM queue WHERE status = 'queued' AND published_at IS NULL ORDER BY queue_id`);
  return rows.map((r) => r.queue_id);
}

describe('outbox and sweeper', () => {
  it('NATS down: starts still succeed, rows stay unpublished; once NATS works the sweeper publishes every one and the executions complete', async () => {
    const down = await testCore(tdb.url, { brokerUrl: 'nats://127.0.0.1:1', brokerSettings: names, serverName: 'down' });
    let runs: string[];
    try {
      await down.deps.catalog.register(chainPlaybook('o/chain2', 2));
      runs = [];
      for (let i = 0; i < 3; i++) runs.push((await down.deps.executions.start({ path: 'o/chain2' })).execution_id);
      expect(await unpublished(down)).toHaveLength(3);
      expect((await down.sweeper.tick()).published).toBe(0); // still down: nothing marked published
      expect(await unpublished(down)).toHaveLength(3);
    } finally {
      await down.stop();
    }

    const up = await testCore(tdb.url, { brokerUrl: BROKER_URL, brokerSettings: names, serverName: 'up' });
    try {
      const pending = await unpublished(up);
      expect((await up.sweeper.tick()).published).toBe(3);
      expect(await unpublished(up)).toEqual([]);
      // the notifications are on the real stream
      const got: BrokerMessage[] = [];
      while (got.length < 3) {
        const batch = await up.broker.fetch({ max: 3, expiresMs: 2000 });
        if (batch.length === 0) break;
        got.push(...batch);
      }
      expect(got.map((m) => m.data.queue_id).sort()).toEqual([...pending].sort());
      expect(got[0].data.server_url).toBe('http://playflow.test');
      got.forEach((m) => m.nak()); // hand them back to the pool
      const allDone = async () => (await Promise.all(runs.map((id) => terminal(up, id)))).every(Boolean);
      await runWorker(up, (c) => ({ response: { i: (c.tool.args as JsonObject).i } }), { until: allDone, timeoutMs: 30_000 });
      for (const id of runs) expect((await up.deps.executions.get(id))?.status).toBe('completed');
    } finally {
      await up.stop();
    }
  });

  it('published_at marks of concurrent publishes go in one UPDATE, and each publish returns once its rows are marked', async () => {
    // rows left unpublished by a server whose broker is down, published by an outbox of our own
    const down = await testCore(tdb.url, { brokerUrl: 'nats://127.0.0.1:1', brokerSettings: uniqueBrokerNames('MK'), serverName: 'marks' });
    try {
      await down.deps.catalog.register(chainPlaybook('o/marks', 1));
      const runs: string[] = [];
      for (let i = 0; i < 12; i++) runs.push((await down.deps.executions.start({ path: 'o/marks' })).execution_id);
      const { rows } = await down.db.pool.query<{ queue_id: string; execution_id: string; step: string; pool: string }>(
        `SELECT queue_id, execution_id::text AS execution_id, step, pool FROM queue WHERE execution_id = ANY($1::bigint[]) AND published_at IS NULL`, [runs]);
      expect(rows).toHaveLength(12);

      const broker = new MemoryBroker();
      const outbox = new Outbox(down.db, broker, 'http://playflow.test', silentLogger);
      const { value: markedOnReturn, sent } = await recordQueries(() => Promise.all(rows.map(async (r) => {
        expect(await outbox.publish([r])).toEqual([r.queue_id]);
        const { rows: [row] } = await down.db.pool.query('SELECT published_at IS NOT NULL AS marked FROM queue WHERE queue_id = $1', [r.queue_id]);
        return row.marked as boolean;
      })));
      expect(markedOnReturn).toEqual(rows.map(() => true));
      // the first publish's UPDATE runs alone; the eleven that arrive meanwhile share the next one
      expect(sent.filter((q) => q === 'playflow.mark_published').length).toBeLessThanOrEqual(2);
      expect(await drain(() => broker.fetch({ max: 20, expiresMs: 50 }))).toHaveLength(12);
      await broker.close();

      // a mark that fails is logged and the publish still returns what went out
      const logged: Array<{ level: string; obj: object; msg?: string }> = [];
      const recording: Logger = {
        debug: (obj, msg) => void logged.push({ level: 'debug', obj, msg }),
        info: (obj, msg) => void logged.push({ level: 'info', obj, msg }),
        warn: (obj, msg) => void logged.push({ level: 'warn', obj, msg }),
        error: (obj, msg) => void logged.push({ level: 'error', obj, msg }),
      };
      const failing = new Outbox({ ...down.db, pool: { query: async () => { throw new Error('database gone'); } } } as unknown as Db, new MemoryBroker(), 'http://playflow.test', recording);
      expect(await failing.publish([rows[0]])).toEqual([rows[0].queue_id]);
      const problems = logged.filter((l) => l.level === 'warn' || l.level === 'error');
      expect(problems).toHaveLength(1);
      expect(problems[0].msg).toMatch(/published_at/);
      expect(problems[0].obj).toMatchObject({ err: expect.stringContaining('database gone') });
    } finally {
      await down.stop();
    }
  });

  it('JetStream end to end: workers on broker.consume() drive an async loop and a chain to completion', async () => {
    const jsNames = uniqueBrokerNames('E2E');
    const core = await testCore(tdb.url, { brokerUrl: BROKER_URL, brokerSettings: jsNames, serverName: 'js' });
    try {
      await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: js, path: o/js }
workflow:
  - step: fan
    loop: { in: [1, 2, 3, 4, 5, 6, 7, 8], iterator: n, mode: async }
    tool: { kind: python, code: "result = n * n", args: { n: "{{ n }}" } }
    next: [{ step: total, args: { squares: "{{ fan }}" } }]
  - step: total
    tool: { kind: python, code: "result = 0", args: { squares: "{{ args.squares }}" } }
`);
      const run = await core.deps.executions.start({ path: 'o/js' });
      const seen: string[] = [];
      const handle = core.broker.consume(async (m) => {
        let c;
        try {
          c = await core.deps.executions.claim(m.data.queue_id, { worker_id: 'consumer' });
        } catch {
          return; // 409/410: acked by the loop
        }
        seen.push(`${c.step}:${c.iteration ?? '-'}`);
        m.working();
        const args = c.tool.args as JsonObject;
        const response: JsonObject = c.step === 'fan' ? { sq: (args.n as number) ** 2 } : { sum: (args.squares as JsonObject[]).reduce((t, x) => t + (x.sq as number), 0) };
        await core.deps.executions.handleEvents([{ execution_id: c.execution_id, step: c.step, name: 'call.done', queue_id: c.queue_id, worker_id: c.worker_id, lease_token: c.lease_token, payload: { response } }]);
        m.ack();
      }, { concurrency: 4 });
      const deadline = Date.now() + 20_000;
      while (!(await terminal(core, run.execution_id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      await handle.stop();
      const rec = (await core.deps.executions.get(run.execution_id))!;
      expect(rec.status).toBe('completed');
      expect(rec.result).toEqual({ sum: 204 });
      expect(seen.filter((s) => s.startsWith('fan:')).sort()).toEqual(['fan:0', 'fan:1', 'fan:2', 'fan:3', 'fan:4', 'fan:5', 'fan:6', 'fan:7']);
      expect(seen.filter((s) => s.startsWith('total:'))).toHaveLength(1);
    } finally {
      await core.stop();
      const nc = await connect({ servers: BROKER_URL });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(jsNames.stream).catch(() => {});
      await nc.close();
    }
  });

  it('createServerCore accepts the HTTP layer config shape (broker: {url, stream, subject, consumer})', async () => {
    const n = uniqueBrokerNames('CFG');
    const core = await createServerCore({ databaseUrl: tdb.url, broker: { url: BROKER_URL, ...n }, serverUrl: 'http://x', sweeper: false }, { logger: { debug() {}, info() {}, warn() {}, error() {} } });
    try {
      expect(core.broker.kind).toBe('jetstream');
      expect(core.broker.settings).toMatchObject({ stream: n.stream, subject: n.subject, consumer: n.consumer, maxDeliver: 3, ackWaitMs: 30_000, maxAgeMs: 3_600_000 });
      await core.start();
      expect(await core.broker.ping()).toBe(true);
      expect(core.deps.broker).toBe(core.broker);
    } finally {
      await core.close();
      const nc = await connect({ servers: BROKER_URL });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(n.stream).catch(() => {});
      await nc.close();
    }
  });

  it('a delayed command is published by the sweeper only when due', async () => {
    const core = await testCore(tdb.url, { serverName: 'delay' });
    try {
      await core.deps.catalog.register(chainPlaybook('o/one', 1));
      const run = await core.deps.executions.start({ path: 'o/one' });
      await drain(() => core.broker.fetch({ max: 10, expiresMs: 200 }));
      // as if the engine had issued it with a backoff
      await core.db.pool.query(`UPDATE queue SET available_at = now() + interval '1 hour', published_at = NULL WHERE execution_id = $1`, [run.execution_id]);
      expect((await core.sweeper.tick()).published).toBe(0);
      expect((await core.deps.queue.stats()).delayed).toBe(1);
      await core.db.pool.query(`UPDATE queue SET available_at = now() - interval '1 second' WHERE execution_id = $1`, [run.execution_id]);
      expect((await core.sweeper.tick()).published).toBe(1);
      expect(await drain(() => core.broker.fetch({ max: 10, expiresMs: 200 }))).toHaveLength(1);
      await core.deps.executions.cancel(run.execution_id);
    } finally {
      await core.stop();
    }
  });

  it('a retry with backoff is queued not due, refused with 425 until due, then published by the sweeper', async () => {
    const core = await testCore(tdb.url, { serverName: 'retry' });
    try {
      await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: retry, path: o/retry }
workflow:
  - step: call
    tool: { kind: http, method: GET, endpoint: "http://127.0.0.1:9/x" }
    case:
      - when: "{{ error.status in [503] }}"
        then:
          retry: { max_attempts: 3, initial_delay: 1, backoff_multiplier: 2 }
`);
      const run = await core.deps.executions.start({ path: 'o/retry' });
      const [m] = await core.broker.fetch({ max: 1, expiresMs: 2000 });
      m.ack();
      const c1 = await core.deps.executions.claim(m.data.queue_id, { worker_id: 'w' });
      expect(c1.attempt).toBe(1);
      const ack = await core.deps.executions.handleEvents([{ execution_id: c1.execution_id, step: c1.step, name: 'call.done', queue_id: c1.queue_id, worker_id: c1.worker_id, lease_token: c1.lease_token, payload: { error: { status: 503, message: 'unavailable' } } }]);
      expect(ack.commands).toBe(1);
      const { rows: [row] } = await core.db.pool.query(`SELECT * FROM queue WHERE execution_id = $1 AND status = 'queued'`, [run.execution_id]);
      expect(row.published_at).toBeNull(); // not due: not published at commit
      expect(new Date(row.available_at).getTime()).toBeGreaterThan(Date.now() + 300);
      expect(await core.broker.fetch({ max: 1, expiresMs: 200 })).toEqual([]);
      expect((await core.deps.queue.stats()).delayed).toBe(1);
      await expect(core.deps.executions.claim(row.queue_id, { worker_id: 'w' })).rejects.toMatchObject({ statusCode: 425, code: 'not_due' });
      expect((await core.sweeper.tick()).published).toBe(0);
      await new Promise((r) => setTimeout(r, Math.max(0, new Date(row.available_at).getTime() - Date.now() + 100)));
      expect((await core.sweeper.tick()).published).toBe(1);
      const [m2] = await core.broker.fetch({ max: 1, expiresMs: 2000 });
      expect(m2.data.queue_id).toBe(row.queue_id);
      m2.ack();
      const c2 = await core.deps.executions.claim(row.queue_id, { worker_id: 'w' });
      expect(c2.attempt).toBe(2);
      await core.deps.executions.handleEvents([{ execution_id: c2.execution_id, step: c2.step, name: 'call.done', queue_id: c2.queue_id, worker_id: c2.worker_id, lease_token: c2.lease_token, payload: { response: { ok: 1 } } }]);
      expect((await core.deps.executions.get(run.execution_id))?.status).toBe('completed');
    } finally {
      await core.stop();
    }
  });

  it('a queued row whose notification is stale (lost, or dropped after max deliveries) is republished', async () => {
    const core = await testCore(tdb.url, { serverName: 'stale', republishAfterMs: 60_000 });
    try {
      await core.deps.catalog.register(chainPlaybook('o/one', 1));
      const run = await core.deps.executions.start({ path: 'o/one' });
      // while a notification still waits in the broker, stale rows are not republished (a backlog
      // must not multiply its own notifications)
      await core.db.pool.query(`UPDATE queue SET published_at = now() - interval '2 minutes' WHERE execution_id = $1`, [run.execution_id]);
      expect(await core.broker.outstanding()).toBe(1);
      expect((await core.sweeper.tick()).published).toBe(0);
      await core.db.pool.query(`UPDATE queue SET published_at = now() WHERE execution_id = $1`, [run.execution_id]);
      const first = await drain(() => core.broker.fetch({ max: 10, expiresMs: 200 })); // consumed, never claimed
      expect(await core.broker.outstanding()).toBe(0);
      expect(first).toHaveLength(1);
      expect((await core.sweeper.tick()).published).toBe(0); // recent: left alone
      await core.db.pool.query(`UPDATE queue SET published_at = now() - interval '2 minutes' WHERE execution_id = $1`, [run.execution_id]);
      expect((await core.sweeper.tick()).published).toBe(1);
      expect(await drain(() => core.broker.fetch({ max: 10, expiresMs: 200 }))).toEqual(first);
      await core.deps.executions.cancel(run.execution_id);
    } finally {
      await core.stop();
    }
  });

  it('replicas sweeping at the same time publish each row once', async () => {
    const broker = new MemoryBroker();
    const a = await testCore(tdb.url, { brokerInstance: broker, serverName: 'sa' });
    const b = await testCore(tdb.url, { brokerInstance: broker, serverName: 'sb' });
    try {
      await a.deps.catalog.register(chainPlaybook('o/one', 1));
      // 20 executions whose first notification was lost
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push((await a.deps.executions.start({ path: 'o/one' })).execution_id);
      await drain(() => broker.fetch({ max: 50, expiresMs: 200 }));
      await a.db.pool.query(`UPDATE queue SET published_at = NULL WHERE execution_id = ANY($1::bigint[])`, [ids]);
      const [ra, rb] = await Promise.all([a.sweeper.tick(), b.sweeper.tick()]);
      expect(ra.published + rb.published).toBe(20);
      const published = await drain(() => broker.fetch({ max: 50, expiresMs: 200 }));
      expect(published).toHaveLength(20);
      expect(new Set(published).size).toBe(20);
      for (const id of ids) await a.deps.executions.cancel(id);
    } finally {
      await a.stop();
      await b.stop();
      await broker.close();
    }
  });

  it('recording a publish skips a row another transaction holds instead of waiting for it (no deadlock with group commits)', async () => {
    const broker = new MemoryBroker();
    const core = await testCore(tdb.url, { brokerInstance: broker, serverName: 'mark' });
    const holder = await core.db.pool.connect();
    try {
      await core.deps.catalog.register(chainPlaybook('o/mark', 1));
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) ids.push((await core.deps.executions.start({ path: 'o/mark' })).execution_id);
      await drain(() => broker.fetch({ max: 10, expiresMs: 200 }));
      const { rows } = await core.db.pool.query<{ queue_id: string }>(
        'SELECT queue_id FROM queue WHERE execution_id = ANY($1::bigint[]) ORDER BY queue_id', [ids]);
      const [held, free] = rows.map((r) => r.queue_id);
      await core.db.pool.query('UPDATE queue SET published_at = NULL WHERE queue_id = ANY($1::bigint[])', [[held, free]]);
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM queue WHERE queue_id = $1 FOR UPDATE', [held]);
      // resolves while the lock is held (a wait would hang here: the holder commits only after)
      await core.outbox.publish([held, free].map((queue_id, i) => ({ queue_id, execution_id: ids[i], step: 's1', pool: 'default' })));
      await holder.query('COMMIT');
      const marked = await core.db.pool.query<{ queue_id: string; published: boolean }>(
        'SELECT queue_id, published_at IS NOT NULL AS published FROM queue WHERE queue_id = ANY($1::bigint[]) ORDER BY queue_id', [[held, free]]);
      expect(marked.rows).toEqual([{ queue_id: held, published: false }, { queue_id: free, published: true }]);
      for (const id of ids) await core.deps.executions.cancel(id);
    } finally {
      holder.release();
      await core.stop();
      await broker.close();
    }
  });

  it('the sweeper loop runs by itself and heartbeats the server runtime row', async () => {
    let taskRuns = 0;
    const core = await testCore(tdb.url, {
      serverName: 'looping', sweeper: true, sweeperIntervalMs: 50, heartbeatMs: 100,
      sweeperTasks: () => [
        { name: 'failing', intervalMs: 0, run: async () => { throw new Error('task failed'); } },
        { name: 'counting', intervalMs: 0, run: async () => { taskRuns++; } },
      ],
    });
    try {
      await core.deps.catalog.register(chainPlaybook('o/one', 1));
      const { rows: [before] } = await core.db.pool.query(`SELECT last_heartbeat FROM runtime WHERE kind = 'server' AND name = 'looping'`);
      const run = await core.deps.executions.start({ path: 'o/one' });
      await drain(() => core.broker.fetch({ max: 10, expiresMs: 200 }));
      await core.db.pool.query(`UPDATE queue SET published_at = NULL WHERE execution_id = $1`, [run.execution_id]);
      const [m] = await core.broker.fetch({ max: 1, expiresMs: 3000 }); // published by the loop
      expect(m.data.execution_id).toBe(run.execution_id);
      m.ack();
      const { rows: [after] } = await core.db.pool.query(`SELECT last_heartbeat FROM runtime WHERE kind = 'server' AND name = 'looping'`);
      expect(new Date(after.last_heartbeat).getTime()).toBeGreaterThanOrEqual(new Date(before.last_heartbeat).getTime());
      // the loop beats again by itself (register() set the value read before; a beat every 100 ms here)
      const beat = async () => (await core.db.pool.query(`SELECT last_heartbeat FROM runtime WHERE kind = 'server' AND name = 'looping'`)).rows[0].last_heartbeat;
      await expect.poll(async () => new Date(await beat()).getTime(), { timeout: 5000, interval: 50 }).toBeGreaterThan(new Date(before.last_heartbeat).getTime());
      expect(taskRuns).toBeGreaterThan(0); // extra tasks run, a failing one does not stop the others
      await core.deps.executions.cancel(run.execution_id);
    } finally {
      await core.stop();
    }
  });
});
