/**
 * Retry from failure and run again, for real: the server, a worker process, PostgreSQL, JetStream
 * and a local HTTP service whose calls are counted (the side effects). The service answers 500 on
 * the paths marked broken; the test fixes them and retries through the CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { startHarness, type Harness } from './harness.js';
import type { ServerCore } from '../../server/core.js';

let h: Harness;
let api: Server;
let apiUrl: string;
/** calls per path, in order, with the status answered */
const calls: Array<{ path: string; status: number }> = [];
const broken = new Set<string>();
/** paths that hang until released (to hold an execution running) */
const held = new Map<string, () => void>();
const count = (p: string) => calls.filter((c) => c.path === p).length;

async function register(name: string, yaml: string): Promise<void> {
  const file = path.join(h.tmp, `${name}.yaml`);
  writeFileSync(file, yaml);
  const r = await h.cli(['catalog', 'register', 'playbook', file]);
  expect(r.code, r.stderr).toBe(0);
}

async function cliJson(args: string[]): Promise<any> {
  const r = await h.cli([...args, '--output', 'json']);
  if (!r.stdout) throw new Error(`${args.join(' ')} (exit ${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function api_(method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`${h.url}${url}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

async function waitStatus(id: string, want: string[]): Promise<any> {
  for (let i = 0; i < 600; i++) {
    const r = await api_('GET', `/api/execution/${id}`);
    if (want.includes(r.body.status)) return r.body;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`execution ${id} never reached ${want.join('|')}`);
}

const http = (p: string) => `{kind: http, method: GET, url: "{{ workload.api }}/${p}"}`;

beforeAll(async () => {
  api = createServer((req, res) => {
    const p = (req.url ?? '/').slice(1);
    const answer = () => {
      const status = broken.has(p) ? 500 : 200;
      calls.push({ path: p, status });
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ path: p }));
    };
    if (p.startsWith('hold')) held.set(p, answer);
    else answer();
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  h = await startHarness();
  const workload = `workload: {api: "${apiUrl}"}\n`;
  const head = (p: string) => `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: ${p.replace('/', '-')}, path: ${p}}\n${workload}workflow:\n`;
  await register('five', head('retry/five') + [1, 2, 3, 4, 5].map((i) => `  - step: s${i}\n    tool: ${http(`five/${i}`)}\n${i < 5 ? `    next: s${i + 1}\n` : ''}`).join(''));
  await register('loop', `${head('retry/loop')}  - step: items
    loop: {in: [0, 1, 2, 3, 4, 5], iterator: i, mode: sequential}
    tool: {kind: http, method: GET, url: "{{ workload.api }}/loop/{{ i }}"}
    next: after
  - step: after
    tool: ${http('loop/after')}
`);
  await register('hold', `${head('retry/hold')}  - step: wait
    tool: ${http('hold/{{ execution_id }}')}
`);
  await register('child', `${head('retry/child')}  - step: c1
    tool: ${http('child/1')}
    next: c2
  - step: c2
    tool: ${http('child/2')}
`);
  await register('parent', `${head('retry/parent')}  - step: p1
    tool: ${http('parent/1')}
    next: call
  - step: call
    tool: {kind: playbook, path: retry/child, args: {}}
    next: p3
  - step: p3
    tool: ${http('parent/3')}
`);
}, 120_000);

afterAll(async () => {
  for (const release of held.values()) release();
  await h?.close();
  await new Promise((r) => api?.close(r));
});

describe('POST /api/execution/{id}/retry', () => {
  it('a 5-step playbook failing at step 3 (HTTP 500) completes after the service is fixed; steps 1-2 are not run again', async () => {
    broken.add('five/3');
    const started = await cliJson(['run', 'playbook', 'retry/five']);
    const failed = await waitStatus(started.execution_id, ['failed', 'completed']);
    expect(failed.status).toBe('failed');
    expect(failed.steps.s3.status).toBe('failed');
    expect([count('five/1'), count('five/2'), count('five/3'), count('five/4')]).toEqual([1, 1, 1, 0]);

    broken.delete('five/3');
    const r = await h.cli(['execution', 'retry', started.execution_id, '--wait', '--output', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const done = JSON.parse(r.stdout);
    expect(done.status).toBe('completed');
    expect(done.retries).toBe(1);
    expect(done.error).toBeNull();
    expect(done.steps.s1).toMatchObject({ status: 'completed', runs: 1 });
    expect(done.steps.s3).toMatchObject({ status: 'completed', runs: 2 });
    expect([1, 2, 3, 4, 5].map((i) => count(`five/${i}`))).toEqual([1, 1, 2, 1, 1]);

    // the log holds the retry; the state stored equals the fold of the log
    const events = (await api_('GET', `/api/events/${started.execution_id}?limit=1000`)).body.events.map((e: any) => e.name);
    expect(events).toContain('execution_retried');
    expect(events.indexOf('execution_failed')).toBeLessThan(events.indexOf('execution_retried'));
    const core = h.server.core as unknown as ServerCore;
    const folded = await core.executions.foldState(started.execution_id);
    await core.executions.dropSnapshots(started.execution_id);
    expect(await core.executions.loadState(started.execution_id)).toEqual(folded);
    expect(folded.status).toBe('completed');

    // a completed execution is not retried again
    const again = await api_('POST', `/api/execution/${started.execution_id}/retry`, {});
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('not_retryable');
  });

  it('a failed loop runs only the items that did not finish', async () => {
    broken.add('loop/2');
    const started = await cliJson(['run', 'playbook', 'retry/loop']);
    expect((await waitStatus(started.execution_id, ['failed', 'completed'])).status).toBe('failed');
    expect([0, 1, 2, 3].map((i) => count(`loop/${i}`))).toEqual([1, 1, 1, 0]);
    broken.delete('loop/2');
    const r = await api_('POST', `/api/execution/${started.execution_id}/retry`, {});
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('running');
    const done = await waitStatus(started.execution_id, ['failed', 'completed']);
    expect(done.status).toBe('completed');
    expect([0, 1, 2, 3, 4, 5].map((i) => count(`loop/${i}`))).toEqual([1, 1, 2, 1, 1, 1]);
    expect(count('loop/after')).toBe(1);
    expect(done.steps.items.result.map((e: any) => e.data.path)).toEqual([0, 1, 2, 3, 4, 5].map((i) => `loop/${i}`));
  });

  it('retry of a running execution is 409 and changes nothing; bad bodies are 400 naming the field', async () => {
    const started = await cliJson(['run', 'playbook', 'retry/hold']);
    const id = started.execution_id;
    await waitStatus(id, ['running']);
    const r = await api_('POST', `/api/execution/${id}/retry`, {});
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: 'not_retryable', details: { status: 'running' } });
    const cli = await h.cli(['execution', 'retry', id]);
    expect(cli.code).not.toBe(0);
    expect(cli.stderr).toMatch(/only a failed or cancelled execution can be retried/);
    const bad = await api_('POST', `/api/execution/${id}/retry`, { args: { wait: 3 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/args/);
    // cancelled, then retried: the held call runs again and the execution completes
    expect((await api_('POST', `/api/execution/${id}/cancel`)).body.status).toBe('cancelled');
    const badStep = await api_('POST', `/api/execution/${id}/retry`, { args: { nope: {} } });
    expect(badStep.status).toBe(400);
    expect(badStep.body.error.message).toMatch(/args\.nope/);
    for (const [k, release] of held) {
      held.delete(k);
      release();
    }
    const retried = await api_('POST', `/api/execution/${id}/retry`, {});
    expect(retried.status).toBe(200);
    for (let i = 0; i < 100 && !held.size; i++) await new Promise((res) => setTimeout(res, 100));
    for (const [k, release] of held) {
      held.delete(k);
      release();
    }
    expect((await waitStatus(id, ['failed', 'completed'])).status).toBe('completed');
    expect(count(`hold/${id}`)).toBe(2);
  });

  it("a failed child is resumed in place by its parent's retry", async () => {
    broken.add('child/2');
    const started = await cliJson(['run', 'playbook', 'retry/parent']);
    const failed = await waitStatus(started.execution_id, ['failed', 'completed']);
    expect(failed.status).toBe('failed');
    const children = (await api_('GET', '/api/executions?path=retry/child')).body.executions;
    expect(children).toHaveLength(1);
    const child = children[0];
    expect(child.status).toBe('failed');
    const direct = await api_('POST', `/api/execution/${child.execution_id}/retry`, {});
    expect(direct.status).toBe(409);
    expect(direct.body.error.message).toMatch(/retry the parent/);

    broken.delete('child/2');
    expect((await api_('POST', `/api/execution/${started.execution_id}/retry`, {})).status).toBe(200);
    const done = await waitStatus(started.execution_id, ['failed', 'completed']);
    expect(done.status).toBe('completed');
    const after = (await api_('GET', '/api/executions?path=retry/child')).body.executions;
    expect(after).toHaveLength(1); // the same child, resumed
    expect(after[0]).toMatchObject({ execution_id: child.execution_id, status: 'completed', retries: 1 });
    expect([count('parent/1'), count('child/1'), count('child/2'), count('parent/3')]).toEqual([1, 1, 2, 1]);
  });
});

describe('POST /api/execution/{id}/rerun', () => {
  it('starts a new execution of the same version and payload, linked to the original', async () => {
    const first = await cliJson(['run', 'playbook', 'retry/five', '--payload', '{"n": 1}']);
    expect((await waitStatus(first.execution_id, ['failed', 'completed'])).status).toBe('completed');
    // a newer version registered meanwhile is not used
    await register('five-v2', `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: five, path: retry/five}\nworkflow:\n  - step: only\n    tool: ${http('v2')}\n`);
    const again = await cliJson(['execution', 'rerun', first.execution_id]);
    expect(again).toMatchObject({ path: 'retry/five', version: 1 });
    expect(again.execution_id).not.toBe(first.execution_id);
    const rerun = await waitStatus(again.execution_id, ['failed', 'completed']);
    expect(rerun).toMatchObject({ status: 'completed', version: 1, payload: { n: 1 }, rerun_of: first.execution_id });
    const other = await api_('POST', `/api/execution/${first.execution_id}/rerun`, { payload: { n: 2 } });
    expect(other.status).toBe(201);
    expect((await waitStatus(other.body.execution_id, ['completed', 'failed'])).payload).toEqual({ n: 2 });
    expect(count('v2')).toBe(0);
    expect((await api_('POST', '/api/execution/999999999/rerun', {})).status).toBe(404);
  });
});
