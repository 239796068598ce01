/**
 * The worker's keychain resolution against the real server (buildApp over PostgreSQL, listening
 * on a local port) and a local OAuth2 token server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHarness, type SecretsHarness } from '../test/helpers/secrets.js';
import { PlayflowClient } from '../client/http.js';
import { SecretsClient } from '../client/secrets.js';
import type { JsonObject, Tool } from '../playbook/types.js';
import { KeychainError, KeychainResolver, createKeychainPreparer, keychainRefs, renderKeychain, type KeychainCommand } from './keychain.js';
import { createAuthResolver } from './auth.js';

interface Call { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }
let h: SecretsHarness;
let secrets: SecretsClient;
let tokenUrl: string;
let tokenServer: http.Server;
const calls: Call[] = [];
let answer: (c: Call) => { status: number; body: unknown } = () => ({ status: 200, body: { access_token: 't0', expires_in: 3600 } });

beforeAll(async () => {
  h = await createHarness();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  secrets = new SecretsClient(new PlayflowClient({ baseUrl: base }));
  tokenServer = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const c = { method: req.method!, url: req.url!, headers: req.headers, body };
      calls.push(c);
      const a = answer(c);
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => tokenServer.listen(0, '127.0.0.1', r));
  tokenUrl = `http://127.0.0.1:${(tokenServer.address() as AddressInfo).port}/oauth/token`;
});
afterAll(async () => {
  await new Promise((r) => tokenServer?.close(r));
  await h?.close();
});
beforeEach(() => {
  calls.length = 0;
});

let catalogSeq = 100;
function command(defs: JsonObject[], over: Partial<KeychainCommand> = {}): KeychainCommand {
  return { catalog_id: String(catalogSeq), execution_id: '5001', root_execution_id: '5000', parent_execution_id: '5000',
    context: { workload: { api: 'https://api.example', secret_name: 'CS' }, vars: {}, keychain_defs: defs }, ...over };
}
const httpTool = (): Tool => ({ kind: 'http', method: 'GET', endpoint: '{{ workload.api }}/items', headers: { Authorization: 'Bearer {{ keychain.api_token.access_token }}' } });
const oauthDef = (over: JsonObject = {}): JsonObject => ({
  name: 'api_token', kind: 'oauth2', scope: 'global', endpoint: tokenUrl, method: 'POST',
  data: { grant_type: 'client_credentials', client_id: 'cid', client_secret: '{{ workload.secret_name }}' }, auto_renew: true, ...over,
});
const resolver = () => new KeychainResolver({ client: secrets });
const expire = (catalog: string, name: string) =>
  h.db.pool.query(`UPDATE keychain SET expires_at = now() - interval '1 second' WHERE catalog_id = $1 AND keychain_name = $2`, [catalog, name]);

describe('references', () => {
  it('finds keychain names in any template of the config', () => {
    expect(keychainRefs({ a: 'Bearer {{ keychain.t1.access_token }}', b: ["{{ keychain['t-2'].x }}", '{{ workload.keychain }}'], c: '{{ keychain.t1.y }} {{ keychain.t3 }}', d: 'keychain.no' } as never))
      .toEqual(['t1', 't-2', 't3']);
  });
});

describe('oauth2 entry: acquire, reuse, expire, auto-renew', () => {
  beforeAll(() => {
    catalogSeq = 100;
  });

  it('not_found → calls the token endpoint (form-encoded POST), stores the token, renders', async () => {
    answer = () => ({ status: 200, body: { access_token: 'tok-1', token_type: 'Bearer', expires_in: 120 } });
    const out = await renderKeychain(httpTool(), command([oauthDef()]), resolver());
    expect(out.headers).toEqual({ Authorization: 'Bearer tok-1' });
    expect(out.endpoint).toBe('{{ workload.api }}/items'); // not a keychain template: left as the server sent it
    expect(calls).toHaveLength(1);
    expect(calls[0].method).toBe('POST');
    expect(calls[0].headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(new URLSearchParams(calls[0].body))).toEqual({ grant_type: 'client_credentials', client_id: 'cid', client_secret: 'CS' });
    const stored = await secrets.getKeychain('100', 'api_token');
    expect(stored).toMatchObject({ status: 'success', token_data: { access_token: 'tok-1' }, credential_type: 'oauth2', cache_type: 'token', auto_renew: true, scope_type: 'global' });
    expect((stored as { ttl_seconds: number }).ttl_seconds).toBeLessThanOrEqual(120);
    expect((stored as { ttl_seconds: number }).ttl_seconds).toBeGreaterThan(100);
  });

  it('valid → the cached token is used, the token endpoint is not called', async () => {
    const out = await renderKeychain(httpTool(), command([oauthDef()]), resolver());
    expect(out.headers).toEqual({ Authorization: 'Bearer tok-1' });
    expect(calls).toHaveLength(0);
  });

  it('expired + auto_renew → renew_config call; HTTP 200 → fresh token POSTed with ttl from ttl_field', async () => {
    await expire('100', 'api_token');
    answer = () => ({ status: 200, body: { access_token: 'tok-2', expires_in: 300 } });
    const out = await renderKeychain(httpTool(), command([oauthDef()]), resolver());
    expect(out.headers).toEqual({ Authorization: 'Bearer tok-2' });
    expect(calls).toHaveLength(1);
    expect(Object.fromEntries(new URLSearchParams(calls[0].body))).toMatchObject({ grant_type: 'client_credentials', client_id: 'cid' });
    const stored = await secrets.getKeychain('100', 'api_token');
    expect(stored).toMatchObject({ status: 'success', token_data: { access_token: 'tok-2' }, auto_renew: true });
    expect((stored as { ttl_seconds: number }).ttl_seconds).toBeGreaterThan(290);
    expect((stored as { ttl_seconds: number }).ttl_seconds).toBeLessThanOrEqual(300);
  });

  it('renewal answer without ttl_field → ttl 3600', async () => {
    await expire('100', 'api_token');
    answer = () => ({ status: 200, body: { access_token: 'tok-3' } });
    await renderKeychain(httpTool(), command([oauthDef()]), resolver());
    const stored = (await secrets.getKeychain('100', 'api_token')) as { ttl_seconds: number; token_data: JsonObject };
    expect(stored.token_data).toEqual({ access_token: 'tok-3' });
    expect(stored.ttl_seconds).toBeGreaterThan(3590);
    expect(stored.ttl_seconds).toBeLessThanOrEqual(3600);
  });

  it('renewal non-200 → KEYCHAIN: Failed to renew, one call only (no retry), entry stays expired', async () => {
    await expire('100', 'api_token');
    answer = () => ({ status: 401, body: { error: 'invalid_client' } });
    const err = await renderKeychain(httpTool(), command([oauthDef()]), resolver()).catch((e) => e);
    expect(err).toBeInstanceOf(KeychainError);
    expect(err.message).toBe("KEYCHAIN: Failed to renew 'api_token'");
    expect(calls).toHaveLength(1);
    expect((await secrets.getKeychain('100', 'api_token')).status).toBe('expired');
  });

  it('renewal network failure → the same error', async () => {
    const port = (tokenServer.address() as AddressInfo).port;
    await secrets.setKeychain('100', 'dead', { token_data: { access_token: 'x' }, auto_renew: true, ttl_seconds: 0,
      renew_config: { endpoint: `http://127.0.0.1:${port + 1}/nothing-listens` } });
    const tool: Tool = { kind: 'http', endpoint: 'x', headers: { a: '{{ keychain.dead.access_token }}' } };
    await expect(renderKeychain(tool, command([]), resolver())).rejects.toThrow("KEYCHAIN: Failed to renew 'dead'");
  });

  it('renewal uses renew_config exactly: method, headers, JSON data, token_field, ttl_field', async () => {
    await secrets.setKeychain('100', 'custom', { token_data: { tok: 'old' }, auto_renew: true, ttl_seconds: 0,
      renew_config: { endpoint: tokenUrl, method: 'PUT', headers: { 'content-type': 'application/json', 'x-api-key': 'k' }, data: { refresh: 'r1' }, token_field: 'tok', ttl_field: 'life' } });
    answer = () => ({ status: 200, body: { tok: 'new', life: 42 } });
    const out = await renderKeychain({ kind: 'http', endpoint: 'x', headers: { t: '{{ keychain.custom.tok }}' } }, command([]), resolver());
    expect(out.headers).toEqual({ t: 'new' });
    expect(calls[0]).toMatchObject({ method: 'PUT', body: JSON.stringify({ refresh: 'r1' }) });
    expect(calls[0].headers['x-api-key']).toBe('k');
    const s = (await secrets.getKeychain('100', 'custom')) as { ttl_seconds: number; auto_renew: boolean };
    expect(s.ttl_seconds).toBeLessThanOrEqual(42);
    expect(s.auto_renew).toBe(true);
  });

  it('expired without auto_renew → KEYCHAIN: Entry expired; nothing is called', async () => {
    await secrets.setKeychain('100', 'static', { token_data: { v: 1 }, ttl_seconds: 0 });
    await expect(renderKeychain({ kind: 'http', endpoint: '{{ keychain.static.v }}' }, command([]), resolver())).rejects.toThrow("KEYCHAIN: Entry 'static' expired");
    expect(calls).toHaveLength(0);
  });

  it('missing without a definition → KEYCHAIN: Entry not found', async () => {
    await expect(renderKeychain({ kind: 'http', endpoint: '{{ keychain.ghost.v }}' }, command([]), resolver())).rejects.toThrow("KEYCHAIN: Entry 'ghost' not found");
  });

  it('token endpoint failure while acquiring is a KEYCHAIN error', async () => {
    answer = () => ({ status: 500, body: {} });
    await expect(renderKeychain(httpTool(), command([oauthDef({ name: 'api_token' })], { catalog_id: '101' }), resolver())).rejects.toThrow("KEYCHAIN: Failed to acquire 'api_token': HTTP 500");
  });
});

describe('scopes', () => {
  it('local entries are per execution; shared entries are per root execution', async () => {
    answer = () => ({ status: 200, body: { access_token: `tok-${calls.length}` } });
    const local = oauthDef({ name: 'lt', scope: 'local', auto_renew: false });
    const shared = oauthDef({ name: 'st', scope: 'shared', auto_renew: false });
    const tool: Tool = { kind: 'http', endpoint: 'x', headers: { l: '{{ keychain.lt.access_token }}', s: '{{ keychain.st.access_token }}' } };
    const a = await renderKeychain(tool, command([local, shared], { catalog_id: '200', execution_id: '6001', root_execution_id: '6000' }), resolver());
    const b = await renderKeychain(tool, command([local, shared], { catalog_id: '200', execution_id: '6002', root_execution_id: '6000' }), resolver());
    expect(calls).toHaveLength(3); // lt twice (one per execution), st once (shared by the tree)
    expect(b.headers).toMatchObject({ s: (a.headers as JsonObject).s });
    expect((a.headers as JsonObject).l).not.toBe((b.headers as JsonObject).l);
    const list = await secrets.listKeychain('200');
    expect(list.entries.map((e) => e.cache_key).sort()).toEqual(['lt:200:6001', 'lt:200:6002', 'st:200:shared:6000']);
  });
});

describe('secret_manager, env and file kinds', () => {
  let sm: http.Server;
  let smUrl: string;
  beforeAll(async () => {
    sm = http.createServer((req, res) => {
      const m = /^\/v1\/projects\/([^/]+)\/secrets\/([^/]+)\/versions\/([^/:]+):access$/.exec(req.url ?? '');
      const ok = req.headers.authorization === 'Bearer gcp-tok' && m;
      res.writeHead(ok ? 200 : 403, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ok ? { payload: { data: Buffer.from(`${m![2]}-value`).toString('base64') } } : { error: { message: 'denied' } }));
    });
    await new Promise<void>((r) => sm.listen(0, '127.0.0.1', r));
    smUrl = `http://127.0.0.1:${(sm.address() as AddressInfo).port}`;
    await secrets.putCredential({ name: 'gcp_sa', type: 'service_account', data: { access_token: 'gcp-tok', project_id: 'proj' } });
  });
  afterAll(async () => {
    await new Promise((r) => sm?.close(r));
  });

  it('secret_manager: fetches each map entry with the auth credential, stores it, renders', async () => {
    const def = { name: 'db', kind: 'secret_manager', provider: 'gcp', scope: 'global', auth: 'gcp_sa', map: { password: 'db-password', user: 'projects/proj/secrets/db-user' } };
    const r = new KeychainResolver({ client: secrets, providerOptions: { gcpBaseUrl: smUrl } });
    const tool: Tool = { kind: 'postgres', command: 'select 1', auth: { type: 'postgres', inline: { db_user: '{{ keychain.db.user }}', db_password: '{{ keychain.db.password }}' } } };
    const out = await renderKeychain(tool, command([def], { catalog_id: '300' }), r);
    expect(out.auth).toEqual({ type: 'postgres', inline: { db_user: 'db-user-value', db_password: 'db-password-value' } });
    expect(await secrets.getKeychain('300', 'db')).toMatchObject({ status: 'success', credential_type: 'secret_manager', cache_type: 'secret', token_data: { password: 'db-password-value', user: 'db-user-value' } });
    await expect(renderKeychain(tool, command([{ ...def, auth: null }], { catalog_id: '301' }), r)).rejects.toThrow(/KEYCHAIN: Failed to fetch 'db' from gcp/);
  });

  it('env and file: read on the worker, never stored on the server', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pf-kc-'));
    try {
      writeFileSync(join(dir, 'key'), 'file-key\n');
      const defs: JsonObject[] = [{ name: 'e', kind: 'env', scope: 'local', map: { token: 'PF_TEST_TOKEN' } }, { name: 'f', kind: 'file', scope: 'local', path: join(dir, 'key') }];
      const r = new KeychainResolver({ client: secrets, env: { PF_TEST_TOKEN: 'env-token' } });
      const out = await renderKeychain({ kind: 'http', endpoint: 'x', headers: { a: '{{ keychain.e.token }}', b: '{{ keychain.f.value }}' } }, command(defs, { catalog_id: '400' }), r);
      expect(out.headers).toEqual({ a: 'env-token', b: 'file-key' });
      expect((await secrets.listKeychain('400')).count).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('createKeychainPreparer fits WorkerRuntimeOptions.prepareTool and leaves tools without references alone', async () => {
    const prepare = createKeychainPreparer({ client: secrets });
    const plain: Tool = { kind: 'http', endpoint: 'https://x' };
    expect(await prepare(command([]), plain)).toBe(plain);
  });
});

describe('auth resolver', () => {
  it('resolves a name, {type, credential}, {type, inline}; postgres in both spellings', async () => {
    await secrets.putCredential({ name: 'pg_auth', type: 'postgres', data: { host: 'db.local', port: 5433, user: 'app', password: 'pw', database: 'main' } });
    const resolve = createAuthResolver(secrets);
    const byName = await resolve('pg_auth');
    expect(byName).toMatchObject({ db_host: 'db.local', host: 'db.local', db_port: 5433, port: 5433, db_user: 'app', user: 'app', db_password: 'pw', password: 'pw', db_name: 'main', database: 'main', credential_type: 'postgres' });
    expect(await resolve({ type: 'postgres', credential: 'pg_auth' })).toEqual(byName);
    expect(await resolve({ type: 'postgres', inline: { db_host: 'h', db_port: '5432', db_user: 'u', db_password: 'p', db_name: 'd' } }))
      .toMatchObject({ host: 'h', port: 5432, db_port: 5432, user: 'u', password: 'p', database: 'd' });
    expect(await resolve({ type: 'bearer', inline: { access_token: 'x' } })).toEqual({ access_token: 'x', credential_type: 'bearer' });
    await expect(resolve('nope')).rejects.toThrow(/not found/);
    await expect(resolve({ type: 'x' })).rejects.toThrow(/auth reference/);
  });
});
