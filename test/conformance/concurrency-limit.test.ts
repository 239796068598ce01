/**
 * Per-playbook concurrency limits for real: two server processes (the harness's and a second
 * `playflow server start`) on one PostgreSQL, a worker process with room for 8 commands, and a
 * local HTTP service that the playbook's step calls and that counts the calls in flight. With
 * `concurrency: {limit: 2}`, 10 executions started at once (through both servers) never have more
 * than 2 calls in flight, the others wait and start oldest first, and all 10 complete.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { freePort } from '../../cli/dev/embedded-db.js';
import { startHarness, type Harness } from './harness.js';
import type { ServerCore } from '../../server/core.js';

let h: Harness;
let urlB: string;
let api: Server;
let apiUrl: string;
/** calls held by the service, answered when released */
const held: Array<() => void> = [];
let holdAll = true;
let inFlight = 0;
let maxInFlight = 0;
/** execution ids in the order their step reached the service */
const arrivals: string[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const core = () => h.server.core as unknown as ServerCore;

async function call(method: string, url: string, body?: unknown, base = h.url): Promise<{ status: number; body: any }> {
  const r = await fetch(`${base}${url}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function waitingCount(): Promise<number> {
  const { rows } = await core().db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM execution WHERE path = 'limits/two' AND waiting`);
  return Number(rows[0].n);
}

beforeAll(async () => {
  api = createServer((req, res) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    arrivals.push((req.url ?? '').split('/').pop() ?? '');
    const answer = () => {
      inFlight--;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok": true}');
    };
    if (holdAll) held.push(answer);
    else setTimeout(answer, 50); // overlap calls so that a third one in flight would be seen
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  h = await startHarness({ concurrency: 8 });
  const file = path.join(h.tmp, 'two.yaml');
  writeFileSync(file, `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: two, path: limits/two}
concurrency: {limit: 2}
workflow:
  - step: start
    next: work
  - step: work
    tool: {kind: http, method: GET, url: "${apiUrl}/work/{{ execution_id }}"}
`);
  const r = await h.cli(['catalog', 'register', 'playbook', file]);
  expect(r.code, r.stderr).toBe(0);
  const portB = await freePort();
  urlB = `http://127.0.0.1:${portB}`;
  await h.startServer(portB); // server B, stopped by h.close()
}, 120_000);

afterAll(async () => {
  holdAll = false;
  held.splice(0).forEach((f) => f());
  await h?.close(); // stops server B too
  await new Promise((r) => api?.close(r));
});

describe('concurrency limit', () => {
  it('a limit of 2 holds under 10 simultaneous starts through two servers; the others wait and start oldest first; all complete', async () => {
    const starts = await Promise.all(Array.from({ length: 10 }, (_, i) => call('POST', '/api/run/playbook', { path: 'limits/two', payload: { n: i } }, i % 2 ? urlB : h.url)));
    for (const s of starts) expect(s.status, JSON.stringify(s.body)).toBe(201);
    const ids = starts.map((s) => s.body.execution_id as string).sort((a, b) => Number(a) - Number(b));

    // two run, eight wait: the calls are held, so nothing frees a slot
    await until('two calls in flight', () => held.length === 2);
    await until('eight waiting', async () => (await waitingCount()) === 8);
    await sleep(1500); // several admitter passes on both servers: still only two
    expect(held.length).toBe(2);
    expect(await waitingCount()).toBe(8);
    const waiting = (await call('GET', `/api/execution/${ids[9]}`)).body;
    expect(waiting).toMatchObject({ status: 'started', waiting: true, payload: { n: expect.any(Number) }, steps: {} });

    // free the slots: every further call is answered shortly, overlapping with the next
    holdAll = false;
    held.splice(0).forEach((f) => f());
    await until('all ten completed', async () => {
      const { rows } = await core().db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM execution WHERE path = 'limits/two' AND status = 'completed'`);
      return Number(rows[0].n) === 10;
    }, 120_000);
    expect(maxInFlight).toBe(2);
    expect((await call('GET', `/api/execution/${ids[9]}`)).body).toMatchObject({ status: 'completed', waiting: false });
    expect(arrivals).toHaveLength(10);
    expect([...arrivals].sort()).toEqual([...ids].sort());
    // Admitted oldest first. The two free slots go to the first starts to commit, which need not be
    // the lowest ids (ten requests race); every later admission took the oldest execution waiting,
    // so after those two the first events follow the ids.
    const { rows } = await core().db.pool.query<{ id: string }>(
      'SELECT execution_id::text AS id FROM event WHERE seq = 1 AND execution_id = ANY($1::bigint[]) ORDER BY event_id', [ids]);
    const admitted = rows.map((r) => r.id).slice(2);
    expect(admitted).toEqual([...admitted].sort((x, y) => Number(x) - Number(y)));
    expect(rows).toHaveLength(10);
  }, 180_000);

  it('a waiting execution can be cancelled; it never starts', async () => {
    holdAll = true;
    const first = await Promise.all([0, 1, 2].map((n) => call('POST', '/api/run/playbook', { path: 'limits/two', payload: { n } })));
    await until('two calls in flight', () => held.length === 2);
    // the one held back (normally the newest; a start whose insert commits late can be overtaken)
    const views = await Promise.all(first.map((s) => call('GET', `/api/execution/${s.body.execution_id}`)));
    const waiting = views.filter((v) => v.body.waiting === true).map((v) => String(v.body.execution_id));
    expect(waiting).toHaveLength(1);
    const third = waiting[0]!;
    const cancelled = await call('POST', `/api/execution/${third}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe('cancelled');
    holdAll = false;
    held.splice(0).forEach((f) => f());
    await until('the other two completed', async () => {
      const { rows } = await core().db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM execution WHERE path = 'limits/two' AND status = 'completed'`);
      return Number(rows[0].n) === 12;
    });
    expect(arrivals).not.toContain(third);
    expect((await call('GET', `/api/execution/${third}`)).body).toMatchObject({ status: 'cancelled', waiting: false });
    // nothing to resume: a retry is refused, a rerun starts it anew
    const retry = await call('POST', `/api/execution/${third}/retry`);
    expect(retry.status).toBe(409);
    expect(retry.body.error.message).toContain('rerun');
    const rerun = await call('POST', `/api/execution/${third}/rerun`);
    expect(rerun.status).toBe(201);
    await until('the rerun completed', async () => (await call('GET', `/api/execution/${rerun.body.execution_id}`)).body.status === 'completed');
  }, 120_000);
  it('a bad limit is refused at registration, naming the field', async () => {
    const file = path.join(h.tmp, 'bad-limit.yaml');
    writeFileSync(file, 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: bad, path: limits/bad}\nconcurrency: {limit: 0}\nworkflow:\n  - step: start\n');
    const r = await h.cli(['catalog', 'register', 'playbook', file]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('concurrency');
    expect((await call('GET', '/api/catalog/playbook/limits/bad')).status).toBe(404);
  });
});
