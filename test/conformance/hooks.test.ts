/**
 * Webhook triggers for real: the server, a worker process, PostgreSQL, JetStream and a local HTTP
 * service the playbook calls with values of the delivery's body. Hooks are made and deliveries
 * sent through the CLI (`playflow hook set|send`) and with fetch as an outside sender would.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { startHarness, type Harness } from './harness.js';
import type { ServerCore } from '../../server/core.js';

let h: Harness;
let api: Server;
let apiUrl: string;
const seen: string[] = [];
const SECRET = 'conformance-hook-secret-0123456789';

const sign = (raw: string) => `sha256=${createHmac('sha256', SECRET).update(raw).digest('hex')}`;
const secretFile = () => path.join(h.tmp, 'hook-secret');
const core = () => h.server.core as unknown as ServerCore;

async function get(url: string): Promise<any> {
  return (await fetch(`${h.url}${url}`)).json();
}

async function deliver(name: string, raw: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const r = await fetch(`${h.url}/api/hooks/${name}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: raw });
  return { status: r.status, body: await r.json() };
}

async function rows(): Promise<{ executions: number; events: number }> {
  const { rows: r } = await core().db.pool.query<{ e: string; ev: string }>('SELECT (SELECT count(*) FROM execution) AS e, (SELECT count(*) FROM event) AS ev');
  return { executions: Number(r[0].e), events: Number(r[0].ev) };
}

async function waitStatus(id: string, want: string[]): Promise<any> {
  for (let i = 0; i < 600; i++) {
    const r = await get(`/api/execution/${id}`);
    if (want.includes(r.status)) return r;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`execution ${id} never reached ${want.join('|')}`);
}

beforeAll(async () => {
  api = createServer((req, res) => {
    seen.push(req.url ?? '/');
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok": true}');
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  h = await startHarness();
  const file = path.join(h.tmp, 'on-pr.yaml');
  writeFileSync(file, `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: on-pr, path: hooks/on-pr}
workflow:
  - step: start
    next: notify
  - step: notify
    tool: {kind: http, method: GET, url: "${apiUrl}/pr/{{ workload.pull_request.number }}/{{ workload.action }}"}
`);
  const r = await h.cli(['catalog', 'register', 'playbook', file]);
  expect(r.code, r.stderr).toBe(0);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await new Promise((r) => api?.close(r));
});

describe('webhook triggers', () => {
  it('a signed delivery starts an execution that completes with the body as payload; a wrong signature is 401 and stores nothing', async () => {
    writeFileSync(secretFile(), `${SECRET}\n`);
    const set = await h.cli(['hook', 'set', 'github-pr', '--path', 'hooks/on-pr', '--filter', "body.action in ['opened', 'synchronize']", '--secret-file', secretFile(), '--output', 'json']);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ name: 'github-pr', path: 'hooks/on-pr', secret_set: true });
    expect(set.stdout).not.toContain(SECRET);

    const raw = JSON.stringify({ action: 'opened', pull_request: { number: 42, title: 'Add hooks' } });
    const before = await rows();
    const wrong = await deliver('github-pr', raw, { 'x-hub-signature-256': sign(`${raw}\n`), 'x-github-delivery': 'gh-1' });
    expect(wrong.status).toBe(401);
    expect(await rows()).toEqual(before);

    const ok = await deliver('github-pr', raw, { 'x-hub-signature-256': sign(raw), 'x-github-delivery': 'gh-1', 'x-github-event': 'pull_request' });
    expect(ok.status).toBe(202);
    expect(ok.body.started).toBe(true);
    const done = await waitStatus(ok.body.execution_id, ['completed', 'failed']);
    expect(done.status).toBe('completed');
    expect(done.payload).toEqual({ action: 'opened', pull_request: { number: 42, title: 'Add hooks' } });
    expect(seen).toContain('/pr/42/opened');

    // GitHub redelivers: the first execution, nothing new
    const after = await rows();
    const again = await deliver('github-pr', raw, { 'x-hub-signature-256': sign(raw), 'x-github-delivery': 'gh-1' });
    expect(again).toEqual({ status: 200, body: { started: false, hook: 'github-pr', reason: 'replayed', execution_id: ok.body.execution_id } });
    // a body the filter refuses: nothing starts
    const closed = JSON.stringify({ action: 'closed', pull_request: { number: 42 } });
    const filtered = await deliver('github-pr', closed, { 'x-hub-signature-256': sign(closed), 'x-github-delivery': 'gh-2' });
    expect(filtered).toEqual({ status: 200, body: { started: false, hook: 'github-pr', reason: 'filter' } });
    expect(await rows()).toEqual(after);
    expect(seen.filter((s) => s.startsWith('/pr/'))).toEqual(['/pr/42/opened']);
  }, 90_000);

  it('the CLI signs and sends a delivery; a repeated delivery id answers the first execution', async () => {
    const payload = JSON.stringify({ action: 'synchronize', pull_request: { number: 43 } });
    const first = await h.cli(['hook', 'send', 'github-pr', '--payload', payload, '--delivery', 'cli-1', '--secret-file', secretFile(), '--output', 'json']);
    expect(first.code, first.stderr).toBe(0);
    const id = JSON.parse(first.stdout).execution_id as string;
    expect((await waitStatus(id, ['completed', 'failed'])).status).toBe('completed');
    const second = await h.cli(['hook', 'send', 'github-pr', '--payload', payload, '--delivery', 'cli-1', '--secret-file', secretFile()]);
    expect(second.stdout).toContain(`already delivered: execution ${id}`);
    const unsigned = await h.cli(['hook', 'send', 'github-pr', '--payload', payload]);
    expect(unsigned.code).not.toBe(0);
    expect(unsigned.stderr).toContain('401');
    expect(seen.filter((s) => s === '/pr/43/synchronize')).toHaveLength(1);
    const list = await h.cli(['hook', 'list']);
    expect(list.stdout).toMatch(/github-pr\s+hooks\/on-pr/);
  }, 90_000);
});
