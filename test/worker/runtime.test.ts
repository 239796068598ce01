/**
 * End to end: the real server core (PostgreSQL, in-process broker) and HTTP app on a random port,
 * the real client, and this worker runtime consuming the same broker (as in `playflow dev`).
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, PlayflowClient } from '../../client/http.js';
import type { ClaimedCommand, ExecutionView } from '../../common/protocol.js';
import { buildApp } from '../../server/app/index.js';
import { MemoryBroker } from '../../common/broker/memory.js';
import { createServerCore, type ServerCore } from '../../server/core.js';
import { createSecretsServices } from '../../server/secrets/index.js';
import { SecretsClient } from '../../client/secrets.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { WorkerRuntime, type WorkerClient } from '../../worker/runtime.js';
import { RawJson } from '../../common/raw-json.js';
import { RAW_RESULT_MIN_CHARS } from '../../worker/python/pool.js';
import { json, startHttpServer, type LocalServer } from '../../worker/testing/helpers.js';

let tdb: TestDatabase;
let core: ServerCore;
let app: FastifyInstance;
let base: string;
let api: LocalServer;
let slowHits = 0;
let napHits = 0;
const GATE = 4;
const gate: Array<() => void> = [];
let tokenCalls = 0;

/** The real client, recording what the worker claimed and which claims were refused. */
function recordingClient(c: PlayflowClient) {
  const claimed: ClaimedCommand[] = [];
  const refused: Array<{ queue_id: string; status: number }> = [];
  const client: WorkerClient = {
    claim: async (q, r) => {
      try {
        const cmd = await c.claim(q, r);
        claimed.push(cmd);
        return cmd;
      } catch (err) {
        if (err instanceof ApiError) refused.push({ queue_id: String(q), status: err.status });
        throw err;
      }
    },
    heartbeat: (q, r) => c.heartbeat(q, r),
    sendEvents: (e) => c.sendEvents(e),
    run: (r) => c.run(r),
    registerRuntime: (r) => c.registerRuntime(r),
    runtimeHeartbeat: (k, n) => c.runtimeHeartbeat(k, n),
    request: (m, p, o) => c.request(m, p, o),
  };
  return { client, claimed, refused };
}

async function waitFor<T>(fn: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('timed out waiting');
}

const terminal = (c: PlayflowClient, id: string) =>
  waitFor(async () => {
    const e = await c.getExecution(id);
    return ['completed', 'failed', 'cancelled'].includes(e.status) ? e : undefined;
  });

/** A client whose first claim the server commits but whose answer never reaches the worker (a dropped connection). */
function losingFirstClaim(c: PlayflowClient, releaseLease: WorkerClient['releaseLease'] = (q, r) => c.releaseLease(q, r)) {
  const rec = recordingClient(c);
  const lost: { queueId?: string } = {};
  const client: WorkerClient = {
    ...rec.client,
    claim: async (q, r) => {
      const cmd = await rec.client.claim(q, r);
      if (lost.queueId === undefined) {
        lost.queueId = String(q);
        throw new ApiError(0, 'unreachable', 'socket hang up');
      }
      return cmd;
    },
    releaseLease,
  };
  return { client, rec, lost };
}

