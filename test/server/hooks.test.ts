/**
 * Webhook triggers against the real core and PostgreSQL (in-process broker, no worker): CRUD with
 * a write-only secret, the signature check before anything is stored, the filter, redeliveries,
 * and the API token (required everywhere but on deliveries).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../server/app/index.js';
import { createServerCore, type ServerCore } from '../../server/core.js';
import { Cipher, parseKey } from '../../server/crypto.js';
import { HookService, sign } from '../../server/hooks/service.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { simplePlaybook } from './helpers.js';

const TOKEN = 'api-token-for-hooks-test';
const SECRET = 'hook-secret-CANARY-0123456789';
let db: TestDatabase;
let core: ServerCore;
let app: FastifyInstance;
const logLines: string[] = [];
const mainKey = parseKey(randomBytes(32).toString('base64'));

async function api(method: 'GET' | 'PUT' | 'DELETE' | 'POST', url: string, body?: unknown, token: string | null = TOKEN) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await app.inject({ method, url, headers, payload: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.statusCode, body: r.json(), text: r.body };
}

/** A delivery as a sender makes it: no API token, the body's exact bytes signed. */
async function deliver(name: string, raw: string, headers: Record<string, string> = {}) {
  const r = await app.inject({ method: 'POST', url: `/api/hooks/${name}`, headers: { 'content-type': 'application/json', ...headers }, payload: raw });
  return { status: r.statusCode, body: r.json() };
}

async function counts(): Promise<{ executions: number; events: number; queue: number }> {
  const { rows } = await core.db.pool.query<{ e: string; ev: string; q: string }>(
    'SELECT (SELECT count(*) FROM execution) AS e, (SELECT count(*) FROM event) AS ev, (SELECT count(*) FROM queue) AS q');
  return { executions: Number(rows[0].e), events: Number(rows[0].ev), queue: Number(rows[0].q) };
}

beforeAll(async () => {
  db = await createTestDatabase('pfhooks');
  core = await createServerCore({ databaseUrl: db.url, brokerUrl: 'memory', serverUrl: 'http://playflow.test', sweeper: false, scheduler: false, poolSize: 4 });
  await core.start();
  core.deps.webhooks = new HookService(core.deps.db, new Cipher(mainKey), core.deps.executions);
  const sink = new Writable({ write(chunk, _enc, cb) { logLines.push(String(chunk)); cb(); } });
  app = await buildApp(core.deps, { apiToken: TOKEN, logger: pino({ level: 'debug' }, sink) });
  const reg = await app.inject({
    method: 'POST', url: '/api/catalog/playbook', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ content: simplePlaybook('hooks/target') }),
  });
  expect(reg.statusCode, reg.body).toBeLessThan(300);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await core?.close();
  await db?.drop();
});

