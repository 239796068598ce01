/**
 * Bad input over the whole API of a real server (startServer: core, credentials, keychain, vars,
 * SQL API on, token): every request with a bad value is a 4xx naming the field, unknown
 * references are 404, and a schema-driven fuzz over every route of the OpenAPI document
 * (/docs/json) never gets a 5xx and changes no table.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../common/logger.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { simplePlaybook } from './helpers.js';

const TOKEN = 'hardening-token';
let server: RunningServer;
let db: TestDatabase;
let executionId: string;
let catalogId: string;

interface Answer {
  status: number;
  json: any;
}

async function call(method: string, url: string, body?: unknown, raw = false): Promise<Answer> {
  const r = await server.app.inject({
    method: method as 'GET',
    url,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    payload: body === undefined ? undefined : raw ? (body as string) : JSON.stringify(body),
  });
  let json: unknown;
  try {
    json = r.body ? JSON.parse(r.body) : null;
  } catch {
    json = r.body;
  }
  return { status: r.statusCode, json };
}

/** A digest of every row of every table: equal before and after means nothing was written. */
async function tablesDigest(): Promise<Record<string, string>> {
  const pool = server.core.deps.db.pool;
  const { rows } = await pool.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`);
  const out: Record<string, string> = {};
  for (const { tablename } of rows) {
    const r = await pool.query(`SELECT count(*)::int AS n, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS h FROM "${tablename}" t`);
    out[tablename] = `${r.rows[0].n}:${r.rows[0].h}`;
  }
  return out;
}

/** JSON text of a value nested `depth` levels (built as text: stringifying it would need a deep stack). */
function nestedText(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

beforeAll(async () => {
  db = await createTestDatabase('pfharden');
  const config = {
    ...loadConfig({
      DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', PLAYFLOW_API_TOKEN: TOKEN,
      PLAYFLOW_SQL_API: 'on', PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    }),
    // nothing in the background writes to the tables while the fuzz compares them
    sweeper: false,
  };
  server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'silent' }) });
  const reg = await call('POST', '/api/catalog/playbook', { content: simplePlaybook('harden/one') });
  expect(reg.status).toBe(201);
  catalogId = reg.json.catalog_id;
  const run = await call('POST', '/api/run/playbook', { path: 'harden/one', payload: { a: 1 } });
  expect(run.status).toBe(201);
  executionId = run.json.execution_id;
  expect((await call('POST', '/api/credentials', { name: 'cred', type: 'api_key', data: { api_key: 'k' } })).status).toBe(201);
  expect((await call('POST', `/api/keychain/${catalogId}/tok`, { token_data: { t: 1 }, ttl_seconds: 60 })).status).toBe(200);
  expect((await call('POST', `/api/vars/${executionId}`, { variables: { v: 1 } })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await db?.drop();
});

describe('bad values are 400 naming the field', () => {
  it('a NUL character in a value, a key, a path parameter or a query parameter', async () => {
    const cases: Array<[string, string, unknown, string]> = [
      ['POST', '/api/run/playbook', { path: 'harden/one', payload: { a: 'x\u0000y' } }, 'payload.a'],
      ['POST', '/api/run/playbook', { path: 'harden/one', payload: { 'k\u0000': 1 } }, 'payload.k\\u0000'],
      ['POST', `/api/vars/${executionId}`, { variables: { 'n\u0000': 1 } }, 'variables.n\\u0000'],
      ['POST', `/api/vars/${executionId}`, { variables: { n: ['\u0000'] } }, 'variables.n[0]'],
      ['POST', '/api/credentials', { name: 'c\u0000', type: 'api_key', data: { api_key: 'k' } }, 'name'],
      ['POST', '/api/postgres/execute', { query: 'SELECT 1\u0000' }, 'query'],
      ['GET', '/api/credentials/a%00b', undefined, 'identifier'],
      ['GET', '/api/catalog/playbooks?prefix=a%00', undefined, 'prefix'],
    ];
    for (const [method, url, body, field] of cases) {
      const r = await call(method, url, body);
      expect(r.status, `${method} ${url}`).toBe(400);
      expect(r.json.error.message, `${method} ${url}`).toContain(`'${field}'`);
      expect(r.json.error.message).toContain('NUL');
    }
  });

  it('numbers out of range and bodies nested too deep', async () => {
    for (const ttl of [1e15, 1e20]) {
      const r = await call('POST', `/api/keychain/${catalogId}/big`, { token_data: { t: 1 }, ttl_seconds: ttl });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toContain('ttl_seconds');
    }
    const off = await call('GET', '/api/credentials?offset=1e99');
    expect(off.status).toBe(400);
    expect(off.json.error.message).toContain('offset');
    const deep = await call('POST', '/api/run/playbook', `{"path": "harden/one", "payload": ${nestedText(5000)}}`, true);
    expect(deep.status).toBe(400);
    expect(deep.json.error.message).toMatch(/payload(\.a)+' is nested deeper than 64 levels/);
  });

  it('catalog paths and credential names are validated, never rewritten', async () => {
    const etc = await call('POST', '/api/catalog/playbook', { content: simplePlaybook('harden/two'), path: '/etc/passwd' });
    expect(etc.status).toBe(400);
    expect(etc.json.error.message).toContain("'/etc/passwd'");
    expect((await call('GET', '/api/catalog/playbook/etc/passwd')).status).toBe(404);
    for (const path of ['a/../b', '../x', 'a//b']) {
      expect((await call('POST', '/api/catalog/playbook', { content: simplePlaybook('harden/two'), path })).status, path).toBe(400);
      expect((await call('POST', '/api/run/playbook', { path })).status, path).toBe(400);
    }
    for (const name of ['a/b', '..', '.', ' padded', 'back\\slash']) {
      const r = await call('POST', '/api/credentials', { name, type: 'api_key', data: { api_key: 'k' } });
      expect(r.status, name).toBe(400);
      expect(r.json.error.message, name).toContain("'name'");
    }
  });
});

describe('unknown references are 404', () => {
  it('vars of a missing execution, a keychain entry of a missing catalog id, deleting a missing keychain entry', async () => {
    const vars = await call('POST', '/api/vars/987654321', { variables: { v: 1 } });
    expect(vars.status).toBe(404);
    expect(vars.json.error.message).toContain('987654321');
    const kc = await call('POST', '/api/keychain/987654321/tok', { token_data: { t: 1 } });
    expect(kc.status).toBe(404);
    expect(kc.json.error.message).toContain('987654321');
    const del = await call('DELETE', `/api/keychain/${catalogId}/never-stored`);
    expect(del.status).toBe(404);
    const { rows } = await server.core.deps.db.pool.query(
      `SELECT (SELECT count(*)::int FROM vars WHERE execution_id = 987654321) AS v, (SELECT count(*)::int FROM keychain WHERE catalog_id = 987654321) AS k`);
    expect(rows[0]).toEqual({ v: 0, k: 0 });
  });

  it('reading the variables of a missing execution is a 404; of an existing one, 200', async () => {
    const missing = await call('GET', '/api/vars/987654321');
    expect(missing.status).toBe(404);
    expect(missing.json.error.message).toContain('987654321');
    const none = await call('GET', `/api/vars/${executionId}`);
    expect(none.status).toBe(200);
    expect(none.json).toMatchObject({ execution_id: executionId });
  });
});

// ---- the fuzz ---------------------------------------------------------------------------------

type Schema = Record<string, any>;

/** A plausible value for a schema (the base each bad request mutates one part of). */
function sample(s: Schema | undefined, doc: Schema, depth = 0): unknown {
  if (!s || depth > 4) return 'x';
  if (s.$ref) return sample(resolve(s.$ref, doc), doc, depth + 1);
  if (s.anyOf) return sample(s.anyOf[0], doc, depth + 1);
  if (s.oneOf) return sample(s.oneOf[0], doc, depth + 1);
  if (s.enum) return s.enum[0];
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return true;
    case 'array':
      return [sample(s.items, doc, depth + 1)];
    case 'object': {
      const o: Record<string, unknown> = {};
      for (const [k, v] of Object.entries<Schema>(s.properties ?? {})) o[k] = sample(v, doc, depth + 1);
      return o;
    }
    case 'string':
      return s.pattern?.includes('0-9') ? '1' : 'x';
    default:
      return 'x';
  }
}

function resolve(ref: string, doc: Schema): Schema {
  const name = ref.replace(/^#\/components\/schemas\//, '').replace(/#$/, '');
  return doc.components?.schemas?.[name] ?? {};
}

/** Values no field can take (NUL characters, numbers past any bound, nesting past the limit): each bad request carries one. */
const BAD_VALUES: unknown[] = ['\u0000', 'a\u0000b', 1e20, -1e20, 1e308, nested(200), { 'k\u0000': 1 }, ['\u0000']];
const BAD_SEGMENTS = ['%00', 'a%00b', '99999999999999999999999', '-1', '1e99', '..', '%2e%2e', 'x'.repeat(2000), '%ff'];
const BAD_QUERY = ['%00', '1e99', '-1e99', 'NaN', 'x'.repeat(5000), '99999999999999999999999'];

interface Probe {
  method: string;
  url: string;
  body?: unknown;
  raw?: boolean;
}

function probes(doc: Schema): Probe[] {
  const out: Probe[] = [];
  for (const [template, ops] of Object.entries<Record<string, Schema>>(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (!['get', 'post', 'put', 'delete', 'patch'].includes(method)) continue;
      const params: Schema[] = op.parameters ?? [];
      const pathParams = params.filter((p) => p.in === 'path').map((p) => p.name as string);
      const base = (over: Record<string, string> = {}) =>
        template.replace(/\{([^}]+)\}/g, (_m, name: string) => over[name] ?? (name === 'path' || name === '*' ? 'harden/one' : /id$/.test(name) ? '1' : 'x'));
      const bodySchema = op.requestBody?.content?.['application/json']?.schema as Schema | undefined;
      const body = bodySchema ? sample(bodySchema, doc) : undefined;
      const M = method.toUpperCase();
      // path parameters
      for (const name of pathParams) for (const seg of BAD_SEGMENTS) out.push({ method: M, url: base({ [name]: seg }), body });
      // query parameters
      for (const q of params.filter((p) => p.in === 'query')) {
        for (const v of BAD_QUERY) out.push({ method: M, url: `${base()}?${q.name}=${v}`, body });
      }
      if (bodySchema) {
        // each field of the body in turn, then the whole body
        const fields = Object.keys((bodySchema.$ref ? resolve(bodySchema.$ref, doc) : bodySchema).properties ?? {});
        for (const f of fields) for (const v of BAD_VALUES) out.push({ method: M, url: base(), body: { ...(body as object), [f]: v } });
        for (const v of [[], 'text', 1e20, { ...(body as object), 'k\u0000': 1 }]) out.push({ method: M, url: base(), body: v });
        out.push({ method: M, url: base(), body: nestedText(5000), raw: true });
        for (const f of fields.slice(0, 3)) out.push({ method: M, url: base(), body: JSON.stringify({ ...(body as object), [f]: 0 }).replace('0}', `${nestedText(5000)}}`), raw: true });
        out.push({ method: M, url: base(), body: '{"a": ', raw: true });
      }
    }
  }
  return out;
}

describe('schema-driven fuzz over /docs/json', () => {
  it('no bad request over any route gets a 5xx or changes a table', async () => {
    const doc = (await call('GET', '/docs/json')).json;
    expect(Object.keys(doc.paths).length).toBeGreaterThan(25);
    const list = probes(doc);
    expect(list.length).toBeGreaterThan(700);
    const before = await tablesDigest();
    const faults: string[] = [];
    const seen = new Set<string>();
    for (const p of list) {
      const r = await call(p.method, p.url, p.body, p.raw);
      seen.add(`${p.method} ${p.url.split('?')[0]}`);
      if (r.status >= 500) faults.push(`${p.method} ${p.url.slice(0, 120)} ${JSON.stringify(p.body)?.slice(0, 120)} → ${r.status} ${JSON.stringify(r.json).slice(0, 200)}`);
    }
    expect(faults).toEqual([]);
    expect(await tablesDigest()).toEqual(before);
    // the server still answers normally
    expect((await call('GET', `/api/execution/${executionId}`)).status).toBe(200);
  }, 300_000);
});