beforeAll(async () => {
  api = await startHttpServer((req, res) => {
    if (req.url.startsWith('/square/')) return json(res, 200, { value: Number(req.url.split('/')[2]) });
    if (req.url === '/slow') { slowHits++; setTimeout(() => json(res, 200, { slow: true }), 600); return; }
    if (req.url === '/nap') { napHits++; setTimeout(() => json(res, 200, { napped: true }), 2500); return; }
    if (req.url === '/broken') return json(res, 500, { oops: true });
    if (req.url.startsWith('/gate/')) {
      // answers in groups of GATE: the calls of a group finish together
      gate.push(() => json(res, 200, { i: Number(req.url.split('/')[2]) }));
      if (gate.length >= GATE) for (const open of gate.splice(0)) open();
      return;
    }
    if (req.url === '/token') { tokenCalls++; return json(res, 200, { access_token: 'tok-123', token_type: 'bearer', expires_in: 3600 }); }
    if (req.url === '/whoami') return json(res, 200, { authorization: req.headers.authorization ?? null });
    json(res, 404, {});
  });
  tdb = await createTestDatabase('pfwrt');
  core = await createServerCore({ databaseUrl: tdb.url, brokerUrl: 'memory', serverUrl: 'http://127.0.0.1', sweeper: false, poolSize: 5 });
  const secrets = createSecretsServices(core.db, { dev: true });
  app = await buildApp({ ...core.deps, ...secrets.deps });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  await core.start();
  const reg = (yaml: string) => core.deps.catalog.register(yaml);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: chain, path: w/chain }
workload: { n: 4, api: "${api.url}" }
workflow:
  - step: start
    tool:
      kind: python
      code: |
        def main(n):
            print("squaring", n)
            return {"sq": n * n}
      args: { n: "{{ workload.n }}" }
    next: fetch
  - step: fetch
    tool: { kind: http, method: GET, endpoint: "{{ workload.api }}/square/{{ start.sq }}" }
    next: task
  - step: task
    tool: { kind: workbook, name: plus_one, args: { v: "{{ fetch.value }}" } }
workbook:
  - name: plus_one
    tool: { kind: python, code: "def main(v):\\n    return v + 1" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: together, path: w/together }
workflow:
  - step: start
    loop: { in: "{{ range(8) | list }}", iterator: i, mode: async, max_in_flight: ${GATE} }
    tool: { kind: http, endpoint: "${api.url}/gate/{{ i }}" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: slow, path: w/slow }
workflow:
  - step: start
    tool: { kind: http, endpoint: "${api.url}/slow" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: nap, path: w/nap }
workflow:
  - step: start
    tool: { kind: http, endpoint: "${api.url}/nap" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: slow_then_nap, path: w/slow_then_nap }
workflow:
  - step: first
    tool: { kind: http, endpoint: "${api.url}/slow" }
    next: second
  - step: second
    tool: { kind: http, endpoint: "${api.url}/nap" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: broken, path: w/broken }
workflow:
  - step: start
    tool: { kind: http, endpoint: "${api.url}/broken" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: child, path: w/child }
workflow:
  - step: hello
    tool: { kind: python, code: "def main(name):\\n    return {'message': 'hello ' + name}", args: { name: "{{ payload.name }}" } }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: parent, path: w/parent }
workflow:
  - step: start
    loop: { in: [Ada, Grace], iterator: who }
    tool: { kind: playbook, path: w/child, args: { name: "{{ who }}" } }
    next: after
  - step: after
    tool: { kind: python, code: "def main(got):\\n    return len(got)", args: { got: "{{ start }}" } }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: secrets, path: w/secrets }
workload: { pg: pg_e2e }
keychain:
  - name: api_token
    kind: oauth2
    scope: global
    endpoint: "${api.url}/token"
    data: { grant_type: client_credentials }
workflow:
  - step: query
    tool: { kind: postgres, auth: "{{ workload.pg }}", command: "SELECT current_database() AS db, $1::int + 1 AS n", args: { v: 41 } }
    next: call
  - step: call
    tool:
      kind: http
      endpoint: "${api.url}/whoami"
      headers: { Authorization: "Bearer {{ keychain.api_token.access_token }}" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: secret_tool, path: w/secret_tool }
workflow:
  - step: fetch_secret
    tool: { kind: secret, provider: env, name: PF_WORKER_E2E_SECRET, keychain: api_key }
    next: use
  - step: use
    tool: { kind: http, endpoint: "${api.url}/whoami", headers: { Authorization: "Key {{ keychain.api_key.value }}" } }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: nokey, path: w/nokey }
keychain:
  - name: gone
    kind: oauth2
    scope: local
    endpoint: "${api.url}/broken"
workflow:
  - step: call
    tool: { kind: http, endpoint: "${api.url}/whoami", headers: { Authorization: "Bearer {{ keychain.gone.access_token }}" } }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: huge, path: w/huge }
workflow:
  - step: start
    tool: { kind: python, code: "result = 'x' * 11000000" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: big, path: w/big }
workflow:
  - step: start
    tool: { kind: python, code: "result = [{'id': i, 'name': 'row %d' % i} for i in range(60000)]" }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: orphan, path: w/orphan }
workflow:
  - step: start
    tool: { kind: playbook, path: w/does-not-exist, args: { a: 1 } }
`);
  await reg(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: sleepy, path: w/sleepy }
workflow:
  - step: start
    tool: { kind: python, code: "import time\\ndef main():\\n    time.sleep(1.5)\\n    return 'slept'" }
`);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await core?.stop();
  await api?.close();
  await tdb?.drop();
});

