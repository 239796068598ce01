/** Execution, event, command and queue endpoints over the real core and PostgreSQL. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';

let s: TestServer;

/** Two steps, so a finished first command issues a second one. */
const twoSteps = `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: two, path: ex/two}
workflow:
  - step: first
    tool: {kind: python, code: "result = {'n': 1}"}
    next: [second]
  - step: second
    tool: {kind: python, code: "result = {'n': 2}"}
`;

async function start(path = 'ex/one', payload: unknown = { a: 1 }) {
  const r = await s.call('POST', '/api/run/playbook', { path, payload });
  expect(r.statusCode).toBe(201);
  return r.json().execution_id as string;
}

async function queueIds(executionId: string): Promise<string[]> {
  const q = await s.core.db.pool.query('SELECT queue_id FROM queue WHERE execution_id = $1 ORDER BY queue_id', [executionId]);
  return q.rows.map((r) => String(r.queue_id));
}

/** A new execution whose one command w1 claimed and finished (call.done accepted): its queue id and w1's lease token. */
async function startAndFinish(): Promise<{ id: string; qid: string; token: string }> {
  const id = await start();
  const [qid] = await queueIds(id);
  const token = (await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1' })).json().lease_token;
  const done = await s.call('POST', '/api/v2/events', { execution_id: id, step: 'start', name: 'call.done', queue_id: qid, worker_id: 'w1', lease_token: token, payload: { response: { ok: true }, meta: {} } });
  expect(done.statusCode).toBe(200);
  return { id, qid, token };
}

beforeAll(async () => {
  s = await startTestServer();
  expect((await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('ex/one') })).statusCode).toBe(201);
  expect((await s.call('POST', '/api/catalog/playbook', { content: twoSteps })).statusCode).toBe(201);
});
afterAll(async () => {
  await s?.close();
});

describe('POST /api/run/playbook and /api/v2/execute', () => {
  it('starts: 201 {execution_id (string), status started, path, version, commands}', async () => {
    for (const url of ['/api/run/playbook', '/api/v2/execute']) {
      const r = await s.call('POST', url, { path: 'ex/one', payload: { x: 1 } });
      expect(r.statusCode).toBe(201);
      expect(r.json()).toEqual({ execution_id: expect.stringMatching(/^\d+$/), status: 'started', path: 'ex/one', version: 1, commands: 1 });
    }
  });

  it('payload is optional; version selects a catalog version', async () => {
    const r = await s.call('POST', '/api/v2/execute', { path: 'ex/one', version: 1 });
    expect(r.statusCode).toBe(201);
    expect(r.json().version).toBe(1);
  });

  it('unknown path or version: 404', async () => {
    const r = await s.call('POST', '/api/run/playbook', { path: 'ex/nope', payload: {} });
    expect(r.statusCode).toBe(404);
    expect(r.json().error.code).toBe('not_found');
    expect((await s.call('POST', '/api/v2/execute', { path: 'ex/one', version: 7 })).statusCode).toBe(404);
  });

  it('payload that is not an object: 400 naming payload', async () => {
    for (const payload of [[1, 2], 'text', 5, null]) {
      const r = await s.call('POST', '/api/run/playbook', { path: 'ex/one', payload });
      expect(r.statusCode).toBe(400);
      expect(r.json().error.details).toEqual([{ location: 'body', field: 'payload', message: 'must be object' }]);
    }
  });

  it('missing path: 400 naming path; malformed JSON: 400 invalid_json', async () => {
    const r = await s.call('POST', '/api/v2/execute', { payload: {} });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.message).toBe("body field 'path' is required");
    const bad = await s.call('POST', '/api/v2/execute', '{path: ex/one}');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('invalid_json');
  });

  it('ids in the body may be strings or integers; anything else is 400', async () => {
    const parent = await start();
    const asInt = await s.call('POST', '/api/v2/execute', { path: 'ex/one', parent_execution_id: Number(parent) });
    expect(asInt.statusCode).toBe(201);
    const child = (await s.call('GET', `/api/execution/${asInt.json().execution_id}`)).json();
    expect(child.parent_execution_id).toBe(parent);
    const bad = await s.call('POST', '/api/v2/execute', { path: 'ex/one', parent_execution_id: 'abc' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details[0].field).toBe('parent_execution_id');
  });
});