describe('webhook triggers', () => {
  it('a hook needs a secret unless insecure; the secret is write-only and sealed', async () => {
    const noSecret = await api('PUT', '/api/hooks/gh', { path: 'hooks/target' });
    expect(noSecret.status).toBe(400);
    expect(noSecret.body.error.message).toContain('secret is required');
    const short = await api('PUT', '/api/hooks/gh', { path: 'hooks/target', secret: 'short' });
    expect(short.status).toBe(400);
    expect(short.body.error.message).toContain('secret');
    const badFilter = await api('PUT', '/api/hooks/gh', { path: 'hooks/target', secret: SECRET, filter: 'body.action ==' });
    expect(badFilter.status).toBe(400);
    expect(badFilter.body.error.message).toContain('filter');
    const both = await api('PUT', '/api/hooks/gh', { path: 'hooks/target', secret: SECRET, insecure: true });
    expect(both.status).toBe(400);
    expect((await api('GET', '/api/hooks/gh')).status).toBe(404);

    const made = await api('PUT', '/api/hooks/gh', { path: 'hooks/target', secret: SECRET, filter: "body.action == 'opened'" });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ name: 'gh', path: 'hooks/target', secret_set: true, insecure: false, url: '/api/hooks/gh' });
    // replaced without a secret: the stored one is kept
    const replaced = await api('PUT', '/api/hooks/gh', { path: 'hooks/target', filter: "body.action == 'opened'" });
    expect(replaced.status).toBe(200);
    expect(replaced.body.secret_set).toBe(true);
    const listed = await api('GET', '/api/hooks');
    expect(listed.body.count).toBe(1);
    for (const text of [made.text, replaced.text, listed.text, (await api('GET', '/api/hooks/gh')).text]) expect(text).not.toContain('CANARY');
    const { rows } = await core.db.pool.query<{ t: string }>('SELECT row_to_json(s)::text AS t FROM hook_secret s UNION ALL SELECT row_to_json(h)::text FROM hook h');
    expect(rows.length).toBe(2);
    for (const r of rows) expect(r.t).not.toContain('CANARY');

    // managing hooks needs the API token; only deliveries do not
    expect((await api('GET', '/api/hooks', undefined, null)).status).toBe(401);
    expect((await api('PUT', '/api/hooks/evil', { path: 'hooks/target', insecure: true }, null)).status).toBe(401);
    expect((await api('DELETE', '/api/hooks/gh', undefined, null)).status).toBe(401);
    // the OpenAPI document says so too
    const doc = (await api('GET', '/docs/json')).body;
    expect(doc.paths['/api/hooks/{name}'].post.security).toEqual([]);
    expect(doc.paths['/api/hooks/{name}'].put.security).toBeUndefined();
  });

  it('a wrong or missing signature is 401 and stores nothing', async () => {
    const before = await counts();
    const raw = JSON.stringify({ action: 'opened', n: 1 });
    const variants: Array<Record<string, string>> = [{}, { 'x-hub-signature-256': sign('another-secret-of-16+', raw) }, { 'x-hub-signature-256': 'sha256=zz' },
      { 'x-hub-signature-256': sign(SECRET, raw + ' ') }, { authorization: `Bearer ${TOKEN}` }];
    for (const headers of variants) {
      const r = await deliver('gh', raw, { 'x-github-delivery': 'd-bad', ...headers });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe('bad_signature');
    }
    expect(await counts()).toEqual(before);
    expect((await deliver('nope', raw, { 'x-hub-signature-256': sign(SECRET, raw) })).status).toBe(404);
  });

  it('a signed delivery starts the playbook with the body as payload; the filter and redeliveries start nothing', async () => {
    // the exact bytes are signed: spacing and key order as the sender wrote them
    const raw = '{ "action": "opened",  "pr": {"number": 7, "title": "x"} }';
    const first = await deliver('gh', raw, { 'x-hub-signature-256': sign(SECRET, raw), 'x-github-delivery': 'delivery-1' });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ started: true, hook: 'gh', path: 'hooks/target', version: 1 });
    const id = first.body.execution_id as string;
    const exec = await api('GET', `/api/execution/${id}`);
    expect(exec.body.payload).toEqual({ action: 'opened', pr: { number: 7, title: 'x' } });
    // the execution names the hook that started it
    expect(exec.body.hook_id).toBe((await api('GET', '/api/hooks/gh')).body.hook_id);
    expect(exec.body.hook_id).toMatch(/^\d+$/);

    const afterFirst = await counts();
    const again = await deliver('gh', raw, { 'x-hub-signature-256': sign(SECRET, raw), 'x-github-delivery': 'delivery-1' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ started: false, hook: 'gh', reason: 'replayed', execution_id: id });
    expect(await counts()).toEqual(afterFirst);

    const closed = JSON.stringify({ action: 'closed' });
    const filtered = await deliver('gh', closed, { 'x-hub-signature-256': sign(SECRET, closed), 'x-github-delivery': 'delivery-2' });
    expect(filtered.status).toBe(200);
    expect(filtered.body).toEqual({ started: false, hook: 'gh', reason: 'filter' });
    expect(await counts()).toEqual(afterFirst);

    // a new delivery id starts a new execution
    const second = await deliver('gh', raw, { 'x-hub-signature-256': sign(SECRET, raw), 'x-idempotency-key': 'delivery-3' });
    expect(second.status).toBe(202);
    expect(second.body.execution_id).not.toBe(id);
  });

  it('headers are visible to the filter; an insecure hook takes unsigned deliveries; a body must be an object', async () => {
    expect((await api('PUT', '/api/hooks/open', { path: 'hooks/target', insecure: true, filter: "headers['x-github-event'] == 'push'" })).status).toBe(201);
    const raw = '{"ref": "main"}';
    expect((await deliver('open', raw, { 'x-github-event': 'ping' })).body).toMatchObject({ started: false, reason: 'filter' });
    const pushed = await deliver('open', raw, { 'x-github-event': 'push' });
    expect(pushed.status).toBe(202);
    expect((await api('GET', `/api/execution/${pushed.body.execution_id}`)).body.payload).toEqual({ ref: 'main' });
    expect((await deliver('open', '[1, 2]', { 'x-github-event': 'push' })).status).toBe(400);
    expect((await deliver('open', '{"broken":', { 'x-github-event': 'push' })).status).toBe(400);
    expect((await api('DELETE', '/api/hooks/open')).body).toEqual({ name: 'open', deleted: true });
    expect((await deliver('open', raw, { 'x-github-event': 'push' })).status).toBe(404);
  });
});

describe('webhook secrets and key rotation', () => {
  it('a rotated encryption key keeps verifying deliveries; the old key is then no longer needed', async () => {
    const { reencryptAll } = await import('../../server/crypto.js');
    const oldKey = parseKey(randomBytes(32).toString('base64'));
    const newKey = parseKey(randomBytes(32).toString('base64'));
    const before = new HookService(core.deps.db, new Cipher(oldKey), core.deps.executions);
    await before.put('rotated', { path: 'hooks/target', secret: SECRET });
    const result = await reencryptAll(core.db.pool, new Cipher(newKey, [oldKey, mainKey]));
    expect(result.rotated.hook_secret).toBeGreaterThanOrEqual(1);
    const { rows } = await core.db.pool.query<{ key_id: string }>('SELECT DISTINCT key_id FROM hook_secret');
    expect(rows).toEqual([{ key_id: newKey.id }]);
    const after = new HookService(core.deps.db, new Cipher(newKey), core.deps.executions);
    const raw = '{"k": 1}';
    const r = await after.deliver('rotated', { raw: Buffer.from(raw), body: JSON.parse(raw), headers: { 'x-hub-signature-256': sign(SECRET, raw) } });
    expect(r.started).toBe(true);
    await expect(after.deliver('rotated', { raw: Buffer.from(raw), body: JSON.parse(raw), headers: { 'x-hub-signature-256': sign('not-the-secret-at-all', raw) } }))
      .rejects.toMatchObject({ statusCode: 401 });
  });
});

describe('the secret stays sealed', () => {
  it('no table, log line (debug level) or answer holds the secret after every kind of delivery', async () => {
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('')).not.toContain('hook-secret-CANARY');
    const tables = await core.db.pool.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
    expect(tables.rows.map((t) => t.table_name)).toEqual(expect.arrayContaining(['hook', 'hook_secret', 'execution', 'event', 'queue']));
    for (const { table_name } of tables.rows) {
      const { rows } = await core.db.pool.query<{ t: string }>(`SELECT t::text AS t FROM "${table_name}" t`);
      expect(rows.map((r) => r.t).join('\n'), `table ${table_name}`).not.toContain('hook-secret-CANARY');
    }
  });
});
