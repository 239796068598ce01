/**
 * Waiting without polling, for real: the server (in process) on a fresh PostgreSQL database and
 * JetStream, a worker process, and a second server instance on the same database.
 *
 * - POST /api/run/playbook?wait= answers a short chain's result in one request; GET ?wait= on a
 *   running execution answers the running state once the wait is up; bad waits are 400 naming it.
 * - A wait on server B for an execution run through server A ends when it completes, woken by the
 *   NOTIFY of A's commit (B's notification counter moves; no polling exists to wake it otherwise).
 * - A client that disconnects during a wait leaves no waiter behind (internal count and gauge).
 * - The LISTEN session terminated by the database is re-established and a wait still ends.
 * - The CLI's `run --wait` and `execution status --watch` answer through the long poll.
 * - A server that stops answers its waits at once instead of holding the shutdown for them.
 *
 * Steps that must stay running call a local HTTP "gate" that answers only when the test opens it,
 * so nothing depends on how fast the loaded machine is.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startHarness, type Harness } from '../conformance/harness.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createLogger } from '../../common/logger.js';
import type { ServerCore } from '../../server/core.js';
import type { Ended } from '../../server/executions/waiters.js';
import { notifyEndedSql } from '../../server/store/executions.js';
import { recordQueries } from '../helpers/pg.js';
import { freePort } from '../../cli/dev/embedded-db.js';

let h: Harness;
let b: RunningServer;
let urlB: string;
let gate: Server;
let gateUrl: string;
/** Requests held by the gate, by key (`/hold/<key>`), answered by open(key). */
const held = new Map<string, ServerResponse[]>();

const waitersOf = (s: RunningServer) => (s.core as unknown as ServerCore).waiters;

function open(key: string) {
  for (const res of held.get(key) ?? []) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ released: key }));
  }
  held.delete(key);
}