describe('GET /api/execution/{id}', () => {
  it('status, path, version, timestamps, steps, result, error', async () => {
    const id = await start('ex/one', { who: 'me' });
    const r = await s.call('GET', `/api/execution/${id}`);
    expect(r.statusCode).toBe(200);
    const e = r.json();
    expect(e).toMatchObject({
      execution_id: id, path: 'ex/one', version: 1, catalog_id: expect.stringMatching(/^\d+$/),
      parent_execution_id: null, root_execution_id: id, status: 'started', payload: { who: 'me' },
      result: null, error: null, finished_at: null,
    });
    expect(e.steps.start).toMatchObject({ status: 'running', runs: 1 });
    expect(Date.parse(e.created_at)).not.toBeNaN();
    expect(Date.parse(e.updated_at)).not.toBeNaN();
  });

  it('unknown: 404; non-numeric: 400; an int64 beyond 2^53 is looked up exactly (404)', async () => {
    const unknown = await s.call('GET', '/api/execution/987654');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toMatchObject({ code: 'not_found', message: 'execution 987654 not found' });
    const bad = await s.call('GET', '/api/execution/abc');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatchObject({ code: 'bad_request', details: [{ location: 'params', field: 'id', message: 'must be a decimal integer id' }] });
    expect((await s.call('GET', '/api/execution/9007199254740993')).statusCode).toBe(404);
    expect((await s.call('GET', '/api/execution/9999999999999999999')).statusCode).toBe(400);
    expect((await s.call('GET', '/api/execution/123456789012345678901')).statusCode).toBe(400);
  });
});

describe('GET /api/executions', () => {
  it('filters by path and status; pages', async () => {
    const id = await start('ex/two', {});
    const r = await s.call('GET', '/api/executions?path=ex/two');
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body.executions.map((e: { execution_id: string }) => e.execution_id)).toContain(id);
    for (const e of body.executions) expect(e.path).toBe('ex/two');
    expect(body).toMatchObject({ count: body.executions.length, limit: 50, offset: 0 });
    const started = (await s.call('GET', '/api/executions?status=started&limit=1')).json();
    expect(started.executions).toHaveLength(1);
    expect(started.executions[0].status).toBe('started');
  });

  it('view=summary: every field of the full list but payload, result and steps; an unknown view is refused', async () => {
    const id = await start('ex/two', { big: 'x'.repeat(10_000) });
    const full = (await s.call('GET', `/api/executions?path=ex/two&limit=1`)).json().executions[0];
    expect(full.execution_id).toBe(id);
    expect(full.payload.big).toHaveLength(10_000);
    expect(Object.keys(full.steps).length).toBeGreaterThan(0);
    const r = await s.call('GET', `/api/executions?path=ex/two&limit=1&view=summary`);
    expect(r.statusCode).toBe(200);
    const summary = r.json().executions[0];
    const { payload: _p, result: _r, steps: _s, ...rest } = full;
    expect(summary).toEqual(rest);
    expect(r.body.length).toBeLessThan(1000);
    // the same page, filters and order as the full view
    const ids = (q: string) => s.call('GET', `/api/executions?${q}`).then((x) => x.json().executions.map((e: { execution_id: string }) => e.execution_id));
    expect(await ids('path=ex/two&limit=3&offset=1&view=summary')).toEqual(await ids('path=ex/two&limit=3&offset=1'));
    const bad = await s.call('GET', '/api/executions?view=compact');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details[0].field).toBe('view');
  });

  it('unknown status: 400 listing the allowed values', async () => {
    const r = await s.call('GET', '/api/executions?status=sleeping');
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details[0].field).toBe('status');
    expect(r.json().error.message).toContain('"completed"');
  });
});