describe('worker runtime against the real server', () => {
  it('runs a playbook end to end (python → http → workbook), reports call.done with meta, serves /healthz and /metrics', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rec = recordingClient(c);
    const rt = new WorkerRuntime({ broker: core.broker, client: rec.client, workerId: 'w-e2e', concurrency: 4, python: { size: 1 }, metricsPort: 0, metricsHost: '127.0.0.1', heartbeatSeconds: 0.2 });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/chain', payload: {} });
      const done = (await terminal(c, run.execution_id)) as ExecutionView;
      expect(done.status).toBe('completed');
      expect(done.steps.task.result).toBe(17);
      const events = (await c.getEvents(run.execution_id)).events;
      const calls = events.filter((e) => e.name === 'call.done');
      expect(calls.map((e) => e.step)).toEqual(['start', 'fetch', 'task']);
      const first = calls[0].payload as any;
      expect(first.response).toEqual({ sq: 16 });
      expect(first.meta).toMatchObject({ attempt: 1, worker_id: 'w-e2e', log: 'squaring 4\n' });
      expect(typeof first.meta.duration_ms).toBe('number');
      expect((calls[1].payload as any).response).toMatchObject({ status: 200, data: { value: 16 } });

      const health = await fetch(`http://127.0.0.1:${rt.metricsPort}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'ok', worker_id: 'w-e2e' });
      const metrics = await (await fetch(`http://127.0.0.1:${rt.metricsPort}/metrics`)).text();
      expect(metrics).toMatch(/playflow_worker_calls_total\{kind="python",outcome="ok"\} 1/);
      expect(metrics).toMatch(/playflow_worker_calls_total\{kind="workbook",outcome="ok"\} 1/);
      expect(metrics).toMatch(/playflow_worker_calls_total\{kind="http",outcome="ok"\} 1/);
      expect(metrics).toMatch(/playflow_worker_claims_total\{result="claimed"\} 3/);
      const runtime = await c.listRuntime();
      expect(JSON.stringify(runtime)).toContain('w-e2e');
    } finally {
      await rt.stop();
    }
  });

  it('runs the command a call.done hands back in the same slot (eager dispatch), or claims each one when off', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const claimsOf = async (rt: WorkerRuntime) => {
      const text = await (await fetch(`http://127.0.0.1:${rt.metricsPort}/metrics`)).text();
      const count = (result: string) => Number(text.match(new RegExp(`playflow_worker_claims_total\\{result="${result}"\\} (\\d+)`))?.[1] ?? 0);
      return { claimed: count('claimed'), eager: count('eager') };
    };
    for (const eagerDispatch of [true, false]) {
      const sent: boolean[] = [];
      const client: WorkerClient = {
        claim: (q, r) => c.claim(q, r),
        heartbeat: (q, r) => c.heartbeat(q, r),
        sendEvents: (e, o) => {
          sent.push(Boolean(o?.claimNext));
          return c.sendEvents(e, o);
        },
        run: (r) => c.run(r),
        request: (m, p, o) => c.request(m, p, o),
      };
      const rt = new WorkerRuntime({ broker: core.broker, client, workerId: `w-eager-${eagerDispatch}`, concurrency: 2, python: { size: 1 }, metricsPort: 0, metricsHost: '127.0.0.1', eagerDispatch });
      await rt.start();
      try {
        const run = await c.run({ path: 'w/chain', payload: {} });
        const done = (await terminal(c, run.execution_id)) as ExecutionView;
        expect(done.status).toBe('completed');
        expect(done.steps.task.result).toBe(17);
        // python → http → workbook: one claim and two hand-overs, or three claims
        expect(await claimsOf(rt)).toEqual(eagerDispatch ? { claimed: 1, eager: 2 } : { claimed: 3, eager: 0 });
        expect(sent).toEqual([eagerDispatch, eagerDispatch, eagerDispatch]);
        const started = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'action_started');
        expect(started.map((e) => (e.payload as any).worker_id)).toEqual(Array(3).fill(`w-eager-${eagerDispatch}`));
      } finally {
        await rt.stop();
      }
    }
  });

  it('call.done reports that finish together go in one request, each with its own outcome and next item', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const requests: Array<{ events: number; independent: boolean }> = [];
    const client: WorkerClient = {
      claim: (q, r) => c.claim(q, r),
      heartbeat: (q, r) => c.heartbeat(q, r),
      sendEvents: (e, o) => {
        requests.push({ events: Array.isArray(e) ? e.length : 1, independent: Boolean(o?.independent) });
        return c.sendEvents(e, o);
      },
      run: (r) => c.run(r),
      request: (m, p, o) => c.request(m, p, o),
    };
    const rt = new WorkerRuntime({ broker: core.broker, client, workerId: 'w-together', concurrency: GATE, python: { size: 1 }, metricsPort: 0, metricsHost: '127.0.0.1' });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/together', payload: {} });
      const done = (await terminal(c, run.execution_id)) as ExecutionView;
      expect(done.status).toBe('completed');
      expect((done.steps.start.result as Array<{ data: { i: number } }>).map((r) => r.data.i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      // four calls finish at once: two go out, the other two wait for one of them and go together
      const batched = requests.filter((r) => r.events > 1);
      expect(batched.length).toBeGreaterThan(0);
      expect(batched.every((r) => r.independent)).toBe(true);
      expect(requests.reduce((n, r) => n + r.events, 0)).toBe(8); // each call reported once
      expect(requests.length).toBeLessThan(8);
      const text = await (await fetch(`http://127.0.0.1:${rt.metricsPort}/metrics`)).text();
      expect(text).toMatch(new RegExp(`playflow_worker_report_requests_total\\{reports="several"\\} ${batched.length}`));
      expect(text).toMatch(/playflow_worker_reports_total 8/);
      const events = (await c.getEvents(run.execution_id, { limit: 500 })).events;
      expect(events.filter((e) => e.name === 'call.done')).toHaveLength(8);
      const started = events.filter((e) => e.name === 'action_started');
      expect(started).toHaveLength(8);
      expect(started.every((e) => (e.payload as { worker_id?: string }).worker_id === 'w-together')).toBe(true);
    } finally {
      await rt.stop();
    }
  });

  it('a lease heartbeat that failed is tried again before the next interval', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    // each attempt: when it went out and when it came back; the first one fails as a 503 would
    const beats: Array<{ sent: number; back: number; ok: boolean }> = [];
    const client: WorkerClient = {
      ...recordingClient(c).client,
      heartbeat: async (q, r) => {
        const sent = performance.now();
        const fail = beats.length === 0;
        const answer = fail ? Promise.reject(new ApiError(503, 'db_unavailable', 'the database connection was lost or refused')) : c.heartbeat(q, r);
        try {
          return await answer;
        } finally {
          beats.push({ sent, back: performance.now(), ok: !fail });
        }
      },
    };
    const rt = new WorkerRuntime({ broker: core.broker, client, workerId: 'w-beat', concurrency: 1, python: false, heartbeatSeconds: 1 });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/nap', payload: {} });
      expect((await terminal(c, run.execution_id)).status).toBe('completed');
      // the beat 1 s into the 2.5 s call fails; the next goes a quarter interval later, not a whole one
      expect(beats.length).toBeGreaterThanOrEqual(2);
      expect(beats[0].ok).toBe(false);
      expect(beats[1].ok).toBe(true);
      expect(beats[1].sent - beats[0].back).toBeLessThan(800);
    } finally {
      await rt.stop();
    }
  });

  it('a late heartbeat answer about the command a slot finished does not abort the next one it was handed', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    // The first command's beat is answered only after its call.done went through: 410, as the
    // server answers a beat of a finished command. The slot runs the second command by then.
    let firstQueue: string | undefined;
    let firstReported!: () => void;
    const reported = new Promise<void>((r) => (firstReported = r));
    const lateAnswers: number[] = [];
    const client: WorkerClient = {
      ...recordingClient(c).client,
      claim: async (q, r) => {
        const cmd = await c.claim(q, r);
        firstQueue ??= String(cmd.queue_id);
        return cmd;
      },
      heartbeat: async (q, r) => {
        if (String(q) !== firstQueue) return c.heartbeat(q, r);
        await reported;
        await new Promise((res) => setTimeout(res, 300)); // the second command is running
        try {
          return await c.heartbeat(q, r);
        } catch (err) {
          if (err instanceof ApiError) lateAnswers.push(err.status);
          throw err;
        }
      },
      sendEvents: async (e, o) => {
        const ack = await c.sendEvents(e, o);
        if ((Array.isArray(e) ? e : [e]).some((ev) => String(ev.queue_id) === firstQueue)) firstReported();
        return ack;
      },
    };
    const rt = new WorkerRuntime({ broker: core.broker, client, workerId: 'w-late-beat', concurrency: 1, python: false, heartbeatSeconds: 0.2 });
    await rt.start();
    try {
      const before = napHits;
      const run = await c.run({ path: 'w/slow_then_nap', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status).toBe('completed');
      const events = (await c.getEvents(run.execution_id)).events;
      // the second step was handed over with the first one's call.done and ran once, to the end
      expect(events.filter((e) => e.name === 'action_started').map((e) => [e.step, (e.payload as { delivery: number }).delivery]))
        .toEqual([['first', 1], ['second', 1]]);
      expect(napHits - before).toBe(1);
      // the case happened: a beat of the first command was answered 410 while the second ran
      await waitFor(async () => lateAnswers.length > 0);
      expect(lateAnswers.every((s) => s === 410)).toBe(true);
    } finally {
      await rt.stop();
    }
  });

  it('a duplicate notification never runs a command twice (409 while running, 410 after)', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rec = recordingClient(c);
    const rt = new WorkerRuntime({ broker: core.broker, client: rec.client, workerId: 'w-dup', concurrency: 4, python: false });
    await rt.start();
    try {
      const before = slowHits;
      const run = await c.run({ path: 'w/slow', payload: {} });
      const cmd = await waitFor(async () => rec.claimed.find((x) => x.execution_id === run.execution_id));
      const note = { execution_id: cmd.execution_id, queue_id: cmd.queue_id, step: cmd.step, server_url: base };
      await core.broker.publish(note); // while the call runs: 409
      await core.broker.publish(note);
      const done = await terminal(c, run.execution_id);
      expect(done.status).toBe('completed');
      await core.broker.publish(note); // after it finished: 410
      await waitFor(async () => rec.refused.filter((r) => r.queue_id === cmd.queue_id).length >= 3);
      expect(slowHits - before).toBe(1);
      const statuses = rec.refused.filter((r) => r.queue_id === cmd.queue_id).map((r) => r.status).sort();
      expect(statuses).toEqual([409, 409, 410]);
      const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
      expect(calls).toHaveLength(1);
    } finally {
      await rt.stop();
    }
  });

  it('a claim whose answer was lost after the server leased the command: the worker ends that lease, and the command runs once, now', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const { client, lost } = losingFirstClaim(c);
    // a lease far longer than the test, and no sweeper: only a release can free the command
    const rt = new WorkerRuntime({ broker: core.broker, client, workerId: 'w-lost', concurrency: 2, leaseSeconds: 300, python: false });
    await rt.start();
    try {
      const before = napHits;
      const run = await c.run({ path: 'w/nap', payload: {} });
      expect((await terminal(c, run.execution_id)).status).toBe('completed');
      expect(lost.queueId).toBeDefined();
      expect(napHits - before).toBe(1);
      const released = (await rt.metrics.leaseReleases.get()).values.find((v) => v.labels.outcome === 'released');
      expect(released?.value).toBe(1);
      const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
      expect(calls).toHaveLength(1);
    } finally {
      await rt.stop();
    }
  });

  it('a redelivery answered 409 naming this worker, while no slot here claims or runs the command, ends that lease too', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    let releases = 0;
    // the first release is refused outright: only the 409 of the notification's redelivery tells the worker again
    const { client, rec, lost } = losingFirstClaim(c, async (q, r) => {
      if (releases++ === 0) throw new ApiError(400, 'bad_request', 'refused once for the test');
      return c.releaseLease(q, r);
    });
    const rt = new WorkerRuntime({ broker: core.broker, client, workerId: 'w-lost-409', concurrency: 2, leaseSeconds: 300, python: false });
    await rt.start();
    try {
      const before = napHits;
      const run = await c.run({ path: 'w/nap', payload: {} });
      expect((await terminal(c, run.execution_id)).status).toBe('completed');
      expect(rec.refused).toContainEqual({ queue_id: lost.queueId, status: 409 });
      expect(napHits - before).toBe(1);
      const outcomes = Object.fromEntries((await rt.metrics.leaseReleases.get()).values.map((v) => [v.labels.outcome, v.value]));
      expect(outcomes).toEqual({ failed: 1, released: 1 });
    } finally {
      await rt.stop();
    }
  });

  it('a call.done whose answer (the next command) was lost is resent as such, and that command runs once, now', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const sent: Array<{ steps: string[]; resent: boolean }> = [];
    let lost: ClaimedCommand[] | undefined;
    const client: WorkerClient = {
      ...recordingClient(c).client,
      // the server takes the first report and hands over the next step; the answer never arrives
      sendEvents: async (e, o) => {
        sent.push({ steps: (Array.isArray(e) ? e : [e]).map((x) => String(x.step)), resent: o?.claimNext?.resent === true });
        const ack = await c.sendEvents(e, o);
        if (lost === undefined) {
          lost = ack.claimed ?? [];
          throw new ApiError(0, 'unreachable', 'socket hang up');
        }
        return ack;
      },
      releaseLease: (q, r) => c.releaseLease(q, r),
    };
    const rt = new WorkerRuntime({ broker: core.broker, client, workerId: 'w-lost-answer', concurrency: 2, leaseSeconds: 300, python: { size: 1 } });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/chain', payload: {} });
      const done = (await terminal(c, run.execution_id)) as ExecutionView;
      expect(done.steps.task.result).toBe(17);
      expect(lost?.map((x) => x.step)).toEqual(['fetch']);
      expect(sent.slice(0, 2)).toEqual([{ steps: ['start'], resent: false }, { steps: ['start'], resent: true }]);
      const events = (await c.getEvents(run.execution_id)).events;
      // fetch: leased with the lost answer, then queued again and claimed (its second delivery)
      // fetch: leased with the lost answer, queued again at once and claimed (its second delivery), under another token
      const calls = events.filter((e) => e.name === 'call.done');
      expect(calls.map((e) => e.step)).toEqual(['start', 'fetch', 'task']);
      const { rows } = await core.db.pool.query('SELECT attempts, lease_token FROM queue WHERE queue_id = $1', [lost![0].queue_id]);
      expect(rows[0].attempts).toBe(2);
      expect(rows[0].lease_token).not.toBe(lost![0].lease_token);
      const claims = Object.fromEntries((await rt.metrics.claims.get()).values.map((v) => [v.labels.result, v.value]));
      expect(claims).toMatchObject({ claimed: 2, eager: 1 });
    } finally {
      await rt.stop();
    }
  });

  it('a tool failure is a call.done with error (status and body) and is not redelivered', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rec = recordingClient(c);
    const rt = new WorkerRuntime({ broker: core.broker, client: rec.client, workerId: 'w-fail', python: false });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/broken', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status).toBe('failed');
      const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
      expect(calls).toHaveLength(1);
      expect((calls[0].payload as any).error).toMatchObject({ status: 500, code: 'http_error', data: { oops: true } });
      const queueId = String(rec.claimed.find((x) => x.execution_id === run.execution_id)!.queue_id);
      // Its notification was acked, never nak'ed: a nak would bring it back (after the nak delay,
      // waited out here) as a claim the server refuses with 410.
      const settled = async () => Object.fromEntries((await rt.metrics.messages.get()).values.map((v) => [v.labels.result, v.value]));
      await new Promise((r) => setTimeout(r, 2500));
      expect(await settled()).toEqual({ ack: 1 });
      expect(rec.refused.filter((x) => x.queue_id === queueId)).toEqual([]);
      expect(rec.claimed.filter((x) => x.execution_id === run.execution_id)).toHaveLength(1);
    } finally {
      await rt.stop();
    }
  });

  it('playbook tools start children through the server; the parent completes when they end', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rt = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-parent', concurrency: 4, python: { size: 1 } });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/parent', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status).toBe('completed');
      expect(done.steps.after.result).toBe(2);
      const children = (await c.listExecutions({ path: 'w/child' })).executions.filter((e) => e.parent_execution_id === run.execution_id);
      expect(children).toHaveLength(2);
      const parentCalls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done' && e.step === 'start');
      for (const e of parentCalls) expect((e.payload as any).meta?.worker_id).not.toBe('w-parent');
    } finally {
      await rt.stop();
    }
  });

  it('a child playbook the server refuses to start fails the parent step with a call.done error', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rt = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-orphan', python: false });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/orphan', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status).toBe('failed');
      const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
      expect(calls).toHaveLength(1);
      expect((calls[0].payload as any).error).toMatchObject({ status: 404, code: 'not_found' });
      expect((calls[0].payload as any).error.message).toContain('w/does-not-exist');
    } finally {
      await rt.stop();
    }
  });

  it('a large python result goes to the server as the JSON text the interpreter wrote, never parsed in the worker, and arrives whole', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const sent: unknown[] = [];
    const client: WorkerClient = { ...recordingClient(c).client, sendEvents: (e, o) => {
      for (const ev of Array.isArray(e) ? e : [e]) sent.push((ev.payload as { response?: unknown }).response);
      return c.sendEvents(e, o);
    } };
    const rt = new WorkerRuntime({ broker: core.broker, client, workerId: 'w-big', python: { size: 1 } });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/big', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status, JSON.stringify(done.error)).toBe('completed');
      expect(sent).toHaveLength(1);
      expect(sent[0]).toBeInstanceOf(RawJson);
      expect((sent[0] as RawJson).text.length).toBeGreaterThan(RAW_RESULT_MIN_CHARS);
      const rows = done.result as Array<{ id: number; name: string }>;
      expect(rows).toHaveLength(60000);
      expect(rows[59999]).toEqual({ id: 59999, name: 'row 59999' });
    } finally {
      await rt.stop();
    }
  });

  it('a result larger than the server accepts becomes a too_large error instead of a lost call', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rt = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-huge', python: { size: 1 } });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/huge', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status).toBe('failed');
      const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
      expect(calls).toHaveLength(1);
      expect((calls[0].payload as any).error.code).toBe('too_large');
    } finally {
      await rt.stop();
    }
  });

  it('resolves credentials (auth reference) and keychain references through the server; secrets stay out of events', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const u = new URL(tdb.url);
    await new SecretsClient(c).putCredential({
      name: 'pg_e2e', type: 'postgres',
      data: { db_host: u.hostname, db_port: Number(u.port || 5432), db_user: decodeURIComponent(u.username), db_password: decodeURIComponent(u.password) || 'unused-secret', db_name: tdb.name },
    });
    const rt = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-sec', python: false });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/secrets', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status, JSON.stringify(done.error)).toBe('completed');
      const events = (await c.getEvents(run.execution_id)).events;
      const calls = events.filter((e) => e.name === 'call.done');
      expect((calls[0].payload as any).response.rows).toEqual([{ db: tdb.name, n: 42 }]);
      expect((calls[1].payload as any).response.data).toEqual({ authorization: 'Bearer tok-123' });
      expect(tokenCalls).toBe(1);
      // The command the server stored and handed out kept the reference, not the token.
      const issued = JSON.stringify(events.filter((e) => e.name === 'command_issued'));
      expect(issued).toContain('keychain.api_token.access_token');
      expect(issued).not.toContain('tok-123');
    } finally {
      await rt.stop();
    }
  });

  it('the secret tool stores into the keychain through the worker\'s client; a later step reads it', async () => {
    process.env.PF_WORKER_E2E_SECRET = 'env-secret-42';
    const c = new PlayflowClient({ baseUrl: base });
    const rt = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-secret', python: false });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/secret_tool', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status, JSON.stringify(done.error)).toBe('completed');
      const events = (await c.getEvents(run.execution_id)).events;
      const calls = events.filter((e) => e.name === 'call.done');
      expect((calls[0].payload as any).response).toMatchObject({ status: 'stored', keychain_name: 'api_key', fields: ['value'] });
      expect(JSON.stringify(calls[0])).not.toContain('env-secret-42');
      expect((calls[1].payload as any).response.data).toEqual({ authorization: 'Key env-secret-42' });
    } finally {
      delete process.env.PF_WORKER_E2E_SECRET;
      await rt.stop();
    }
  });

  it('a keychain failure is the call\'s error (call.done), not a redelivery', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rec = recordingClient(c);
    const rt = new WorkerRuntime({ broker: core.broker, client: rec.client, workerId: 'w-nokey', python: false });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/nokey', payload: {} });
      const done = await terminal(c, run.execution_id);
      expect(done.status).toBe('failed');
      const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
      expect(calls).toHaveLength(1);
      expect((calls[0].payload as any).error.message).toMatch(/KEYCHAIN|gone/);
      const queueId = String(rec.claimed.find((x) => x.execution_id === run.execution_id)!.queue_id);
      // Acked, never nak'ed: a nak would bring the notification back (after the nak delay, waited
      // out here) as a claim the server refuses with 410, which `claimed` alone would not show.
      const settled = async () => Object.fromEntries((await rt.metrics.messages.get()).values.map((v) => [v.labels.result, v.value]));
      await new Promise((r) => setTimeout(r, 2500));
      expect(await settled()).toEqual({ ack: 1 });
      expect(rec.refused.filter((x) => x.queue_id === queueId)).toEqual([]);
      expect(rec.claimed.filter((x) => x.execution_id === run.execution_id)).toHaveLength(1);
    } finally {
      await rt.stop();
    }
  });

  it('SIGTERM-style stop lets a call in flight finish within the grace period', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rec = recordingClient(c);
    const rt = new WorkerRuntime({ broker: core.broker, client: rec.client, workerId: 'w-grace', python: { size: 1 }, graceSeconds: 10 });
    await rt.start();
    const run = await c.run({ path: 'w/sleepy', payload: {} });
    await waitFor(async () => rec.claimed.find((x) => x.execution_id === run.execution_id));
    await rt.stop();
    const done = await terminal(c, run.execution_id);
    expect(done.status).toBe('completed');
    expect(done.steps.start.result).toBe('slept');
  });

  it('past the grace period the call is aborted, nothing is reported and the message is nak\'ed', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const rec = recordingClient(c);
    const broker = new MemoryBroker({ ackWaitMs: 60_000 });
    const rt = new WorkerRuntime({ broker, client: rec.client, workerId: 'w-abort', python: { size: 1 }, graceSeconds: 0.2 });
    await rt.start();
    // Route this execution's notification to the private broker: take it off the core's.
    const run = await c.run({ path: 'w/sleepy', payload: {} });
    const [msg] = await waitFor(async () => {
      const m = await core.broker.fetch({ max: 1, expiresMs: 200 });
      return m.length ? m : undefined;
    });
    msg.ack();
    await broker.publish(msg.data);
    await waitFor(async () => rec.claimed.find((x) => x.execution_id === run.execution_id));
    const t0 = Date.now();
    await rt.stop();
    expect(Date.now() - t0).toBeLessThan(3000);
    const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
    expect(calls).toHaveLength(0);
    const again = await broker.fetch({ max: 1, expiresMs: 4000 });
    expect(again).toHaveLength(1);
    expect(again[0].info.deliveryCount).toBe(2);
    again[0].term();
    await broker.close();
  });
});

