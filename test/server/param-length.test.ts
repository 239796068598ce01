/**
 * Path parameters as long as the names they carry, through the real HTTP server (startServer: the
 * production core with credentials, keychain and vars, on a listening socket, not app.inject):
 * fastify's router refuses parameters over 100 characters by default, while var and credential
 * names go up to 255 characters and schedule names up to 253 (server/app/index.ts MAX_PARAM_LENGTH).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../common/logger.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { simplePlaybook } from './helpers.js';

let server: RunningServer;
let db: TestDatabase;

async function call(method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`${server.address}${url}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

beforeAll(async () => {
  db = await createTestDatabase('pfparams');
  const config = {
    ...loadConfig({
      DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent',
      PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    }),
    sweeper: false,
  };
  server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'silent' }) });
}, 60_000);
afterAll(async () => {
  await server?.stop();
  await db?.drop();
});

describe('long path parameters', () => {
  it('a 255-character var name (ASCII, 3-byte and 4-byte UTF-8: up to 3060 bytes percent-encoded) is read and deleted', async () => {
    expect((await call('POST', '/api/catalog/playbook', { content: simplePlaybook('long/vars') })).status).toBe(201);
    const run = await call('POST', '/api/run/playbook', { path: 'long/vars' });
    expect(run.status).toBe(201);
    const id = run.body.execution_id;
    for (const name of ['v'.repeat(255), '€'.repeat(255), '😀'.repeat(255)]) {
      const set = await call('POST', `/api/vars/${id}`, { variables: { [name]: 42 } });
      expect(set.status, JSON.stringify(set.body)).toBe(200);
      const got = await call('GET', `/api/vars/${id}/${encodeURIComponent(name)}`);
      expect(got.status, JSON.stringify(got.body)).toBe(200);
      expect(got.body).toMatchObject({ var_name: name, value: 42 });
      const del = await call('DELETE', `/api/vars/${id}/${encodeURIComponent(name)}`);
      expect(del.status, JSON.stringify(del.body)).toBe(200);
      expect(del.body).toMatchObject({ var_name: name, deleted: true });
      expect((await call('GET', `/api/vars/${id}/${encodeURIComponent(name)}`)).status).toBe(404);
    }
  });

  it('a 255-character credential name is read and deleted', async () => {
    const name = `c${'r'.repeat(254)}`;
    expect((await call('POST', '/api/credentials', { name, type: 'api_key', data: { api_key: 'k' } })).status).toBe(201);
    const got = await call('GET', `/api/credentials/${name}`);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body).toMatchObject({ name });
    expect((await call('DELETE', `/api/credentials/${name}`)).status).toBe(200);
    expect((await call('GET', `/api/credentials/${name}`)).status).toBe(404);
  });

  it('a schedule a playbook declares, named `<path>:<name>` with 200+ characters, is read; an API schedule of 253 is read and deleted', async () => {
    const path = `long/${'p'.repeat(200)}`;
    const yaml = `${simplePlaybook(path)}schedules:\n  - {name: nightly, cron: "0 0 2 * * *"}\n`;
    const reg = await call('POST', '/api/catalog/playbook', { content: yaml });
    expect(reg.status, JSON.stringify(reg.body)).toBe(201);
    const declared = `${path.replace(/\//g, '.')}:nightly`;
    expect(declared.length).toBeGreaterThan(200);
    const got = await call('GET', `/api/schedules/${encodeURIComponent(declared)}`);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body).toMatchObject({ name: declared, source: 'playbook', path });
    // the route is reached: the playbook owns it, so the API may not delete it
    const refused = await call('DELETE', `/api/schedules/${encodeURIComponent(declared)}`);
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);

    const name = `a${'b'.repeat(252)}`;
    expect((await call('PUT', `/api/schedules/${name}`, { cron: '0 0 3 * * *', path })).status).toBe(201);
    expect((await call('GET', `/api/schedules/${name}`)).body).toMatchObject({ name, source: 'api' });
    expect((await call('DELETE', `/api/schedules/${name}`)).body).toEqual({ name, deleted: true });
    expect((await call('GET', `/api/schedules/${name}`)).status).toBe(404);
  });

  it('a 512-character catalog path (a wildcard parameter) is read and deleted', async () => {
    const path = `long/${'c'.repeat(507)}`;
    expect(path.length).toBe(512);
    expect((await call('POST', '/api/catalog/playbook', { content: simplePlaybook('long/c'), path })).status).toBe(201);
    expect((await call('GET', `/api/catalog/playbook/${path}`)).body).toMatchObject({ path, version: 1 });
    expect((await call('DELETE', `/api/catalog/playbook/${path}`)).body).toEqual({ status: 'deleted', path });
  });
});
