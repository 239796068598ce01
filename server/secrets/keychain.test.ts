import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type SecretsHarness } from '../../test/helpers/secrets.js';
import { createSecretsHooks } from './hooks.js';
import { sweepExpired } from './sweep.js';
import { createSecretsServices } from './index.js';
import { silentLogger } from '../../common/logger.js';

let h: SecretsHarness;
beforeAll(async () => {
  // executions 700 (root) → 701 (child) → 702 (grandchild): shared scope maps to the root
  const roots: Record<string, string> = { '700': '700', '701': '700', '702': '700' };
  h = await createHarness({ keychain: { resolveRoot: async (id) => roots[id] ?? null } });
});
afterAll(async () => {
  await h?.close();
});

const url = (cat: string | number, name: string, q = '') => `/api/keychain/${cat}/${name}${q ? `?${q}` : ''}`;
const set = (cat: number, name: string, body: object) => h.app.inject({ method: 'POST', url: url(cat, name), payload: body });
const get = async (cat: number, name: string, q = '') => (await h.app.inject({ method: 'GET', url: url(cat, name, q) })).json();
const expireNow = (cacheKey: string) => h.db.pool.query(`UPDATE keychain SET expires_at = now() - interval '1 second' WHERE cache_key = $1`, [cacheKey]);

