import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type SecretsHarness } from '../../test/helpers/secrets.js';
import { createSecretsServices } from './index.js';

let h: SecretsHarness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

const post = (body: object) => h.app.inject({ method: 'POST', url: '/api/credentials', payload: body });
const get = (url: string) => h.app.inject({ method: 'GET', url });

const pgSchema = {
  fields: ['db_host', 'db_port', 'db_user', 'db_password', 'db_name'],
  required: ['db_host', 'db_user', 'db_password'],
  types: { db_host: 'string', db_port: 'integer', db_user: 'string', db_password: 'string', db_name: 'string' },
  description: 'postgres login',
};

describe('POST /api/credentials', () => {
  it('creates (201) then updates by name (200), keeping the id', async () => {
    const a = await post({ name: 'pg_local', type: 'postgres', description: 'local db', tags: ['db', 'dev'], meta: { owner: 'data' },
      data: { db_host: 'localhost', db_port: 5432, db_user: 'u', db_password: 'CANARY-pg-secret', db_name: 'd' }, schema: pgSchema });
    expect(a.statusCode).toBe(201);
    const created = a.json();
    expect(created).toMatchObject({ name: 'pg_local', type: 'postgres', description: 'local db', tags: ['db', 'dev'], meta: { owner: 'data' }, schema: pgSchema });
    expect(typeof created.id).toBe('number');
    expect(created.data).toBeUndefined();
    expect(a.body).not.toContain('CANARY');
    const b = await post({ name: 'pg_local', type: 'postgres', data: { db_host: 'h2', db_user: 'u', db_password: 'CANARY-pg-pass-p2' } });
    expect(b.statusCode).toBe(200);
    expect(b.json().id).toBe(created.id);
    expect(new Date(b.json().updated_at).getTime()).toBeGreaterThanOrEqual(new Date(created.updated_at).getTime());
  });

  it('stores data encrypted: the row holds no plain text', async () => {
    await post({ name: 'enc', type: 'api_key', data: { api_key: 'CANARY-api-key-123' } });
    const { rows } = await h.db.pool.query(`SELECT * FROM credential WHERE name = 'enc'`);
    expect(JSON.stringify(rows[0])).not.toContain('CANARY');
    expect(rows[0].data_enc).toMatch(/^pf1:[0-9a-f]{8}:/);
    expect(rows[0].key_id).toBe(h.cipher.current.id);
  });

  it('rule 1: each missing required field', async () => {
    const r = await post({ name: 'v1', type: 'postgres', data: { db_port: 5432 }, schema: pgSchema });
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({
      message: 'Credential validation failed',
      errors: ['Missing required field: db_host', 'Missing required field: db_user', 'Missing required field: db_password'],
    });
    expect(r.json().error.code).toBe('validation_failed');
  });

  it('rule 2: each present field with the wrong type', async () => {
    const r = await post({ name: 'v2', type: 'postgres', schema: pgSchema,
      data: { db_host: 'h', db_user: 'u', db_password: 'p', db_port: '5432', db_name: 7 } });
    expect(r.statusCode).toBe(400);
    expect(r.json().errors).toEqual(["Field 'db_port' must be integer, got string", "Field 'db_name' must be string, got integer"]);
  });

  it('rule 3: unexpected fields listed in one message, only when fields is non-empty', async () => {
    const r = await post({ name: 'v3', type: 'postgres', schema: pgSchema,
      data: { db_host: 'h', db_user: 'u', db_password: 'p', sslmode: 'require', extra: 1 } });
    expect(r.statusCode).toBe(400);
    expect(r.json().errors).toEqual(['Unexpected fields: sslmode, extra']);
    const ok = await post({ name: 'v3b', type: 'custom', schema: { fields: [], required: ['a'] }, data: { a: 1, anything: true } });
    expect(ok.statusCode).toBe(201);
  });

  it('rules apply in order and all errors are reported', async () => {
    const r = await post({ name: 'v4', type: 'basic', data: { password: 5, other: 'x' },
      schema: { fields: ['username', 'password'], required: ['username'], types: { password: 'string' } } });
    expect(r.json().errors).toEqual(['Missing required field: username', "Field 'password' must be string, got integer", 'Unexpected fields: other']);
    const rows = await h.db.pool.query(`SELECT 1 FROM credential WHERE name = 'v4'`);
    expect(rows.rowCount).toBe(0);
  });

  it('number accepts integers; array, object, boolean, null are named', async () => {
    const r = await post({ name: 'v5', type: 'custom', data: { n: 3, a: {}, o: [], b: null },
      schema: { types: { n: 'number', a: 'array', o: 'object', b: 'boolean' } } });
    expect(r.json().errors).toEqual(["Field 'a' must be array, got object", "Field 'o' must be object, got array", "Field 'b' must be boolean, got null"]);
  });

  it('credentials without a schema work normally', async () => {
    const r = await post({ name: 'noschema', type: 'bearer', data: { access_token: 'CANARY-tok', token_type: 'Bearer', expires_in: 3600 } });
    expect(r.statusCode).toBe(201);
    expect(r.json().schema).toBeNull();
  });

  it('rejects an unknown type, missing data, a malformed schema', async () => {
    expect((await post({ name: 'x', type: 'kerberos', data: {} })).statusCode).toBe(400);
    expect((await post({ name: 'x', type: 'custom' })).statusCode).toBe(400);
    const bad = await post({ name: 'x', type: 'custom', data: {}, schema: { types: { a: 'str' } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('bad_request');
  });

  it('an empty or an over-long name is told so, not that it has a forbidden character', async () => {
    const empty = await post({ name: '', type: 'custom', data: {} });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error.message).toBe("body field 'name' must not be empty");
    const long = await post({ name: 'n'.repeat(256), type: 'custom', data: {} });
    expect(long.statusCode).toBe(400);
    expect(long.json().error.message).toBe("body field 'name' must be at most 255 characters");
    const slash = await post({ name: 'a/b', type: 'custom', data: {} });
    expect(slash.json().error.message).toBe("body field 'name' must be a name without '/', '\\', control characters or surrounding spaces, and not '.' or '..'");
  });

  it('the name limit counts characters, not UTF-16 units: 255 emoji are a name, 256 are not', async () => {
    const ok = await post({ name: '😀'.repeat(255), type: 'custom', data: { v: 1 } });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().name).toBe('😀'.repeat(255));
    const long = await post({ name: '😀'.repeat(256), type: 'custom', data: {} });
    expect(long.statusCode).toBe(400);
    expect(long.json().error.message).toContain('at most 255 characters');
  });
});

describe('GET /api/credentials', () => {
  beforeAll(async () => {
    for (let i = 0; i < 5; i++) await post({ name: `listed_${i}`, type: i % 2 ? 'oauth2' : 'basic', tags: i < 2 ? ['team-a'] : ['team-b'],
      description: i === 3 ? 'Warehouse login for reports' : undefined, data: { username: 'u', password: `CANARY-${i}` } });
  });

  it('lists metadata, never data', async () => {
    const r = await get('/api/credentials?limit=1000');
    expect(r.statusCode).toBe(200);
    expect(r.body).not.toContain('CANARY');
    expect(r.json().credentials.every((c: Record<string, unknown>) => !('data' in c))).toBe(true);
    expect(r.json().total).toBe(r.json().credentials.length);
    expect(r.json().count).toBe(r.json().credentials.length);
  });

  it('filters by type, tag, text on name and description; pages', async () => {
    expect((await get('/api/credentials?type=oauth2')).json().credentials.map((c: { name: string }) => c.name)).toEqual(['listed_1', 'listed_3']);
    expect((await get('/api/credentials?tag=team-a')).json().credentials.map((c: { name: string }) => c.name)).toEqual(['listed_0', 'listed_1']);
    expect((await get('/api/credentials?q=warehouse')).json().credentials.map((c: { name: string }) => c.name)).toEqual(['listed_3']);
    expect((await get('/api/credentials?q=LISTED_')).json().total).toBe(5);
    const page = (await get('/api/credentials?q=listed&limit=2&offset=2')).json();
    expect(page).toMatchObject({ count: 2, total: 5, limit: 2, offset: 2 });
    expect(page.credentials.map((c: { name: string }) => c.name)).toEqual(['listed_2', 'listed_3']);
    expect((await get('/api/credentials?q=%25')).json().total).toBe(0);
  });
});

describe('GET /api/credentials/{identifier}', () => {
  it('by name or id; metadata only unless include_data=true', async () => {
    const byName = await get('/api/credentials/noschema');
    expect(byName.statusCode).toBe(200);
    expect(byName.json().data).toBeUndefined();
    const byId = await get(`/api/credentials/${byName.json().id}`);
    expect(byId.json().name).toBe('noschema');
    const withData = await get('/api/credentials/noschema?include_data=true');
    expect(withData.json().data).toEqual({ access_token: 'CANARY-tok', token_type: 'Bearer', expires_in: 3600 });
    expect((await get('/api/credentials/nope')).statusCode).toBe(404);
  });

  it('a bad execution_id is a 400 with the id wording, not an anyOf', async () => {
    const r = await get('/api/credentials/noschema?include_data=true&execution_id=abc');
    expect(r.statusCode).toBe(400);
    expect(r.json().error.message).toBe("query parameter field 'execution_id' must be a decimal integer id");
  });

  it('include_data fills the authentication cache: global vs execution scope, repeat refreshes and extends', async () => {
    const g = (await get('/api/credentials/pg_local?include_data=true')).json();
    expect(g.cache).toMatchObject({ cache_key: 'pg_local:global', cache_type: 'secret', scope_type: 'global', execution_id: null, access_count: 1 });
    const exp1 = new Date(g.cache.expires_at).getTime();
    expect(exp1 - Date.now()).toBeGreaterThan(3500_000);
    expect(exp1 - Date.now()).toBeLessThanOrEqual(3600_000);

    const e1 = (await get('/api/credentials/pg_local?include_data=true&execution_id=9001&parent_execution_id=9000')).json();
    expect(e1.cache).toMatchObject({ cache_key: 'pg_local:execution:9001', scope_type: 'execution', execution_id: '9001', access_count: 1 });
    await new Promise((r) => setTimeout(r, 20));
    const e2 = (await get('/api/credentials/pg_local?include_data=true&execution_id=9001')).json();
    expect(e2.cache.access_count).toBe(2);
    expect(new Date(e2.cache.expires_at).getTime()).toBeGreaterThan(new Date(e1.cache.expires_at).getTime());
    expect(new Date(e2.cache.accessed_at).getTime()).toBeGreaterThan(new Date(e1.cache.accessed_at).getTime());

    const tok = (await get('/api/credentials/noschema?include_data=true')).json();
    expect(tok.cache.cache_type).toBe('token');

    const { rows } = await h.db.pool.query(`SELECT * FROM auth_cache WHERE cache_key = 'pg_local:execution:9001'`);
    expect(rows[0]).toMatchObject({ parent_execution_id: '9000', access_count: 2 });
    expect(JSON.stringify(rows[0])).not.toContain('CANARY-pg-pass-p2'); // a short value could occur in base64 by chance
    expect(h.cipher.decrypt(rows[0].data_enc, 'auth_cache')).toMatchObject({ db_host: 'h2' });
    // metadata reads do not touch the cache
    await get('/api/credentials/pg_local');
    expect((await h.db.pool.query(`SELECT access_count FROM auth_cache WHERE cache_key = 'pg_local:global'`)).rows[0].access_count).toBe(1);
  });

  it('an update drops cached copies of the old data', async () => {
    await get('/api/credentials/enc?include_data=true');
    // the read cached a copy: there is something for the update to drop
    expect((await h.db.pool.query(`SELECT 1 FROM auth_cache WHERE credential_name = 'enc'`)).rowCount).toBe(1);
    await post({ name: 'enc', type: 'api_key', data: { api_key: 'CANARY-rotated' } });
    expect((await h.db.pool.query(`SELECT 1 FROM auth_cache WHERE credential_name = 'enc'`)).rowCount).toBe(0);
  });
});

describe('worker read and delete', () => {
  it('GET /api/credential/{key} returns the read shape with decrypted data', async () => {
    const r = await get('/api/credential/pg_local');
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(Object.keys(body).sort()).toEqual(['created_at', 'credential_id', 'credential_key', 'credential_type', 'data', 'updated_at']);
    expect(body).toMatchObject({ credential_key: 'pg_local', credential_type: 'postgres', data: { db_host: 'h2', db_user: 'u', db_password: 'CANARY-pg-pass-p2' } });
    expect(typeof body.credential_id).toBe('number');
    expect(new Date(body.created_at).toISOString()).toBe(body.created_at);
    expect((await get('/api/credential/missing')).json()).toEqual({ error: { code: 'not_found', message: "credential 'missing' not found" } });
  });

  it('DELETE by name or id; cascades the authentication cache', async () => {
    const del = await h.app.inject({ method: 'DELETE', url: '/api/credentials/pg_local' });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toMatchObject({ name: 'pg_local', deleted: true });
    expect((await get('/api/credentials/pg_local')).statusCode).toBe(404);
    expect((await h.db.pool.query(`SELECT 1 FROM auth_cache WHERE credential_name = 'pg_local'`)).rowCount).toBe(0);
    const id = (await get('/api/credentials/noschema')).json().id;
    expect((await h.app.inject({ method: 'DELETE', url: `/api/credentials/${id}` })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'DELETE', url: `/api/credentials/${id}` })).statusCode).toBe(404);
  });
});