async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function api(base: string, method: string, url: string, body?: unknown, signal?: AbortSignal) {
  const res = await fetch(base + url, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const chain = `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: chain3, path: wait/chain3 }
workflow:
  - step: start
    tool: { kind: python, code: "def main(n):\\n    return n + 1", args: { n: "{{ workload.n }}" } }
    next: two
  - step: two
    tool: { kind: python, code: "def main(n):\\n    return n * 2", args: { n: "{{ start }}" } }
    next: three
  - step: three
    tool: { kind: python, code: "def main(n):\\n    return {'value': n + 1}", args: { n: "{{ two }}" } }
`;

const gated = () => `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: gated, path: wait/gated }
workflow:
  - step: start
    tool: { kind: http, method: GET, endpoint: "${gateUrl}/hold/{{ workload.key }}" }
`;

beforeAll(async () => {
  gate = createServer((req, res) => {
    const key = (req.url ?? '').replace(/^\/hold\//, '');
    held.set(key, [...(held.get(key) ?? []), res]);
  });
  gate.listen(0, '127.0.0.1');
  await once(gate, 'listening');
  gateUrl = `http://127.0.0.1:${(gate.address() as { port: number }).port}`;

  h = await startHarness({ workers: 1 });
  const portB = await freePort();
  urlB = `http://127.0.0.1:${portB}`;
  b = await startServer({
    config: { ...h.server.config, port: portB, serverUrl: urlB },
    handleSignals: false,
    logger: createLogger({ level: 'warn' }),
  });
  for (const [name, text] of [['chain3.yaml', chain], ['gated.yaml', gated()]]) {
    const file = path.join(h.tmp, name);
    writeFileSync(file, text);
    const r = await h.cli(['catalog', 'register', 'playbook', file]);
    expect(r.code, r.stderr).toBe(0);
  }
}, 180_000);

afterAll(async () => {
  for (const key of [...held.keys()]) open(key);
  await b?.stop();
  await h?.close();
  gate?.closeAllConnections();
  gate?.close();
});

describe('wait on the run routes and GET /api/execution/{id}', () => {
  it('answers the completed result of a short chain in the run request itself', async () => {
    for (const route of ['/api/run/playbook', '/api/v2/execute']) {
      const r = await api(h.url, 'POST', `${route}?wait=60`, { path: 'wait/chain3', payload: { n: 4 } });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ status: 'completed', path: 'wait/chain3', result: { value: 11 }, error: null });
      expect(r.body.execution_id).toMatch(/^\d+$/);
      expect(typeof r.body.finished_at).toBe('string');
      // and the finished execution answers a wait at once
      const g = await api(h.url, 'GET', `/api/execution/${r.body.execution_id}?wait=60`);
      expect(g.body).toMatchObject({ status: 'completed', result: { value: 11 } });
    }
  }, 120_000);

  it('hands the outcome of an execution that ended in this process to its waiters: the stored row, no read back', async () => {
    const core = h.server.core as unknown as ServerCore;
    const handed = new Map<string, Ended>();
    const original = core.executions.onEnded;
    expect(original).toBeTypeOf('function');
    core.executions.onEnded = (id, ended) => {
      handed.set(id, ended);
      original!(id, ended);
    };
    try {
      // every statement this process (server A, server B) sends while the run request is open
      const { value: r, sent } = await recordQueries(() => api(h.url, 'POST', '/api/run/playbook?wait=60', { path: 'wait/chain3', payload: { n: 1 } }));
      expect(r.body).toMatchObject({ status: 'completed', result: { value: 5 } });
      // a read of the execution's row: the named reads of store/executions.ts, or such a SELECT sent whole
      const readsRow = (q: string) => /^playflow\.execution_(outcome|get|with_last_seq)$/.test(q) || /\bFROM execution( e)? WHERE (e\.)?execution_id = \$1/.test(q);
      // the end's NOTIFY goes whole in a simple query, or bound in the pipeline of the write that ended it (lazy-tx.ts writeAndEnd)
      const end = sent.findIndex((q) => q.includes(notifyEndedSql(r.body.execution_id)) || /^PIPELINE .*\bplayflow\.notify_ended\b/.test(q));
      expect(end).toBeGreaterThan(-1); // the statement that ended it (its NOTIFY) was recorded
      expect(sent.slice(0, end).filter(readsRow)).toContain('playflow.execution_outcome'); // the wait's first read, before the end
      expect(sent.slice(end + 1).filter(readsRow)).toEqual([]); // and none after it
      const ended = handed.get(r.body.execution_id);
      expect(ended).toBeDefined();
      const g = await api(h.url, 'GET', `/api/execution/${r.body.execution_id}`);
      expect(ended).toEqual({ status: g.body.status, result: g.body.result, error: g.body.error, finished_at: g.body.finished_at });
      expect({ status: r.body.status, result: r.body.result, error: r.body.error, finished_at: r.body.finished_at }).toEqual(ended);
    } finally {
      core.executions.onEnded = original;
    }
  }, 120_000);

  it('answers the running state when the wait ends before the execution', async () => {
    const run = await api(h.url, 'POST', '/api/run/playbook?wait=1', { path: 'wait/gated', payload: { key: 'slow' } });
    expect(run.status).toBe(201);
    expect(run.body.status).toBe('started'); // not ended within its wait: the started execution, as without wait
    expect(run.body.result).toBeUndefined();
    const id = run.body.execution_id as string;
    await until('the gated step is called', () => held.has('slow'));
    const t0 = Date.now();
    const g = await api(h.url, 'GET', `/api/execution/${id}?wait=1`);
    const waited = Date.now() - t0;
    expect(g.status).toBe(200);
    expect(['started', 'running']).toContain(g.body.status);
    expect(g.body.result).toBeNull();
    expect(waited).toBeGreaterThanOrEqual(900); // it did wait (the upper bound is the test's timeout)
    // and a wait in progress ends when the execution does
    const pending = api(h.url, 'GET', `/api/execution/${id}?wait=60`);
    await until('the wait is registered', () => waitersOf(h.server).size === 1);
    open('slow');
    expect((await pending).body).toMatchObject({ status: 'completed', execution_id: id });
  }, 120_000);

  it('refuses a bad wait with a 400 naming it', async () => {
    const run = await api(h.url, 'POST', '/api/run/playbook', { path: 'wait/chain3', payload: { n: 1 } });
    for (const bad of ['-1', 'abc', '61']) {
      const g = await api(h.url, 'GET', `/api/execution/${run.body.execution_id}?wait=${bad}`);
      expect(g.status, bad).toBe(400);
      expect(g.body.error.message).toMatch(/wait/);
      const p = await api(h.url, 'POST', `/api/run/playbook?wait=${bad}`, { path: 'wait/chain3', payload: { n: 1 } });
      expect(p.status, bad).toBe(400);
      expect(p.body.error.message).toMatch(/wait/);
    }
    expect((await api(h.url, 'GET', '/api/execution/999999999?wait=5')).status).toBe(404);
  });

  it('publishes wait in the OpenAPI document', async () => {
    const doc = (await api(h.url, 'GET', '/docs/json')).body;
    const params = (p: string, m: string) => (doc.paths[p][m].parameters as Array<{ name: string; in: string }>).filter((x) => x.in === 'query').map((x) => x.name);
    expect(params('/api/execution/{id}', 'get')).toContain('wait');
    expect(params('/api/run/playbook', 'post')).toContain('wait');
    expect(params('/api/v2/execute', 'post')).toContain('wait');
  });
});

describe('several server instances on one database', () => {
  it('a wait on server B ends when an execution run through server A completes (woken by its NOTIFY)', async () => {
    const run = await api(h.url, 'POST', '/api/run/playbook', { path: 'wait/gated', payload: { key: 'ab' } });
    const id = run.body.execution_id as string;
    await until('the gated step is called', () => held.has('ab'));
    const wb = waitersOf(b);
    await until('B listens', () => wb.listening);
    const heard = wb.stats.notifications;
    const pending = api(urlB, 'GET', `/api/execution/${id}?wait=60`);
    await until('the wait is registered on B', () => wb.size === 1);
    open('ab');
    const g = await pending;
    expect(g.body).toMatchObject({ execution_id: id, status: 'completed' });
    expect(wb.stats.notifications).toBeGreaterThan(heard);
    expect(wb.size).toBe(0);
  }, 120_000);
});

describe('waiters do not leak', () => {
  it('a client that disconnects during a wait leaves no waiter behind', async () => {
    const run = await api(h.url, 'POST', '/api/run/playbook', { path: 'wait/gated', payload: { key: 'gone' } });
    const id = run.body.execution_id as string;
    const w = waitersOf(h.server);
    const ctl = new AbortController();
    const pending = api(h.url, 'GET', `/api/execution/${id}?wait=60`, undefined, ctl.signal).catch((e: Error) => e);
    await until('the wait is registered', () => w.size === 1);
    const gauge = async () => Number(/^playflow_execution_waiters (\S+)$/m.exec(await (await fetch(`${h.url}/metrics`)).text())?.[1]);
    expect(await gauge()).toBe(1);
    ctl.abort();
    expect(await pending).toBeInstanceOf(Error);
    await until('the waiter is gone', () => w.size === 0, 10_000); // long before its 60 s wait would end
    expect(await gauge()).toBe(0);
    await until('the gated step is called', () => held.has('gone'));
    open('gone');
  }, 120_000);

  it('a LISTEN session the database terminates is re-established, and waits still end', async () => {
    const w = waitersOf(h.server);
    const connects = w.stats.connects;
    await w.dropSessionForTest();
    await until('the session is back', () => w.listening && w.stats.connects > connects);
    const run = await api(h.url, 'POST', '/api/run/playbook', { path: 'wait/gated', payload: { key: 'again' } });
    const pending = api(h.url, 'GET', `/api/execution/${run.body.execution_id}?wait=60`);
    await until('the wait is registered', () => w.size === 1);
    await until('the gated step is called', () => held.has('again'));
    const heard = w.stats.notifications;
    open('again');
    expect((await pending).body.status).toBe('completed');
    expect(w.stats.notifications).toBeGreaterThan(heard);
  }, 120_000);
});

describe('CLI', () => {
  it('run --wait answers the result, and execution status --watch follows a running execution to its end', async () => {
    const r = await h.cli(['run', 'playbook', 'wait/chain3', '--payload', '{"n": 9}', '--wait', '--output', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'completed', result: { value: 21 } });

    const run = await api(h.url, 'POST', '/api/run/playbook', { path: 'wait/gated', payload: { key: 'cli' } });
    const watch = h.cli(['execution', 'status', run.body.execution_id, '--watch', '--output', 'json']);
    await until('the watch waits', () => waitersOf(h.server).size === 1);
    await until('the gated step is called', () => held.has('cli'));
    open('cli');
    const out = await watch;
    expect(out.code, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ execution_id: run.body.execution_id, status: 'completed' });
  }, 120_000);
});

describe('shutdown', () => {
  // last: it stops server B. The test's timeout is half the wait: only an early answer passes.
  it('a server that stops answers its waits with the current state instead of holding the shutdown', async () => {
    const run = await api(h.url, 'POST', '/api/run/playbook', { path: 'wait/gated', payload: { key: 'stop' } });
    const id = run.body.execution_id as string;
    await until('the gated step is called', () => held.has('stop'));
    const pending = api(urlB, 'GET', `/api/execution/${id}?wait=60`);
    await until('the wait is registered on B', () => waitersOf(b).size === 1);
    await b.stop();
    const g = await pending;
    expect(g.status).toBe(200);
    expect(g.body.execution_id).toBe(id);
    expect(['started', 'running']).toContain(g.body.status);
    expect(waitersOf(b).size).toBe(0);
    open('stop');
  }, 30_000);
});