describe('keychain state table', () => {
  it('(none) → POST set → valid, expires_at from ttl_seconds; response shape and message', async () => {
    const r = await set(1, 'api_token', { token_data: { access_token: 'CANARY-kc-1', token_type: 'Bearer' }, credential_type: 'oauth2', cache_type: 'token', scope_type: 'global', ttl_seconds: 120 });
    expect(r.statusCode).toBe(200);
    const b = r.json();
    expect(Object.keys(b).sort()).toEqual(['auto_renew', 'cache_key', 'catalog_id', 'expires_at', 'keychain_name', 'message', 'status', 'ttl_seconds']);
    expect(b).toMatchObject({ status: 'success', keychain_name: 'api_token', catalog_id: '1', cache_key: 'api_token:1:global', ttl_seconds: 120, auto_renew: false });
    expect(b.message).toBe("Keychain entry 'api_token' stored with TTL of 120 seconds");
    const left = new Date(b.expires_at).getTime() - Date.now();
    expect(left).toBeGreaterThan(110_000);
    expect(left).toBeLessThanOrEqual(121_000);
  });

  it('POST set with expires_at', async () => {
    const at = new Date(Date.now() + 600_000).toISOString();
    const b = (await set(1, 'abs', { token_data: { v: 1 }, expires_at: at })).json();
    expect(b.expires_at).toBe(at);
    expect(b.ttl_seconds).toBeGreaterThan(590);
    expect(b.ttl_seconds).toBeLessThanOrEqual(600);
  });

  it('expires_at is an ISO 8601 timestamp, UTC when it names no zone (not the server\'s zone)', async () => {
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      for (const [given, stored] of [
        ['2030-01-01T00:00:00', '2030-01-01T00:00:00.000Z'],
        ['2030-01-01 00:00', '2030-01-01T00:00:00.000Z'],
        ['2030-01-01', '2030-01-01T00:00:00.000Z'],
        ['2030-01-01T02:00:00.5+02:00', '2030-01-01T00:00:00.500Z'],
        ['2029-12-31T19:00:00-0500', '2030-01-01T00:00:00.000Z'],
      ]) {
        const r = await set(1, 'iso_at', { token_data: { v: 1 }, expires_at: given });
        expect(r.statusCode, given).toBe(200);
        expect(r.json().expires_at, given).toBe(stored);
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it('an expires_at that is not an ISO 8601 timestamp is 400 naming the field, and stores nothing', async () => {
    for (const given of ['5', 'foo 2020', '2030-02-30T00:00:00Z', '2030-01-01T24:00:00Z', '2030-01-01T00:00:00+25:00', 'tomorrow', 1893456000000]) {
      const r = await set(1, 'bad_at', { token_data: { v: 1 }, expires_at: given });
      expect(r.statusCode, String(given)).toBe(400);
      expect(r.json().error.message, String(given)).toMatch(/expires_at/);
    }
    expect(await get(1, 'bad_at')).toMatchObject({ status: 'not_found' });
  });

  it('valid → GET → valid: success body, access_count incremented, accessed_at updated', async () => {
    const a = await get(1, 'api_token');
    expect(Object.keys(a).sort()).toEqual(['access_count', 'accessed_at', 'auto_renew', 'cache_key', 'cache_type', 'catalog_id', 'credential_type',
      'expired', 'expires_at', 'keychain_name', 'scope_type', 'status', 'token_data', 'ttl_seconds'].sort());
    expect(a).toMatchObject({ status: 'success', keychain_name: 'api_token', catalog_id: '1', cache_key: 'api_token:1:global',
      token_data: { access_token: 'CANARY-kc-1', token_type: 'Bearer' }, credential_type: 'oauth2', cache_type: 'token', scope_type: 'global',
      access_count: 1, auto_renew: false, expired: false });
    expect(a.ttl_seconds).toBeGreaterThan(100);
    expect(a.ttl_seconds).toBeLessThanOrEqual(120);
    await new Promise((r) => setTimeout(r, 15));
    const b = await get(1, 'api_token', 'scope_type=global');
    expect(b.access_count).toBe(2);
    expect(new Date(b.accessed_at).getTime()).toBeGreaterThan(new Date(a.accessed_at).getTime());
  });

  it('renew_config secrets (headers, data) are sealed with the token; the column keeps only the non-secret part', async () => {
    await set(1, 'sealed', { token_data: { access_token: 'CANARY-tok' }, auto_renew: true,
      renew_config: { endpoint: 'http://127.0.0.1:9/t', headers: { authorization: 'Basic CANARY-hdr' }, data: { client_secret: 'CANARY-cs' } } });
    const { rows } = await h.db.pool.query(`SELECT * FROM keychain WHERE cache_key = 'sealed:1:global'`);
    expect(JSON.stringify(rows[0])).not.toContain('CANARY');
    expect(rows[0].renew_config).toEqual({ endpoint: 'http://127.0.0.1:9/t', method: 'POST', token_field: 'access_token', ttl_field: 'expires_in' });
    await expireNow('sealed:1:global');
    expect((await get(1, 'sealed')).renew_config).toMatchObject({ headers: { authorization: 'Basic CANARY-hdr' }, data: { client_secret: 'CANARY-cs' } });
  });

  it('data is encrypted at rest', async () => {
    const { rows } = await h.db.pool.query(`SELECT * FROM keychain WHERE cache_key = 'api_token:1:global'`);
    expect(JSON.stringify(rows[0])).not.toContain('CANARY');
  });

  it('valid → time → expired; expired GET without auto_renew: status expired, no renew_config, not counted', async () => {
    await set(1, 'short', { token_data: { t: 'x' }, ttl_seconds: 1 });
    await h.db.pool.query(`UPDATE keychain SET expires_at = now() - interval '1 ms' WHERE cache_key = 'short:1:global'`);
    const e = await get(1, 'short');
    expect(e).toEqual({ status: 'expired', keychain_name: 'short', catalog_id: '1', cache_key: 'short:1:global', auto_renew: false, expired: true });
    const { rows } = await h.db.pool.query(`SELECT access_count FROM keychain WHERE cache_key = 'short:1:global'`);
    expect(rows[0].access_count).toBe(0);
    // ttl_seconds 0 is expired at once
    await set(1, 'zero', { token_data: { t: 'x' }, ttl_seconds: 0 });
    expect((await get(1, 'zero')).status).toBe('expired');
  });

  it('expired GET with auto_renew: renew_config with defaults filled in', async () => {
    const r = await set(1, 'renewable', { token_data: { access_token: 'old' }, ttl_seconds: 60, auto_renew: true,
      renew_config: { endpoint: 'http://127.0.0.1:9/token', data: { grant_type: 'client_credentials' } } });
    expect(r.json()).toMatchObject({ auto_renew: true });
    await expireNow('renewable:1:global');
    const e = await get(1, 'renewable');
    expect(e).toEqual({
      status: 'expired', keychain_name: 'renewable', catalog_id: '1', cache_key: 'renewable:1:global', auto_renew: true, expired: true,
      renew_config: { endpoint: 'http://127.0.0.1:9/token', method: 'POST', headers: {}, data: { grant_type: 'client_credentials' }, token_field: 'access_token', ttl_field: 'expires_in' },
    });
  });

  it('expired → renewal POST (fresh token_data, auto_renew, renew_config) → valid', async () => {
    const r = await set(1, 'renewable', { token_data: { access_token: 'fresh' }, ttl_seconds: 3600, auto_renew: true, cache_type: 'token',
      renew_config: { endpoint: 'http://127.0.0.1:9/token', method: 'post', token_field: 'tok', ttl_field: 'ttl' } });
    expect(r.json().ttl_seconds).toBe(3600);
    const v = await get(1, 'renewable');
    expect(v).toMatchObject({ status: 'success', token_data: { access_token: 'fresh' }, auto_renew: true, expired: false });
    const { rows } = await h.db.pool.query(`SELECT renew_config FROM keychain WHERE cache_key = 'renewable:1:global'`);
    expect(rows[0].renew_config).toEqual({ endpoint: 'http://127.0.0.1:9/token', method: 'POST', token_field: 'tok', ttl_field: 'ttl' });
  });

  it('auto_renew without renew_config.endpoint is rejected', async () => {
    const r = await set(1, 'bad', { token_data: {}, auto_renew: true });
    expect(r.statusCode).toBe(400);
  });

  it('any → DELETE → removed; a second DELETE is 404 not_found', async () => {
    const d = await h.app.inject({ method: 'DELETE', url: url(1, 'abs') });
    expect(d.json()).toEqual({ status: 'success', message: "Keychain entry 'abs' deleted", keychain_name: 'abs', catalog_id: '1' });
    expect(await get(1, 'abs')).toEqual({ status: 'not_found', keychain_name: 'abs', catalog_id: '1', cache_key: 'abs:1:global' });
    const again = await h.app.inject({ method: 'DELETE', url: url(1, 'abs') });
    expect(again.statusCode).toBe(404);
    expect(again.json().error).toMatchObject({ code: 'not_found', message: "Keychain entry 'abs' not found" });
  });

  it('local → execution completes → removed (other executions\' entries stay)', async () => {
    await set(2, 'tok', { token_data: { a: 1 }, scope_type: 'local', execution_id: 501 });
    await set(2, 'tok', { token_data: { a: 2 }, scope_type: 'local', execution_id: '502' });
    const hooks = createSecretsHooks({ logger: silentLogger });
    await h.db.tx((c) => hooks.onExecutionTerminal(c, { execution_id: '501', root_execution_id: '500', catalog_id: '2' }));
    expect((await get(2, 'tok', 'scope_type=local&execution_id=501')).status).toBe('not_found');
    expect((await get(2, 'tok', 'scope_type=local&execution_id=502')).token_data).toEqual({ a: 2 });
  });

  it('shared → root completes → removed; a child completing does not remove it', async () => {
    const r = await set(3, 'tree', { token_data: { s: 1 }, scope_type: 'shared', execution_id: '701', parent_execution_id: '700' });
    expect(r.json().cache_key).toBe('tree:3:shared:700');
    expect((await get(3, 'tree', 'scope_type=shared&execution_id=702')).token_data).toEqual({ s: 1 });
    expect((await get(3, 'tree', 'scope_type=shared&execution_id=700')).cache_key).toBe('tree:3:shared:700');
    const hooks = createSecretsHooks();
    await h.db.tx((c) => hooks.onExecutionTerminal(c, { execution_id: '701', root_execution_id: '700', catalog_id: '3' }));
    expect((await get(3, 'tree', 'scope_type=shared&execution_id=700')).status).toBe('success');
    await h.db.tx((c) => hooks.onExecutionTerminal(c, { execution_id: '700', root_execution_id: '700', catalog_id: '3' }));
    expect((await get(3, 'tree', 'scope_type=shared&execution_id=700')).status).toBe('not_found');
  });

  it('global → TTL expiry → removed by sweepExpired (auto_renew entries kept for the renewal grace)', async () => {
    await set(4, 'g1', { token_data: { x: 1 } });
    await set(4, 'g2', { token_data: { x: 2 }, auto_renew: true, renew_config: { endpoint: 'http://x/t' } });
    await set(4, 'g3', { token_data: { x: 3 } });
    await expireNow('g1:4:global');
    await expireNow('g2:4:global');
    const n = await sweepExpired(h.db);
    expect(n.keychain).toBeGreaterThanOrEqual(1);
    expect((await get(4, 'g1')).status).toBe('not_found');
    expect((await get(4, 'g2')).status).toBe('expired');
    expect((await get(4, 'g3')).status).toBe('success');
    await sweepExpired(h.db.pool, { renewGraceSeconds: 0 });
    expect((await get(4, 'g2')).status).toBe('not_found');
  });
});

describe('scopes, defaults and validation', () => {
  it('cache_key formats and default TTLs: local 3600, global 86400, shared 86400', async () => {
    const l = (await set(5, 'k', { token_data: {}, scope_type: 'local', execution_id: 42 })).json();
    expect(l).toMatchObject({ cache_key: 'k:5:42', ttl_seconds: 3600 });
    const g = (await set(5, 'k', { token_data: {} })).json();
    expect(g).toMatchObject({ cache_key: 'k:5:global', ttl_seconds: 86400 });
    const s = (await set(5, 'k', { token_data: {}, scope_type: 'shared', execution_id: 43 })).json();
    expect(s).toMatchObject({ cache_key: 'k:5:shared:43', ttl_seconds: 86400 });
    const { rows } = await h.db.pool.query(`SELECT cache_key, scope_type, execution_id FROM keychain WHERE catalog_id = 5 ORDER BY cache_key`);
    expect(rows).toEqual([
      { cache_key: 'k:5:42', scope_type: 'local', execution_id: '42' },
      { cache_key: 'k:5:global', scope_type: 'global', execution_id: null },
      { cache_key: 'k:5:shared:43', scope_type: 'shared', execution_id: '43' },
    ]);
  });

  it('local is invisible to other executions and to the global scope', async () => {
    expect((await get(5, 'k', 'scope_type=local&execution_id=44')).status).toBe('not_found');
    expect((await get(5, 'k', 'scope_type=local&execution_id=42')).status).toBe('success');
  });

  it('local and shared need execution_id; bad scope_type and bad ids are 400', async () => {
    expect((await h.app.inject({ method: 'GET', url: url(5, 'k', 'scope_type=local') })).statusCode).toBe(400);
    expect((await set(5, 'k', { token_data: {}, scope_type: 'shared' })).statusCode).toBe(400);
    expect((await h.app.inject({ method: 'GET', url: url(5, 'k', 'scope_type=catalog') })).statusCode).toBe(400);
    expect((await h.app.inject({ method: 'GET', url: url('abc', 'k') })).statusCode).toBe(400);
    expect((await set(5, 'k', { credential_type: 'x' })).statusCode).toBe(400);
  });

  it('a bad execution_id is a 400 with the shared id wording, not an anyOf', async () => {
    const q = await h.app.inject({ method: 'GET', url: url(5, 'k', 'scope_type=local&execution_id=abc') });
    expect(q.statusCode).toBe(400);
    expect(q.json().error.message).toBe("query parameter field 'execution_id' must be a decimal integer id");
    const b = await set(5, 'k', { token_data: {}, scope_type: 'local', execution_id: 'abc' });
    expect(b.statusCode).toBe(400);
    expect(b.json().error.message).toBe("body field 'execution_id' must be an id: a decimal string or a non-negative integer, or null");
  });

  it('keychain_name length counts characters, not UTF-16 units', async () => {
    const name = '😀'.repeat(255);
    const r = await set(8, encodeURIComponent(name), { token_data: { v: 1 } });
    expect(r.statusCode).toBe(200);
    expect(r.json().keychain_name).toBe(name);
    expect((await get(8, encodeURIComponent(name))).status).toBe('success');
    expect((await set(8, encodeURIComponent('😀'.repeat(256)), { token_data: { v: 1 } })).statusCode).toBe(400);
  });

  it('schema: store rejects with the messages joined by commas; read only warns', async () => {
    const schema = { required: ['access_token'], types: { expires_in: 'integer' }, fields: ['access_token', 'expires_in'] };
    const bad = await set(6, 's', { token_data: { expires_in: '60', x: 1 }, schema });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toBe("Missing required field: access_token, Field 'expires_in' must be integer, got string, Unexpected fields: x");
    const ok = await set(6, 's', { token_data: { access_token: 'a', expires_in: 60 }, schema });
    expect(ok.statusCode).toBe(200);
    // the stored schema changes under the entry: reading still succeeds, with a warning
    await h.db.pool.query(`UPDATE keychain SET schema = '{"required": ["refresh_token"]}' WHERE cache_key = 's:6:global'`);
    h.warnings.length = 0;
    const r = await get(6, 's');
    expect(r.status).toBe('success');
    expect(h.warnings).toHaveLength(1);
    expect(JSON.stringify(h.warnings)).not.toContain('"a"');
    expect(h.warnings[0].obj).toMatchObject({ problems: ['Missing required field: refresh_token'] });
  });

  it('GET /api/keychain/catalog/{catalog_id} lists entries without data', async () => {
    await get(5, 'k', 'scope_type=local&execution_id=42');
    const r = (await h.app.inject({ method: 'GET', url: '/api/keychain/catalog/5' })).json();
    expect(r.status).toBe('success');
    expect(r.catalog_id).toBe('5');
    expect(r.count).toBe(3);
    expect(r.entries).toHaveLength(3);
    const local = r.entries.find((e: { cache_key: string }) => e.cache_key === 'k:5:42');
    expect(Object.keys(local).sort()).toEqual(['access_count', 'auto_renew', 'cache_key', 'credential_type', 'expires_at', 'keychain_name', 'scope_type']);
    expect(local).toMatchObject({ keychain_name: 'k', scope_type: 'local', credential_type: 'secret', auto_renew: false });
    expect(local.access_count).toBeGreaterThanOrEqual(2);
    expect((await h.app.inject({ method: 'GET', url: '/api/keychain/catalog/999' })).json()).toEqual({ status: 'success', catalog_id: '999', entries: [], count: 0 });
  });
});

describe('shared scope through the execution table', () => {
  it('a child execution id maps to its root (createSecretsServices wiring)', async () => {
    const { rows: [cat] } = await h.db.pool.query(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('t/x', 1, '', '{}', 'h') RETURNING catalog_id::text AS id`);
    const { rows: [root] } = await h.db.pool.query(`INSERT INTO execution (catalog_id, path, version, root_execution_id) VALUES ($1, 't/x', 1, 0) RETURNING execution_id::text AS id`, [cat.id]);
    await h.db.pool.query('UPDATE execution SET root_execution_id = execution_id WHERE execution_id = $1', [root.id]);
    const { rows: [child] } = await h.db.pool.query(`INSERT INTO execution (catalog_id, path, version, parent_execution_id, root_execution_id) VALUES ($1, 't/x', 1, $2, $2) RETURNING execution_id::text AS id`, [cat.id, root.id]);
    const kc = createSecretsServices(h.db, { cipher: h.cipher }).deps.keychain;
    const r = await kc.set(cat.id, 'tree', { token_data: { v: 1 }, scope_type: 'shared', execution_id: child.id });
    expect(r.cache_key).toBe(`tree:${cat.id}:shared:${root.id}`);
    expect(await kc.get(cat.id, 'tree', { scope_type: 'shared', execution_id: root.id })).toMatchObject({ status: 'success', token_data: { v: 1 } });
    expect((await kc.get(cat.id, 'tree', { scope_type: 'shared', execution_id: '999999' })).status).toBe('not_found');
  });
});