describe('a name of digits is a name', () => {
  it('the worker read resolves its key by name only; the management API prefers a name to an id', async () => {
    const foo = (await post({ name: 'digits_foo', type: 'api_key', data: { api_key: 'CANARY-foo' } })).json();
    // a credential whose name is foo's id
    const named = (await post({ name: String(foo.id), type: 'api_key', data: { api_key: 'CANARY-named' } })).json();
    expect(named.id).not.toBe(foo.id);

    const read = await get(`/api/credential/${foo.id}`);
    expect(read.json()).toMatchObject({ credential_id: named.id, credential_key: String(foo.id), data: { api_key: 'CANARY-named' } });
    // an id is no credential key
    expect((await get(`/api/credential/${named.id}`)).statusCode).toBe(404);

    expect((await get(`/api/credentials/${foo.id}`)).json()).toMatchObject({ id: named.id, name: String(foo.id) });
    // no credential is named like this id: found by id
    expect((await get(`/api/credentials/${named.id}`)).json()).toMatchObject({ id: named.id });
    expect((await get(`/api/credentials/${foo.id}?include_data=true`)).json().data).toEqual({ api_key: 'CANARY-named' });

    // DELETE takes the credential of that name, never foo
    const del = await h.app.inject({ method: 'DELETE', url: `/api/credentials/${foo.id}` });
    expect(del.json()).toMatchObject({ id: named.id, name: String(foo.id), deleted: true });
    expect((await get('/api/credentials/digits_foo')).statusCode).toBe(200);
    // with the name gone, the identifier is foo's id again
    expect((await get(`/api/credentials/${foo.id}`)).json().name).toBe('digits_foo');
  });
});

