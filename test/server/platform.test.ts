/**
 * Cross-cutting behaviour over the real core: bearer token, probes, metrics, runtime registry,
 * direct SQL, the OpenAPI document, error envelopes for unknown routes and real faults.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, listRoutes } from '../../server/app/index.js';
import { createServerCore } from '../../server/core.js';
import { createSqlReader, SQL_READER_ROLE, type SqlReader } from '../../server/store/sql-reader.js';
import { createTestDatabase } from '../helpers/pg.js';
import { RUNTIME_LIVE_SECONDS } from '../../common/contract/limits.js';
import { RUNTIME_FORGET_SECONDS } from '../../server/store/runtime.js';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';

const TOKEN = 'test-token-123';
let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ apiToken: TOKEN });
});
afterAll(async () => {
  await s?.close();
});

const noAuth = { authorization: '' };

describe('bearer token', () => {
  it('every API endpoint answers 401 {error:{code:unauthorized}} without it', async () => {
    for (const [method, url] of [
      ['GET', '/api/catalog/playbooks'], ['POST', '/api/catalog/playbook'], ['GET', '/api/catalog/playbook/a/b'],
      ['POST', '/api/run/playbook'], ['POST', '/api/v2/execute'], ['GET', '/api/execution/1'], ['GET', '/api/executions'],
      ['GET', '/api/events/1'], ['POST', '/api/v2/events'], ['POST', '/api/events'], ['POST', '/api/v2/commands/1/claim'],
      ['GET', '/api/queue/stats'], ['GET', '/api/runtime'], ['POST', '/api/postgres/execute'],
      ['GET', '/docs/json'], ['GET', '/redoc'],
    ] as const) {
      const r = await s.call(method, url, method === 'POST' ? {} : undefined, noAuth);
      expect(r.statusCode, `${method} ${url}`).toBe(401);
      expect(r.json().error.code).toBe('unauthorized');
    }
  });

  it('a wrong token is 401; the right one passes (scheme case-insensitive)', async () => {
    const wrong = await s.call('GET', '/api/queue/stats', undefined, { authorization: 'Bearer nope' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().error).toEqual({ code: 'unauthorized', message: 'invalid bearer token' });
    expect((await s.call('GET', '/api/queue/stats', undefined, { authorization: `bearer ${TOKEN}` })).statusCode).toBe(200);
    expect((await s.call('GET', '/api/queue/stats', undefined, { authorization: `Basic ${TOKEN}` })).statusCode).toBe(401);
  });

  it('the probes never need it', async () => {
    for (const url of ['/health', '/healthz', '/readyz']) expect((await s.call('GET', url, undefined, noAuth)).statusCode).toBe(200);
  });

  it('/metrics is public by default; PLAYFLOW_PUBLIC_ENDPOINTS=none protects it', async () => {
    expect((await s.call('GET', '/metrics', undefined, noAuth)).statusCode).toBe(200);
    const app = await buildApp(s.core.deps, { apiToken: TOKEN, publicEndpoints: [] });
    try {
      const r = await app.inject({ method: 'GET', url: '/metrics' });
      expect(r.statusCode).toBe(401);
      expect(r.json().error.code).toBe('unauthorized');
      expect((await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('PLAYFLOW_PUBLIC_ENDPOINTS opens metrics and docs only', async () => {
    const app = await buildApp(s.core.deps, { apiToken: TOKEN, publicEndpoints: ['metrics', 'docs'] });
    try {
      expect((await app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(200);
      expect((await app.inject({ method: 'GET', url: '/docs/json' })).statusCode).toBe(200);
      expect((await app.inject({ method: 'GET', url: '/redoc' })).statusCode).toBe(200);
      expect((await app.inject({ method: 'GET', url: '/api/queue/stats' })).statusCode).toBe(401);
    } finally {
      await app.close();
    }
  });
});

describe('health and metrics', () => {
  it('/health reports database and broker reachability', async () => {
    const r = await s.call('GET', '/health', undefined, noAuth);
    expect(r.json()).toMatchObject({
      status: 'ok', version: expect.any(String), uptime_seconds: expect.any(Number),
      checks: { database: { status: 'ok', latency_ms: expect.any(Number) }, broker: { status: 'ok' } },
    });
    expect((await s.call('GET', '/readyz', undefined, noAuth)).json().checks.database.status).toBe('ok');
    expect((await s.call('GET', '/healthz', undefined, noAuth)).json()).toMatchObject({ status: 'ok', checks: {} });
  });

  it('broker unreachable: 200 degraded (the API still works); the database decides 503', async () => {
    const db = await createTestDatabase('pfhttp');
    const core = await createServerCore({ databaseUrl: db.url, brokerUrl: 'memory', serverUrl: 'http://x', sweeper: false, poolSize: 2 });
    const app = await buildApp(core.deps);
    try {
      await core.broker.close();
      const h = await app.inject({ method: 'GET', url: '/health' });
      expect(h.statusCode).toBe(200);
      expect(h.json()).toMatchObject({ status: 'degraded', checks: { database: { status: 'ok' }, broker: { status: 'error' } } });
    } finally {
      await app.close();
      await core.close().catch(() => {});
      await db.drop();
    }
  });

  it('/metrics serves Prometheus text with request, queue and core metrics', async () => {
    await s.call('GET', '/api/queue/stats');
    const r = await s.call('GET', '/metrics');
    expect(r.statusCode).toBe(200);
    expect(String(r.headers['content-type'])).toContain('text/plain');
    for (const name of [
      'playflow_http_requests_total{method="GET",route="/api/queue/stats",status="200"}',
      'playflow_queue_depth{state="queued"}', 'playflow_queue_oldest_age_seconds',
      '# TYPE playflow_commands_issued_total counter', '# TYPE playflow_event_handling_seconds histogram',
      '# TYPE playflow_executions_total counter', '# TYPE playflow_http_request_duration_seconds histogram',
    ]) expect(r.body).toContain(name);
  });
});

describe('runtime registry', () => {
  it('register, heartbeat, list', async () => {
    const reg = await s.call('POST', '/api/runtime/register', { kind: 'worker', name: 'pool-a', info: { replicas: 2 } });
    expect(reg.statusCode).toBe(200);
    expect(reg.json()).toEqual({ status: 'ok' });
    expect((await s.call('POST', '/api/runtime/heartbeat', { kind: 'worker', name: 'pool-a' })).json()).toEqual({ status: 'ok' });
    const list = (await s.call('GET', '/api/runtime')).json();
    expect(list.count).toBe(list.runtimes.length);
    const pool = list.runtimes.find((r: { name: string }) => r.name === 'pool-a');
    expect(pool).toMatchObject({ kind: 'worker', info: { replicas: 2 } });
    expect(Date.parse(pool.last_heartbeat)).not.toBeNaN();
    expect(list.runtimes.some((r: { kind: string }) => r.kind === 'server')).toBe(true);
    expect(pool.live).toBe(true);
    expect(pool.heartbeat_age_seconds).toBeGreaterThanOrEqual(0);
    expect(pool.heartbeat_age_seconds).toBeLessThan(RUNTIME_LIVE_SECONDS);
  });

  /** A worker registered through the API whose last heartbeat was `secondsAgo` seconds ago. */
  async function registeredAgo(name: string, secondsAgo: number): Promise<void> {
    await s.call('POST', '/api/runtime/register', { kind: 'worker', name });
    await s.core.db.pool.query('UPDATE runtime SET last_heartbeat = now() - make_interval(secs => $1) WHERE name = $2', [secondsAgo, name]);
  }

  it('a registration whose heartbeats stopped is listed as not live, with its age by the database clock', async () => {
    await registeredAgo('pool-gone', RUNTIME_LIVE_SECONDS + 240);
    await registeredAgo('pool-late', RUNTIME_LIVE_SECONDS - 20);
    const byName = new Map((await s.call('GET', '/api/runtime')).json().runtimes.map((r: { name: string }) => [r.name, r]));
    expect(byName.get('pool-gone')).toMatchObject({ live: false });
    expect((byName.get('pool-gone') as { heartbeat_age_seconds: number }).heartbeat_age_seconds).toBeGreaterThanOrEqual(RUNTIME_LIVE_SECONDS + 240);
    // one late beat is not gone
    expect(byName.get('pool-late')).toMatchObject({ live: true });
    // a heartbeat brings it back
    await s.call('POST', '/api/runtime/heartbeat', { kind: 'worker', name: 'pool-gone' });
    const again = (await s.call('GET', '/api/runtime')).json().runtimes.find((r: { name: string }) => r.name === 'pool-gone');
    expect(again.live).toBe(true);
  });

  it('the sweeper forgets a registration after a day without heartbeats, not before', async () => {
    await registeredAgo('pool-day-gone', RUNTIME_FORGET_SECONDS + 60);
    await registeredAgo('pool-offline', RUNTIME_FORGET_SECONDS - 600);
    await s.core.sweeper.tick(); // a first pass runs every task
    const names = (await s.call('GET', '/api/runtime')).json().runtimes.map((r: { name: string }) => r.name);
    expect(names).not.toContain('pool-day-gone');
    expect(names).toContain('pool-offline');
  });

  it('bad kind or missing name: 400', async () => {
    const r = await s.call('POST', '/api/runtime/register', { kind: 'robot' });
    expect(r.statusCode).toBe(400);
    const fields = r.json().error.details.map((d: { field: string }) => d.field).sort();
    expect(fields).toEqual(['kind', 'name']);
  });
});