describe('worker-side faults', () => {
  it('server unreachable: the worker stops taking notifications instead of spending their deliveries, and resumes when it answers', async () => {
    const dead = new PlayflowClient({ baseUrl: 'http://127.0.0.1:1', timeoutMs: 1000 });
    let up = false;
    const attempts: number[] = [];
    const gone = () => { throw new ApiError(410, 'finished', 'queue entry 1 is done'); };
    const client: WorkerClient = {
      claim: async (q, r) => {
        attempts.push(Date.now());
        return up ? gone() : dead.claim(q, r);
      },
      heartbeat: (q, r) => dead.heartbeat(q, r),
      sendEvents: (e) => dead.sendEvents(e),
      run: (r) => dead.run(r),
      request: async (m, p, o) => (up ? ({ status: 'ok' } as never) : dead.request(m, p, o)),
    };
    const broker = new MemoryBroker({ maxDeliver: 3 });
    const rt = new WorkerRuntime({ broker, client, workerId: 'w-dead', python: false });
    await rt.start();
    try {
      await broker.publish({ execution_id: '1', queue_id: '1', step: 's', server_url: 'http://127.0.0.1:1' });
      await waitFor(async () => attempts.length >= 1, 15_000);
      // cut off for 8 s: before, the 3 deliveries were spent within about 3 s
      await new Promise((r) => setTimeout(r, 8000));
      expect(attempts).toHaveLength(1);
      expect((await rt.metrics.serverDown.get()).values[0].value).toBe(1);
      up = true;
      // the server answers again: the worker takes the notification (its second delivery) again
      await waitFor(async () => attempts.length >= 2, 15_000);
      expect((await rt.metrics.serverDown.get()).values[0].value).toBe(0);
    } finally {
      await rt.stop();
      await broker.close();
    }
  });
});