describe('OpenAPI', () => {
  it('publishes every credentials, keychain and vars endpoint with its tag', async () => {
    const doc = (await get('/docs/json')).json();
    const paths = doc.paths as Record<string, Record<string, { tags?: string[] }>>;
    const expected: Array<[string, string[], string]> = [
      ['/api/credentials', ['get', 'post'], 'credentials'],
      ['/api/credentials/{identifier}', ['get', 'delete'], 'credentials'],
      ['/api/credential/{credential_key}', ['get'], 'credentials'],
      ['/api/keychain/{catalog_id}/{keychain_name}', ['get', 'post', 'delete'], 'keychain'],
      ['/api/keychain/catalog/{catalog_id}', ['get'], 'keychain'],
      ['/api/vars/{execution_id}', ['get', 'post'], 'vars'],
      ['/api/vars/{execution_id}/{var_name}', ['get', 'delete'], 'vars'],
    ];
    for (const [path, methods, tag] of expected) {
      expect(Object.keys(paths[path] ?? {}).sort(), path).toEqual([...methods].sort());
      for (const m of methods) expect(paths[path][m].tags).toEqual([tag]);
    }
  });
});

describe('authentication cache lifetime', () => {
  it('is configurable with PLAYFLOW_AUTH_CACHE_TTL_SECONDS', async () => {
    const svc = createSecretsServices(h.db, { cipher: h.cipher, env: { PLAYFLOW_AUTH_CACHE_TTL_SECONDS: '60' } }).deps.credentials;
    await svc.upsert({ name: 'ttl60', type: 'basic', data: { username: 'u', password: 'p' } });
    const got = await svc.get('ttl60', { include_data: true });
    const left = new Date(got.cache!.expires_at).getTime() - Date.now();
    expect(left).toBeGreaterThan(50_000);
    expect(left).toBeLessThanOrEqual(60_000);
    expect(() => createSecretsServices(h.db, { cipher: h.cipher, env: { PLAYFLOW_AUTH_CACHE_TTL_SECONDS: 'soon' } }))
      .toThrow('PLAYFLOW_AUTH_CACHE_TTL_SECONDS must be a positive integer (seconds), got "soon"');
  });
});