describe('POST /api/postgres/execute', () => {
  // The SQL API as PLAYFLOW_SQL_API=on builds it: a read-only pool of its own, as playflow_sql_reader.
  let sqlApp: FastifyInstance;
  let sql: SqlReader;
  const run = (payload: unknown, headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` }) =>
    sqlApp.inject({ method: 'POST', url: '/api/postgres/execute', headers, payload: payload as object });

  beforeAll(async () => {
    sql = await createSqlReader({ databaseUrl: s.db.url, adminPool: s.core.db.pool, secret: 'k', timeoutMs: 1000 });
    sqlApp = await buildApp({ ...s.core.deps, sql }, { apiToken: TOKEN, sqlApi: true });
    // a schema of the application's, created by its owner and readable by the SQL role
    await s.core.db.pool.query(`CREATE SCHEMA app_s; CREATE TABLE app_s.items (id int, name text);
      INSERT INTO app_s.items VALUES (1, 'a'), (2, 'b'); GRANT USAGE ON SCHEMA app_s TO ${SQL_READER_ROLE}; GRANT SELECT ON app_s.items TO ${SQL_READER_ROLE}`);
  });
  afterAll(async () => {
    await sqlApp?.close();
    await sql?.close();
  });

  it('returns the rows of the statement', async () => {
    const r = await run({ query: "SELECT 1 AS one, 'x' AS s, 9007199254740993::int8 AS big, now() AS t" });
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body.status).toBe('ok');
    expect(body.result).toHaveLength(1);
    expect(body.result[0]).toMatchObject({ one: 1, s: 'x', big: '9007199254740993' });
    expect(Date.parse(body.result[0].t)).not.toBeNaN();
  });

  it('zone-less dates and timestamps are the same instants whatever the server\'s time zone', async () => {
    const query = "SELECT '2024-06-01'::date AS d, '2024-06-01 12:00:00'::timestamp AS ts, '-infinity'::timestamp AS inf, ARRAY['2024-06-01'::date, NULL] AS da";
    const zone = process.env.TZ;
    const results: unknown[] = [];
    try {
      for (const tz of ['UTC', 'Europe/Berlin', 'America/New_York']) {
        process.env.TZ = tz;
        const r = await run({ query });
        expect(r.statusCode).toBe(200);
        results.push(r.json().result[0]);
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(results[0]).toEqual({ d: '2024-06-01T00:00:00.000Z', ts: '2024-06-01T12:00:00.000Z', inf: '-infinity', da: ['2024-06-01T00:00:00.000Z', null] });
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toEqual(results[0]);
  });

  it('schema sets the search_path for the transaction', async () => {
    const r = await run({ query: 'SELECT name FROM items ORDER BY id', schema: 'app_s' });
    expect(r.statusCode).toBe(200);
    expect(r.json().result).toEqual([{ name: 'a' }, { name: 'b' }]);
  });

  it('is read-only: writes, DDL and several statements are 400 sql_error and change nothing', async () => {
    const upd = await run({ query: "UPDATE items SET name = 'z' WHERE id = 2 RETURNING id, name", schema: 'app_s' });
    expect(upd.statusCode).toBe(400);
    expect(upd.json().error).toMatchObject({ code: 'sql_error', details: { code: '25006' } });
    const ddl = await run({ query: 'CREATE TABLE public.half (x int)' });
    expect(ddl.statusCode).toBe(400);
    const multi = await run({ query: "COMMIT; INSERT INTO app_s.items VALUES (3, 'c')" });
    expect(multi.statusCode).toBe(400);
    expect(multi.json().error.code).toBe('sql_error');
    const { rows } = await s.core.db.pool.query("SELECT to_regclass('public.half') AS t, (SELECT array_agg(name ORDER BY id) FROM app_s.items) AS names");
    expect(rows).toEqual([{ t: null, names: ['a', 'b'] }]);
  });

  it('has no superuser power: COPY … TO PROGRAM, server files and role changes are refused', async () => {
    for (const query of [
      "COPY (SELECT 1) TO PROGRAM 'id'",
      "SELECT pg_read_file('/etc/passwd')",
      "SELECT set_config('role', 'postgres', true)",
      'SELECT * FROM credential',
    ]) {
      const r = await run({ query });
      expect(r.statusCode, query).toBe(400);
      expect(r.json().error.code, query).toBe('sql_error');
    }
    const who = await run({ query: 'SELECT current_user AS u, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS su' });
    expect(who.json().result).toEqual([{ u: SQL_READER_ROLE, su: false }]);
  });

  it('a statement killing its own connection is that request\'s 503; the next request and the API work', async () => {
    const r = await run({ query: 'SELECT pg_terminate_backend(pg_backend_pid())' });
    expect(r.statusCode).toBe(503);
    expect(r.json().error.code).toBe('database_unavailable');
    expect((await run({ query: 'SELECT 3 AS three' })).json().result).toEqual([{ three: 3 }]);
    expect((await s.call('GET', '/api/executions')).statusCode).toBe(200);
  });

  it('a statement over the timeout is 400 sql_error (57014); the next request works', async () => {
    const r = await run({ query: 'SELECT pg_sleep(5)' });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details.code).toBe('57014');
    expect((await run({ query: 'SELECT 2 AS two' })).json().result).toEqual([{ two: 2 }]);
  });

  it('missing query: 400; without the token: 401', async () => {
    const r = await run({ schema: 'x' });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details[0].field).toBe('query');
    expect((await run({ query: 'SELECT 1' }, {})).statusCode).toBe(401);
  });

  it('off by default: 403 sql_api_disabled; on without a token: 403 sql_api_requires_token', async () => {
    const off = await buildApp(s.core.deps, {});
    const open = await buildApp({ ...s.core.deps, sql }, { sqlApi: true });
    try {
      const r = await off.inject({ method: 'POST', url: '/api/postgres/execute', payload: { query: 'SELECT 1' } });
      expect(r.statusCode).toBe(403);
      expect(r.json().error).toMatchObject({ code: 'sql_api_disabled', message: expect.stringContaining('PLAYFLOW_SQL_API=off') });
      const o = await open.inject({ method: 'POST', url: '/api/postgres/execute', payload: { query: 'SELECT 1' } });
      expect(o.statusCode).toBe(403);
      expect(o.json().error.code).toBe('sql_api_requires_token');
    } finally {
      await off.close();
      await open.close();
    }
  });
});

describe('documentation', () => {
  it('the OpenAPI document lists every route with its methods', async () => {
    const doc = (await s.call('GET', '/docs/json')).json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    const declared = listRoutes(s.app).filter((r) => !r.hidden && r.method !== 'HEAD');
    expect(declared.length).toBeGreaterThan(20);
    for (const r of declared) {
      const path = r.url.replace(/:([A-Za-z_]+)/g, '{$1}').replace('*', '{path}');
      expect(doc.paths[path]?.[r.method.toLowerCase()], `${r.method} ${r.url} in /docs/json`).toBeDefined();
    }
    for (const p of ['/api/catalog/playbook', '/api/catalog/playbook/{path}', '/api/run/playbook', '/api/v2/execute',
      '/api/execution/{id}', '/api/events/{id}', '/api/v2/events', '/api/postgres/execute', '/health']) {
      expect(doc.paths[p], p).toBeDefined();
    }
    // Error answers are documented with the envelope.
    expect(JSON.stringify(doc.paths['/api/catalog/playbook'].post.responses['422'])).toContain('ErrorBody');
    expect(doc.paths['/health'].get.security).toEqual([]);
  });

  it('/docs serves Swagger UI and /redoc a ReDoc page on the same document', async () => {
    const ui = await s.call('GET', '/docs/');
    expect(ui.statusCode).toBe(200);
    expect(ui.body).toContain('swagger');
    const redoc = await s.call('GET', '/redoc');
    expect(redoc.statusCode).toBe(200);
    expect(redoc.headers['content-type']).toContain('text/html');
    expect(redoc.body).toContain('spec-url="docs/json"');
  });
});

describe('error envelope', () => {
  it('unknown route: 404 not_found; every answer carries x-request-id', async () => {
    const r = await s.call('GET', '/api/nothing-here');
    expect(r.statusCode).toBe(404);
    expect(r.json()).toEqual({ error: { code: 'not_found', message: 'no route GET /api/nothing-here' } });
    expect(r.headers['x-request-id']).toBeTruthy();
    const mine = await s.call('GET', '/health', undefined, { 'x-request-id': 'abc-1' });
    expect(mine.headers['x-request-id']).toBe('abc-1');
  });

  it('a malformed URL is 400 in the envelope; a __proto__ key in a body is data and pollutes nothing', async () => {
    const url = await s.call('GET', '/api/catalog/playbook/%');
    expect(url.statusCode).toBe(400);
    expect(url.json().error.code).toBe('bad_request');
    const proto = await s.call('POST', '/api/catalog/playbook', '{"content": "x", "__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}');
    expect(proto.statusCode).toBe(422); // refused for its content ("x" is no playbook), not for a key
    expect(proto.json().error.code).not.toBe('invalid_json');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a real fault (database gone) is 500 internal_error without leaking internals; /health says degraded (503)', async () => {
    const db = await createTestDatabase('pfhttp');
    const core = await createServerCore({ databaseUrl: db.url, brokerUrl: 'memory', serverUrl: 'http://x', sweeper: false, poolSize: 2 });
    const app = await buildApp(core.deps);
    try {
      await app.inject({ method: 'POST', url: '/api/catalog/playbook', payload: { content: simplePlaybook('f/one') } });
      await core.db.close();
      const r = await app.inject({ method: 'GET', url: '/api/execution/1' });
      expect(r.statusCode).toBe(500);
      expect(r.json().error).toMatchObject({ code: 'internal_error', message: 'internal server error; see the server log' });
      expect(r.body).not.toMatch(/pool|pg|stack/i);
      const h = await app.inject({ method: 'GET', url: '/health' });
      expect(h.statusCode).toBe(503);
      expect(h.json()).toMatchObject({ status: 'degraded', checks: { database: { status: 'error' } } });
    } finally {
      await app.close();
      await core.close().catch(() => {});
      await db.drop();
    }
  });
});
