/**
 * Worker pools (issue 14): a step names the pool whose workers run it (`pool:` on the step, else
 * the playbook's, else `default`). Real server, two worker processes (pools `default` and `gpu`),
 * PostgreSQL and JetStream: each command is claimed by a worker of its own pool — through the
 * broker and through eager dispatch alike — and `GET /api/queue/stats?pool=` counts each pool's
 * depth on its own, which is what a WorkerPool scales on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

let h: Harness;

async function api(method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`${h.url}${url}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const terminal = (id: string) => waitFor(`execution ${id} to end`, async () => {
  const r = await api('GET', `/api/execution/${id}`);
  return ['completed', 'failed', 'cancelled'].includes(r.body.status) ? r.body : undefined;
});

/** worker_id of each step's claim, from the event log (action_started carries it). */
async function claimedBy(id: string): Promise<Record<string, string>> {
  const r = await api('GET', `/api/events/${id}?limit=1000`);
  const out: Record<string, string> = {};
  for (const e of r.body.events) if (e.name === 'action_started') out[e.step] = e.payload.worker_id;
  return out;
}

const python = (v: string) => `{kind: python, code: "def main():\\n    return {'v': '${v}'}"}`;

beforeAll(async () => {
  h = await startHarness({ workers: 0 });
  await h.startWorker({ WORKER_ID: 'cpu-worker' });
  const reg = await api('POST', '/api/catalog/playbook', {
    content: `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: pools, path: test/pools }
workflow:
  - step: start
    tool: ${python('a')}
    next: [{ step: train }]
  - step: train
    pool: gpu
    tool: ${python('b')}
    next: [{ step: report }]
  - step: report
    tool: ${python('c')}
`,
  });
  expect(reg.status, JSON.stringify(reg.body)).toBe(201);
  const reg2 = await api('POST', '/api/catalog/playbook', {
    content: `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: all-gpu, path: test/all-gpu }
pool: gpu
workflow:
  - step: start
    tool: ${python('x')}
`,
  });
  expect(reg2.status, JSON.stringify(reg2.body)).toBe(201);
}, 120_000);

afterAll(async () => {
  await h?.close();
});

describe('worker pools', { timeout: 120_000 }, () => {
  it("a pool's commands wait for its workers and count in its own depth only", async () => {
    const run = await api('POST', '/api/run/playbook', { path: 'test/all-gpu', payload: {} });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    const id = run.body.execution_id;
    const gpuDepth = await waitFor('the gpu pool to hold the command', async () => {
      const s = await api('GET', '/api/queue/stats?pool=gpu');
      return s.body.queued === 1 ? s.body : undefined;
    });
    expect(gpuDepth).toMatchObject({ queued: 1, leased: 0 });
    // the default pool's worker is idle and the command is not its: nothing else is open
    expect((await api('GET', '/api/queue/stats?pool=default')).body).toMatchObject({ queued: 0, leased: 0 });
    expect((await api('GET', '/api/queue/stats')).body).toMatchObject({ queued: 1 });
    expect(['started', 'running']).toContain((await api('GET', `/api/execution/${id}`)).body.status); // waiting, not failed

    await h.startWorker({ WORKER_ID: 'gpu-worker', WORKER_POOL: 'gpu' });
    const done = await terminal(id);
    expect(done.status).toBe('completed');
    expect(await claimedBy(id)).toEqual({ start: 'gpu-worker' });
    expect((await api('GET', '/api/queue/stats?pool=gpu')).body).toMatchObject({ queued: 0, leased: 0 });
  });

  it('each step runs on a worker of its pool, also when the previous call could hand it over eagerly', async () => {
    for (let i = 0; i < 3; i++) {
      const run = await api('POST', '/api/run/playbook', { path: 'test/pools', payload: {} });
      const done = await terminal(run.body.execution_id);
      expect(done.status).toBe('completed');
      expect(await claimedBy(run.body.execution_id)).toEqual({ start: 'cpu-worker', train: 'gpu-worker', report: 'cpu-worker' });
    }
  });

  it('a pool name that is not a DNS-1123 label is refused, naming the field', async () => {
    const r = await api('POST', '/api/catalog/playbook', {
      content: 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: { name: bad, path: test/bad }\nworkflow:\n  - step: start\n    pool: GPU_1\n',
    });
    expect(r.status).toBe(422); // an invalid playbook, as every validation failure of the catalog
    expect(JSON.stringify(r.body)).toMatch(/pool/);
    const s = await api('GET', '/api/queue/stats?pool=Not_A_Pool');
    expect(s.status).toBe(400);
    expect(JSON.stringify(s.body)).toMatch(/pool/);
  });
});