describe('commands: claim and heartbeat', () => {
  it('claim: 200 with the command; again: 409; heartbeat extends; unknown: 404', async () => {
    const id = await start();
    const [qid] = await queueIds(id);
    const c = await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1', lease_seconds: 30 });
    expect(c.statusCode).toBe(200);
    expect(c.json()).toMatchObject({
      queue_id: qid, execution_id: id, path: 'ex/one', step: 'start', command_id: 1, attempt: 1,
      tool: { kind: 'python' }, args: {}, worker_id: 'w1', context: { execution_id: id },
    });
    expect(Date.parse(c.json().lease_until)).toBeGreaterThan(Date.now());
    const token = c.json().lease_token as string;
    expect(token).toMatch(/^[\w-]{16,}$/);

    const again = await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w2' });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.code).toBe('already_claimed');

    const hb = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1', lease_token: token, lease_seconds: 120 });
    expect(hb.statusCode).toBe(200);
    expect(Date.parse(hb.json().lease_until)).toBeGreaterThan(Date.parse(c.json().lease_until));
    const notOwner = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w2', lease_token: token });
    expect(notOwner.statusCode).toBe(409);
    const noToken = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1' });
    expect(noToken.statusCode).toBe(409);

    expect((await s.call('POST', '/api/v2/commands/99999999/claim', { worker_id: 'w1' })).statusCode).toBe(404);
    expect((await s.call('POST', '/api/v2/commands/99999999/heartbeat', { worker_id: 'w1' })).statusCode).toBe(404);
  });

  it('a finished command: 410 on claim and heartbeat', async () => {
    const { qid, token } = await startAndFinish();
    const claim = await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w2' });
    expect(claim.statusCode).toBe(410);
    expect(claim.json().error.code).toBe('finished');
    expect((await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1', lease_token: token })).statusCode).toBe(410);
  });

  it('a claim of a done row of an ended execution says done, as the heartbeat does (not cancelled)', async () => {
    const { id, qid, token } = await startAndFinish();
    expect((await s.call('GET', `/api/execution/${id}`)).json().status).toBe('completed');
    const claim = await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1' });
    expect(claim.statusCode).toBe(410);
    expect(claim.json().error).toMatchObject({ code: 'finished', message: `queue entry ${qid} is done`, details: { status: 'done' } });
    const hb = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1', lease_token: token });
    expect(hb.json().error).toMatchObject({ code: 'finished', message: `queue entry ${qid} is done`, details: { status: 'done' } });
  });

  it('heartbeat without lease_token: 409 saying the lease_token is missing', async () => {
    const id = await start();
    const [qid] = await queueIds(id);
    expect((await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1' })).statusCode).toBe(200);
    const noToken = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1' });
    expect(noToken.statusCode).toBe(409);
    expect(noToken.json().error.code).toBe('not_owner');
    expect(noToken.json().error.message).toContain('lease_token is required');
    expect(noToken.json().error.message).not.toContain('another lease_token');
  });

  it('heartbeat without lease_seconds extends by the lease granted, never shortening it', async () => {
    const id = await start();
    const [qid] = await queueIds(id);
    const c = await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1', lease_seconds: 60 });
    const until0 = Date.parse(c.json().lease_until);
    const hb = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1', lease_token: c.json().lease_token });
    expect(hb.statusCode).toBe(200);
    const until1 = Date.parse(hb.json().lease_until);
    expect(until1).toBeGreaterThanOrEqual(until0);
    expect(until1).toBeGreaterThan(Date.now() + 50_000); // about 60 s, not the 20 s default
    // an explicit lease_seconds still sets it (the next one without extends by that)
    const short = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1', lease_token: c.json().lease_token, lease_seconds: 30 });
    expect(Date.parse(short.json().lease_until)).toBeLessThan(Date.now() + 35_000);
    const again = await s.call('POST', `/api/v2/commands/${qid}/heartbeat`, { worker_id: 'w1', lease_token: c.json().lease_token });
    expect(Date.parse(again.json().lease_until)).toBeGreaterThan(Date.now() + 25_000);
    expect(Date.parse(again.json().lease_until)).toBeLessThan(Date.now() + 35_000);
  });

  it('release: only the lease holder ends its lease, and the command is queued and announced again at once', async () => {
    const id = await start();
    const [qid] = await queueIds(id);
    expect((await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1', lease_seconds: 300 })).statusCode).toBe(200);
    const row = async () => (await s.core.db.pool.query('SELECT status, worker_id, attempts, lease_until > now() AS held FROM queue WHERE queue_id = $1', [qid])).rows[0];

    // another worker id: nothing changes
    const other = await s.call('POST', `/api/v2/commands/${qid}/release`, { worker_id: 'w2' });
    expect(other.statusCode).toBe(200);
    expect(other.json()).toEqual({ released: 0 });
    expect(await row()).toMatchObject({ status: 'leased', worker_id: 'w1', held: true });

    // notifications of qid taken off the broker (all acked: nothing else here consumes it)
    const notified = async () => {
      const msgs = await s.core.broker.fetch({ max: 1000, expiresMs: 100 });
      for (const m of msgs) m.ack();
      return msgs.filter((m) => String((m.data as { queue_id: unknown }).queue_id) === qid).length;
    };
    await notified();
    const mine = await s.call('POST', `/api/v2/commands/${qid}/release`, { worker_id: 'w1' });
    expect(mine.json()).toEqual({ released: 1 });
    expect(await row()).toMatchObject({ status: 'queued', attempts: 1 });
    // announced again now (the outbox publishes after the commit), not when the 300 s lease runs out
    await expect.poll(notified, { timeout: 5000 }).toBeGreaterThan(0);
    const again = await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w2' });
    expect(again.statusCode).toBe(200);
    expect(await row()).toMatchObject({ status: 'leased', worker_id: 'w2', attempts: 2 });

    // nothing to end: a second release, or one of a finished command, answers 0
    expect((await s.call('POST', `/api/v2/commands/${qid}/release`, { worker_id: 'w1' })).json()).toEqual({ released: 0 });
    const { qid: done } = await startAndFinish();
    expect((await s.call('POST', `/api/v2/commands/${done}/release`, { worker_id: 'w1' })).json()).toEqual({ released: 0 });

    expect((await s.call('POST', '/api/v2/commands/99999999/release', { worker_id: 'w1' })).statusCode).toBe(404);
    const missing = await s.call('POST', `/api/v2/commands/${qid}/release`, {});
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error.details[0]).toMatchObject({ field: 'worker_id', message: 'is required' });
  });

  it('missing worker_id, bad lease, non-numeric queue_id: 400', async () => {
    const missing = await s.call('POST', '/api/v2/commands/1/claim', {});
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error.details[0]).toMatchObject({ field: 'worker_id', message: 'is required' });
    expect((await s.call('POST', '/api/v2/commands/1/claim', { worker_id: 'w', lease_seconds: 0 })).statusCode).toBe(400);
    const badId = await s.call('POST', '/api/v2/commands/x1/heartbeat', { worker_id: 'w' });
    expect(badId.statusCode).toBe(400);
    expect(badId.json().error.details[0].field).toBe('queue_id');
  });
});

describe('events', () => {
  it('a reported call.done completes the step; the next step is queued (EventsAck counts it)', async () => {
    const id = await start('ex/two', {});
    const [qid] = await queueIds(id);
    const token = (await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1' })).json().lease_token;
    const forged = await s.call('POST', '/api/v2/events', {
      execution_id: Number(id), step: 'first', name: 'call.done', queue_id: Number(qid), worker_id: 'w1', lease_token: 'forged', payload: { response: { n: 666 } },
    });
    expect([forged.statusCode, forged.json().error.code]).toEqual([409, 'not_lease_holder']);
    const ack = await s.call('POST', '/api/v2/events', {
      execution_id: Number(id), step: 'first', name: 'call.done', queue_id: Number(qid), worker_id: 'w1', lease_token: token,
      payload: { response: { n: 1 }, meta: { duration_ms: 3, attempt: 1 } },
    });
    expect(ack.statusCode).toBe(200);
    expect(ack.json()).toEqual({ status: 'ok', accepted: 1, duplicates: 0, commands: 1 });
    const e = (await s.call('GET', `/api/execution/${id}`)).json();
    expect(e.steps.first).toMatchObject({ status: 'completed', result: { n: 1 } });
    expect(e.steps.second.status).toBe('running');

    // The same report again is a duplicate, not re-applied.
    const dup = await s.call('POST', '/api/events', {
      events: [{ execution_id: id, step: 'first', name: 'call.done', queue_id: qid, worker_id: 'w1', lease_token: token, payload: { response: { n: 1 }, meta: {} } }],
    });
    expect(dup.statusCode).toBe(200);
    expect(dup.json()).toMatchObject({ accepted: 0, duplicates: 1, commands: 0 });

    // Finish the second step through the batch form: the execution completes.
    const [, qid2] = await queueIds(id);
    const token2 = (await s.call('POST', `/api/v2/commands/${qid2}/claim`, { worker_id: 'w1' })).json().lease_token;
    const batch = await s.call('POST', '/api/v2/events', {
      events: [{ execution_id: id, step: 'second', name: 'call.done', queue_id: qid2, worker_id: 'w1', lease_token: token2, payload: { response: { n: 2 }, meta: {} } }],
    });
    expect(batch.statusCode).toBe(200);
    const end = (await s.call('GET', `/api/execution/${id}`)).json();
    expect(end.status).toBe('completed');
    expect(end.result).toEqual({ n: 2 });
    expect(Date.parse(end.finished_at)).not.toBeNaN();
  });

  it('Idempotency-Key: a retried run returns the first execution; the key on another playbook is 409', async () => {
    const key = `retry-${Date.now()}`;
    const first = await s.call('POST', '/api/run/playbook', { path: 'ex/one', payload: { a: 1 } }, { 'idempotency-key': key });
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await s.call('POST', '/api/v2/execute', { path: 'ex/one', payload: { a: 1 } }, { 'idempotency-key': key });
    expect(again.statusCode).toBe(201);
    expect(again.json().execution_id).toBe(first.json().execution_id);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const concurrent = await Promise.all([1, 2, 3].map(() => s.call('POST', '/api/run/playbook', { path: 'ex/one' }, { 'idempotency-key': `${key}-c` })));
    expect(new Set(concurrent.map((r) => r.json().execution_id)).size).toBe(1);
    const other = await s.call('POST', '/api/run/playbook', { path: 'ex/two' }, { 'idempotency-key': key });
    expect([other.statusCode, other.json().error.code]).toEqual([409, 'idempotency_key_reused']);
    // the same playbook with another payload or version is another request, not a retry
    const payload = await s.call('POST', '/api/run/playbook', { path: 'ex/one', payload: { a: 2 } }, { 'idempotency-key': key });
    expect([payload.statusCode, payload.json().error.code, payload.json().error.message]).toEqual([409, 'idempotency_key_reused', expect.stringContaining('another payload')]);
    const version = await s.call('POST', '/api/run/playbook', { path: 'ex/one', version: 99, payload: { a: 1 } }, { 'idempotency-key': key });
    expect([version.statusCode, version.json().error.code]).toEqual([409, 'idempotency_key_reused']);

    const { rows } = await s.core.db.pool.query('SELECT count(*)::int AS n FROM execution WHERE idempotency_key LIKE $1', [`${key}%`]);
    expect(rows[0].n).toBe(2);
    const plain = await s.call('POST', '/api/run/playbook', { path: 'ex/one' });
    expect(plain.json().execution_id).not.toBe(first.json().execution_id);
  });

  it('Idempotency-Key: the payload compares as JSON whatever its key order, and a replay of an ended execution says how it ended', async () => {
    const key = `ended-${Date.now()}`;
    const first = await s.call('POST', '/api/run/playbook', { path: 'ex/one', payload: { a: 1, b: { c: 2, d: [1, 2] } } }, { 'idempotency-key': key });
    const id = first.json().execution_id;
    const again = await s.call('POST', '/api/run/playbook', { path: 'ex/one', payload: { b: { d: [1, 2], c: 2 }, a: 1 } }, { 'idempotency-key': key });
    expect([again.statusCode, again.json().execution_id, again.json().status]).toEqual([201, id, 'started']);
    expect((await s.call('POST', `/api/execution/${id}/cancel`)).statusCode).toBe(200);
    const late = await s.call('POST', '/api/run/playbook', { path: 'ex/one', payload: { a: 1, b: { c: 2, d: [1, 2] } } }, { 'idempotency-key': key });
    expect([late.json().execution_id, late.json().status, late.headers['idempotent-replayed']]).toEqual([id, 'cancelled', 'true']);
  });

  it('a result with a __proto__ key completes the step with that key in the data', async () => {
    const id = await start('ex/one', {});
    const [qid] = await queueIds(id);
    const token = (await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1' })).json().lease_token;
    const body = `{"execution_id": "${id}", "step": "start", "name": "call.done", "queue_id": "${qid}", "worker_id": "w1", "lease_token": "${token}",
      "payload": {"response": {"__proto__": {"admin": true}, "constructor": {"prototype": {"x": 1}}, "ok": 1}, "meta": {}}}`;
    const ack = await s.call('POST', '/api/v2/events', body);
    expect(ack.statusCode).toBe(200);
    expect(ack.json().accepted).toBe(1);
    const raw = (await s.call('GET', `/api/execution/${id}`)).body;
    const e = JSON.parse(raw);
    expect(e.status).toBe('completed');
    expect(Object.keys(e.result).sort()).toEqual(['__proto__', 'constructor', 'ok']);
    expect(Object.getOwnPropertyDescriptor(e.result, '__proto__')?.value).toEqual({ admin: true });
    expect(e.result.constructor).toEqual({ prototype: { x: 1 } });
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('GET /api/events/{id}: an http tool\'s params values are masked in command_issued, like query values of its URL', async () => {
    const pb = `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: p, path: ex/http-params}
workflow:
  - step: start
    tool: {kind: http, endpoint: "https://api.example.com/v1/items?api_key=TOPSECRET123", params: {api_key: TOPSECRET123, page: 2, q: "{{ workload.q }}", skip: null}}
`;
    expect((await s.call('POST', '/api/catalog/playbook', { content: pb })).statusCode).toBe(201);
    const id = await start('ex/http-params', { q: 'x' });
    const events = (await s.call('GET', `/api/events/${id}`)).json().events as Array<{ name: string; payload: { command: { tool: Record<string, unknown> } } }>;
    const issued = events.find((e) => e.name === 'command_issued')!;
    expect(issued.payload.command.tool).toMatchObject({
      kind: 'http', endpoint: 'https://api.example.com/v1/items?api_key=***',
      params: { api_key: '***', page: '***', q: '***', skip: null },
    });
    expect(JSON.stringify(events)).not.toContain('TOPSECRET123');
    // the stored event and the queue row keep the command as issued (a retry re-issues it)
    const [qid] = await queueIds(id);
    const c = await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1' });
    expect(c.json().tool.params).toMatchObject({ api_key: 'TOPSECRET123', page: 2 });
  });

  it('GET /api/events/{id}: ordered by seq; after and limit page through', async () => {
    const id = await start('ex/one', { k: 'v' });
    const all = await s.call('GET', `/api/events/${id}`);
    expect(all.statusCode).toBe(200);
    const body = all.json();
    expect(body.execution_id).toBe(id);
    expect(body.events.length).toBeGreaterThanOrEqual(2);
    expect(body.events[0]).toMatchObject({ event_id: expect.stringMatching(/^\d+$/), execution_id: id, seq: 1, name: 'execution_started' });
    const seqs = body.events.map((e: { seq: number }) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));

    const first = (await s.call('GET', `/api/events/${id}?limit=1`)).json();
    expect(first.events).toHaveLength(1);
    expect(first.next_after).toBe(1);
    const rest = (await s.call('GET', `/api/events/${id}?after=${first.next_after}`)).json();
    expect(rest.events[0].seq).toBe(2);
    expect(rest.events.length).toBe(body.events.length - 1);
  });

  it('GET /api/events: unknown execution 404, non-numeric 400, bad after 400', async () => {
    expect((await s.call('GET', '/api/events/424242')).statusCode).toBe(404);
    // narrowed to a step or a name, and as a long poll: at once, not after the wait
    expect((await s.call('GET', '/api/events/424242?step=start')).statusCode).toBe(404);
    expect((await s.call('GET', '/api/events/424242?name=call.done&wait=5')).statusCode).toBe(404);
    expect((await s.call('GET', '/api/events/x')).statusCode).toBe(400);
    const bad = await s.call('GET', '/api/events/1?after=-1');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details[0].field).toBe('after');
  });

  it('POST events: missing name / execution_id named, in a batch with its index; bad JSON 400', async () => {
    const one = await s.call('POST', '/api/v2/events', { execution_id: '1', payload: {} });
    expect(one.statusCode).toBe(400);
    expect(one.json().error.details).toEqual([{ location: 'body', field: 'name', message: 'is required' }]);
    const batch = await s.call('POST', '/api/v2/events', { events: [{ execution_id: '1', name: 'x', payload: {} }, { name: 'y' }] });
    expect(batch.statusCode).toBe(400);
    expect(batch.json().error.details[0].field).toBe('events[1].execution_id');
    const empty = await s.call('POST', '/api/v2/events', { events: [] });
    expect(empty.statusCode).toBe(400);
    const badJson = await s.call('POST', '/api/events', '{"name":');
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json().error.code).toBe('invalid_json');
  });

  it('POST events for an unknown execution: 404', async () => {
    const r = await s.call('POST', '/api/v2/events', { execution_id: '777777', step: 'start', name: 'call.done', payload: {} });
    expect(r.statusCode).toBe(404);
    expect(r.json().error.code).toBe('not_found');
  });
});

describe('POST /api/execution/{id}/cancel', () => {
  it('cancels: the execution comes back cancelled; its queued command is gone', async () => {
    const id = await start();
    const r = await s.call('POST', `/api/execution/${id}/cancel`);
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ execution_id: id, status: 'cancelled' });
    expect((await s.call('GET', `/api/execution/${id}`)).json().status).toBe('cancelled');
    const [qid] = await queueIds(id);
    expect((await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w' })).statusCode).toBe(410);
  });

  it('ends the unfinished steps as cancelled (answer, GET, list); a retry answers with every step summary, as GET does', async () => {
    const id = await start('ex/two');
    const [qid] = await queueIds(id);
    const token = (await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w1' })).json().lease_token;
    const done = await s.call('POST', '/api/v2/events', { execution_id: id, step: 'first', name: 'call.done', queue_id: qid, worker_id: 'w1', lease_token: token, payload: { response: { ok: true }, meta: {} } });
    expect(done.statusCode).toBeLessThan(300);
    const cancelled = await s.call('POST', `/api/execution/${id}/cancel`);
    expect(cancelled.json().steps).toMatchObject({ first: { status: 'completed' }, second: { status: 'cancelled' } });
    const got = (await s.call('GET', `/api/execution/${id}`)).json();
    expect(got.steps).toMatchObject({ first: { status: 'completed' }, second: { status: 'cancelled' } });
    expect(JSON.stringify(cancelled.json().steps)).toBe(JSON.stringify(got.steps));
    const listed = (await s.call('GET', '/api/executions?status=cancelled&path=ex/two')).json().executions as Array<{ execution_id: string; steps: object }>;
    expect(listed.find((e) => e.execution_id === id)?.steps).toMatchObject({ second: { status: 'cancelled' } });

    const retried = await s.call('POST', `/api/execution/${id}/retry`);
    expect(retried.statusCode).toBe(200);
    expect(retried.json()).toMatchObject({ status: 'running', retries: 1, steps: { first: { status: 'completed', runs: 1 }, second: { status: 'running', runs: 2 } } });
    expect(JSON.stringify(retried.json().steps)).toBe(JSON.stringify((await s.call('GET', `/api/execution/${id}`)).json().steps));
  });

  it('unknown: 404; non-numeric: 400', async () => {
    expect((await s.call('POST', '/api/execution/55555/cancel')).statusCode).toBe(404);
    expect((await s.call('POST', '/api/execution/abc/cancel')).statusCode).toBe(400);
  });
});

describe('GET /api/queue/stats', () => {
  it('reports queued, leased, delayed and the oldest age', async () => {
    const r = await s.call('GET', '/api/queue/stats');
    expect(r.statusCode).toBe(200);
    const q = r.json();
    expect(q).toEqual({ queued: expect.any(Number), leased: expect.any(Number), delayed: expect.any(Number), oldest_age_seconds: expect.any(Number) });
    expect(q.queued).toBeGreaterThan(0);
    expect(q.leased).toBeGreaterThan(0);
  });
});
