/**
 * The run routes' child start (parent_execution_id / parent_queue_id), the run path check and the
 * event pages' next_after (whole or narrowed), over the real core and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';

let s: TestServer;

const parentPlaybook = (path: string, child: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: ${path.split('/').pop()}, path: ${path}}
workflow:
  - step: start
    tool: {kind: playbook, path: ${child}, args: {n: 1}}
`;

async function start(path: string, body: Record<string, unknown> = {}): Promise<string> {
  const r = await s.call('POST', '/api/run/playbook', { path, ...body });
  expect(r.statusCode, r.body).toBe(201);
  return r.json().execution_id as string;
}

async function queueRow(executionId: string): Promise<{ queue_id: string; status: string; worker_id: string | null }> {
  const q = await s.core.db.pool.query('SELECT queue_id::text AS queue_id, status, worker_id FROM queue WHERE execution_id = $1 ORDER BY queue_id LIMIT 1', [executionId]);
  return q.rows[0];
}

async function claim(queueId: string, workerId: string): Promise<string> {
  const c = await s.call('POST', `/api/v2/commands/${queueId}/claim`, { worker_id: workerId, lease_seconds: 60 });
  expect(c.statusCode).toBe(200);
  return c.json().lease_token as string;
}

beforeAll(async () => {
  s = await startTestServer();
  for (const content of [
    simplePlaybook('cs/plain'),
    simplePlaybook('cs/child'),
    simplePlaybook('cs/limited', '').replace('workload:', 'concurrency: {limit: 1}\nworkload:'),
    parentPlaybook('cs/parent', 'cs/child'),
    parentPlaybook('cs/limited-parent', 'cs/limited'),
  ]) {
    const r = await s.call('POST', '/api/catalog/playbook', { content });
    expect(r.statusCode, r.body).toBe(201);
  }
});
afterAll(async () => {
  await s?.close();
});

describe('a child holds only a playbook command, started by its lease holder', () => {
  it("a non-playbook command is not taken over (409 not_playbook_command); its worker's call.done still counts", async () => {
    const id = await start('cs/plain');
    const row = await queueRow(id);
    const token = await claim(row.queue_id, 'w1');
    const r = await s.call('POST', '/api/run/playbook', { path: 'cs/child', parent_queue_id: row.queue_id, worker_id: 'w1', lease_token: token });
    expect(r.statusCode).toBe(409);
    expect(r.json().error.code).toBe('not_playbook_command');
    expect(r.json().error.message).toContain(`parent_queue_id ${row.queue_id}`);
    expect((await queueRow(id)).worker_id).toBe('w1');
    const done = await s.call('POST', '/api/v2/events', { execution_id: id, step: 'start', name: 'call.done', queue_id: row.queue_id, worker_id: 'w1', lease_token: token, payload: { response: { ok: true }, meta: {} } });
    expect(done.statusCode).toBe(200);
    expect((await s.call('GET', `/api/execution/${id}`)).json().status).toBe('completed');
  });

  it("a playbook command's child needs the lease's worker_id and lease_token (409 not_lease_holder); a retry gets the same child", async () => {
    const id = await start('cs/parent');
    const row = await queueRow(id);
    // not claimed yet: nobody holds it
    const unclaimed = await s.call('POST', '/api/v2/execute', { path: 'cs/child', parent_queue_id: row.queue_id, worker_id: 'w1', lease_token: 'x' });
    expect([unclaimed.statusCode, unclaimed.json().error.code]).toEqual([409, 'not_lease_holder']);
    const token = await claim(row.queue_id, 'w1');
    for (const body of [{}, { worker_id: 'w2', lease_token: token }, { worker_id: 'w1', lease_token: 'forged' }]) {
      const r = await s.call('POST', '/api/v2/execute', { path: 'cs/child', parent_queue_id: row.queue_id, ...body });
      expect([r.statusCode, r.json().error.code], JSON.stringify(body)).toEqual([409, 'not_lease_holder']);
      expect(r.json().error.message).toContain(`parent_queue_id ${row.queue_id}`);
    }
    expect((await queueRow(id)).worker_id).toBe('w1');
    const child = await start('cs/child', { parent_queue_id: row.queue_id, worker_id: 'w1', lease_token: token });
    expect((await queueRow(id)).worker_id).toBe(`execution:${child}`);
    // the worker retries its start (it never saw the answer): the same child, without a new check
    const again = await s.call('POST', '/api/v2/execute', { path: 'cs/child', parent_queue_id: row.queue_id, worker_id: 'w1', lease_token: token });
    expect([again.statusCode, again.json().execution_id]).toEqual([201, child]);
  });
});

describe('concurrency.limit exempts only a child holding its parent\'s command', () => {
  it('parent_execution_id alone is limited like a top-level start; a parent_queue_id child is not held', async () => {
    const other = await start('cs/plain');
    await start('cs/limited'); // takes the one slot (or waits for it, before the linked start)
    const linked = await start('cs/limited', { parent_execution_id: other });
    const lv = (await s.call('GET', `/api/execution/${linked}`)).json();
    expect([lv.parent_execution_id, lv.waiting]).toEqual([other, true]);

    const parent = await start('cs/limited-parent');
    const row = await queueRow(parent);
    const token = await claim(row.queue_id, 'w1');
    const child = await start('cs/limited', { parent_queue_id: row.queue_id, worker_id: 'w1', lease_token: token });
    expect((await s.call('GET', `/api/execution/${child}`)).json().waiting ?? false).toBe(false);
  });
});

describe('the run path is never rewritten', () => {
  it('a leading or trailing / is a 400 naming path, on both routes', async () => {
    for (const url of ['/api/run/playbook', '/api/v2/execute']) {
      for (const path of ['/cs/plain/', '/cs/plain', 'cs/plain/']) {
        const r = await s.call('POST', url, { path });
        expect(r.statusCode, `${url} ${path}`).toBe(400);
        expect(r.json().error.message).toContain(`field 'path': path '${path}' is not a catalog path`);
      }
    }
  });
});

describe('GET /api/events/{id} next_after', () => {
  it('is null when the page ends the log, the last seq when more follow', async () => {
    const id = await start('cs/plain');
    const all = (await s.call('GET', `/api/events/${id}`)).json().events as Array<{ seq: number }>;
    const last = all[all.length - 1].seq;
    expect(last).toBeGreaterThanOrEqual(2);
    const exact = (await s.call('GET', `/api/events/${id}?after=0&limit=${last}`)).json();
    expect([exact.events.length, exact.next_after]).toEqual([last, null]);
    const tail = (await s.call('GET', `/api/events/${id}?after=${last - 1}&limit=1`)).json();
    expect([tail.events.length, tail.next_after]).toEqual([1, null]);
    const short = (await s.call('GET', `/api/events/${id}?after=0&limit=${last - 1}`)).json();
    expect([short.events.length, short.next_after]).toEqual([last - 1, last - 1]);
  });

  it('a page narrowed by name: null when nothing selected follows it, the last seq when more do', async () => {
    const id = await start('cs/plain');
    const all = (await s.call('GET', `/api/events/${id}`)).json().events as Array<{ seq: number; name: string }>;
    const name = all[0].name;
    const selected = all.filter((e) => e.name === name).map((e) => e.seq);
    const exact = (await s.call('GET', `/api/events/${id}?name=${encodeURIComponent(name)}&limit=${selected.length}`)).json();
    expect([exact.events.map((e: { seq: number }) => e.seq), exact.next_after]).toEqual([selected, null]);
    const more = (await s.call('GET', `/api/events/${id}?limit=1`)).json();
    expect(more.next_after).toBe(all[0].seq);
  });
});
