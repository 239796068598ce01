/**
 * Conformance: secrets never appear in clear text outside their encrypted columns.
 *
 * A playbook uses every secret path at once — an oauth2 keychain entry whose client secret comes
 * from a credential (auth reference), a secret_manager entry (GCP-shaped local server), and a
 * bearer credential through a step's `auth` — on the real stack: server core over PostgreSQL,
 * JetStream on the machine's NATS (unique stream names), the HTTP app, the real client and the
 * worker runtime. Each secret is a unique canary string. After the run the test searches every
 * row of every table, the event log served by the API, every NATS message published on the
 * command subject, and every log line of server and worker: no canary may appear anywhere. The
 * local APIs check that the canaries did reach them (so the secrets really flowed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import http from 'node:http';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { BROKER_URL, uniqueBrokerNames } from './helpers/nats.js';
import { type ServerCore } from '../server/core.js';
import { createLogger } from '../common/logger.js';
import { sweepExpired } from '../server/secrets/index.js';
import { PlayflowClient } from '../client/http.js';
import { SecretsClient } from '../client/secrets.js';
import { WorkerRuntime } from '../worker/runtime.js';import { startSecureStack, type SecureStack } from './helpers/secure-stack.js';


const canary = (what: string) => `CANARY-${what}-${randomBytes(6).toString('hex')}`;
const C = {
  clientSecret: canary('client-secret'),
  accessToken: canary('access-token'),
  gcpToken: canary('gcp-token'),
  smValue: canary('sm-value'),
  bearer: canary('bearer'),
  dbPassword: canary('db-password'),
};
const ALL = Object.values(C);
/** What the failing calls are given (the second case). */
const F = {
  pathToken: canary('path-token'),
  pgUser: canary('pg-user'),
  pgPassword: canary('pg-password'),
};

let stack: SecureStack;
let core: ServerCore;
let base: string;
let api: http.Server;
let logger: ReturnType<typeof createLogger>;
let apiUrl: string;
let nc: NatsConnection;
const names = uniqueBrokerNames('CANARY');
const natsMessages: string[] = [];
const logLines: string[] = [];
const seen: Record<string, boolean> = {};

function found(text: string): string[] {
  return ALL.filter((c) => text.includes(c));
}

beforeAll(async () => {
  api = http.createServer();
  api.on('request', (req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const send = (status: number, obj: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(obj));
      };
      const url = req.url ?? '';
      if (url === '/token') {
        seen.client_secret = new URLSearchParams(body).get('client_secret') === C.clientSecret;
        return send(200, { access_token: C.accessToken, token_type: 'Bearer', expires_in: 3600 });
      }
      if (url.startsWith('/v1/projects/p/secrets/db/versions/latest:access')) {
        seen.gcp_token = req.headers.authorization === `Bearer ${C.gcpToken}`;
        return send(200, { payload: { data: Buffer.from(C.smValue).toString('base64') } });
      }
      if (url === '/check/token') return send(200, { ok: (seen.token = req.headers.authorization === `Bearer ${C.accessToken}`) });
      if (url === '/check/sm') return send(200, { ok: (seen.sm = req.headers['x-secret'] === C.smValue) });
      if (url === '/check/bearer') return send(200, { ok: (seen.bearer = req.headers.authorization === `Bearer ${C.bearer}`) });
      if (url === '/token2') return send(200, { access_token: F.pathToken, token_type: 'Bearer', expires_in: 3600 });
      // an API that refuses the call and echoes the header it was given, as some do in their error bodies
      if (url.startsWith('/refuse/')) return send(401, { error: 'bad token', got: req.headers.authorization });
      send(404, {});
    });
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;

  // Everything the server and the worker log, at debug level.
  const sink = new Writable({ write(chunk, _enc, cb) { logLines.push(String(chunk)); cb(); } });
  logger = createLogger({ level: 'debug', destination: sink });

  nc = await connect({ servers: BROKER_URL });
  const sub = nc.subscribe(names.subject);
  (async () => {
    for await (const m of sub) natsMessages.push(m.string());
  })().catch(() => {});

  stack = await startSecureStack({ name: 'canary', logger, names });
  ({ core, base } = stack);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await nc?.close();
  await new Promise((r) => api?.close(r));
});

describe('secrets canary', () => {
  it('no secret appears in tables, events, queue rows, NATS messages or logs', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const s = new SecretsClient(c);
    await s.putCredential({ name: 'oauth_cred', type: 'oauth2', data: { client_id: 'cid', client_secret: C.clientSecret, token_url: `${apiUrl}/token` } });
    await s.putCredential({ name: 'gcp_cred', type: 'service_account', data: { access_token: C.gcpToken, project_id: 'p', secretmanager_url: apiUrl } });
    await s.putCredential({ name: 'api_bearer', type: 'bearer', data: { access_token: C.bearer, token_type: 'Bearer' } });
    await s.putCredential({ name: 'unused_pg', type: 'postgres', data: { db_host: 'h', db_port: 5432, db_user: 'u', db_password: C.dbPassword, db_name: 'd' } });
    const reg = await c.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: canary, path: t/canary }
workload: { api_cred: api_bearer }
keychain:
  - name: tok
    kind: oauth2
    scope: local
    endpoint: "${apiUrl}/token"
    data: { grant_type: client_credentials }
    auth: oauth_cred
    auto_renew: true
  - name: gtok
    kind: oauth2
    scope: global
    endpoint: "${apiUrl}/token"
    data: { grant_type: client_credentials }
    auth: oauth_cred
    auto_renew: true
  - name: sm
    kind: secret_manager
    provider: gcp
    scope: shared
    auth: gcp_cred
    map: { password: "projects/p/secrets/db" }
workflow:
  - step: start
    tool: { kind: http, endpoint: "${apiUrl}/check/token", headers: { Authorization: "Bearer {{ keychain.tok.access_token }}" } }
    vars: { token_ok: "{{ result.ok }}" }
    next: sm
  - step: sm
    tool: { kind: http, endpoint: "${apiUrl}/check/sm", headers: { X-Secret: "{{ keychain.sm.password }}" } }
    next: cred
  - step: cred
    tool: { kind: http, endpoint: "${apiUrl}/check/bearer", auth: "{{ workload.api_cred }}", headers: { X-Global: "{{ keychain.gtok.access_token }}" } }
`);
    const worker = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-canary', python: false, logger });
    await worker.start();
    let executionId: string;
    try {
      const run = await c.run({ path: 't/canary', payload: {} });
      executionId = run.execution_id;
      const deadline = Date.now() + 30_000;
      let status = '';
      while (Date.now() < deadline) {
        status = (await c.getExecution(executionId)).status;
        if (['completed', 'failed', 'cancelled'].includes(status)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const ex = await c.getExecution(executionId);
      expect(status, JSON.stringify(ex.error)).toBe('completed');
    } finally {
      await worker.stop();
    }
    // The secrets did reach the APIs that needed them.
    expect(seen).toEqual({ client_secret: true, gcp_token: true, token: true, sm: true, bearer: true });

    // The global entry outlives the execution: its token and sealed renew_config (with the client
    // secret) are in the table scanned below.
    const kc = await core.db.pool.query(`SELECT keychain_name, scope_type, renew_config FROM keychain`);
    expect(kc.rows.map((r) => `${r.keychain_name}:${r.scope_type}`)).toEqual(['gtok:global']);
    expect(await s.getKeychain(reg.catalog_id, 'gtok')).toMatchObject({ status: 'success', token_data: { access_token: C.accessToken } });

    // An include_data read fills the authentication cache (encrypted too).
    expect((await s.getCredential('api_bearer', { include_data: true, execution_id: executionId })).data).toMatchObject({ access_token: C.bearer });
    expect((await core.db.pool.query(`SELECT count(*)::int AS n FROM auth_cache`)).rows[0].n).toBe(1);

    // 1. Every row of every table (encrypted columns hold ciphertext only).
    const tables = await core.db.pool.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
    expect(tables.rows.map((t) => t.table_name)).toEqual(expect.arrayContaining(['credential', 'keychain', 'auth_cache', 'vars', 'event', 'queue']));
    for (const { table_name } of tables.rows) {
      const rows = await core.db.pool.query<{ t: string }>(`SELECT t::text AS t FROM "${table_name}" t`);
      const text = rows.rows.map((r) => r.t).join('\n');
      expect(found(text), `table ${table_name}`).toEqual([]);
    }

    // 2. Events and execution as served by the API.
    const events = await c.getEvents(executionId, { limit: 1000 });
    expect(events.events.length).toBeGreaterThan(5);
    expect(found(JSON.stringify(events))).toEqual([]);
    expect(found(JSON.stringify(await c.getExecution(executionId)))).toEqual([]);

    // 3. NATS command notifications.
    await nc.flush();
    expect(natsMessages.length).toBeGreaterThan(0);
    expect(found(natsMessages.join('\n'))).toEqual([]);

    // 4. Logs of server and worker at debug level.
    expect(logLines.length).toBeGreaterThan(0);
    expect(found(logLines.join(''))).toEqual([]);

    // The execution ended: its local entry, the tree's shared entry (it is the root) and its vars are gone.
    await sweepExpired(core.db);
    expect((await core.db.pool.query(`SELECT keychain_name FROM keychain`)).rows).toEqual([{ keychain_name: 'gtok' }]);
    expect((await core.db.pool.query(`SELECT count(*)::int AS n FROM vars`)).rows[0].n).toBe(0);
  });

  it('a failed call reports none of the secrets it was given: a token in a URL path, a header echoed in the error body, a user name in a driver message', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const s = new SecretsClient(c);
    const failed = (text: string) => Object.values(F).filter((v) => text.includes(v));
    await s.putCredential({ name: 'oauth_cred2', type: 'oauth2', data: { client_id: 'cid', client_secret: 'cs', token_url: `${apiUrl}/token2` } });
    // PostgreSQL here trusts every connection, so the driver's refusal is the unknown role's name
    await s.putCredential({ name: 'pg_canary', type: 'postgres', data: { db_host: '127.0.0.1', db_port: 5432, db_user: F.pgUser, db_password: F.pgPassword, db_name: 'test' } });
    await c.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: refused, path: t/refused }
keychain:
  - name: ptok
    kind: oauth2
    scope: local
    endpoint: "${apiUrl}/token2"
    data: { grant_type: client_credentials }
    auth: oauth_cred2
workflow:
  - step: start
    tool: { kind: http, endpoint: "${apiUrl}/refuse/{{ keychain.ptok.access_token }}", headers: { Authorization: "Bearer {{ keychain.ptok.access_token }}" } }
`);
    await c.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: pgrefused, path: t/pgrefused }
workflow:
  - step: start
    tool: { kind: postgres, auth: pg_canary, command: "SELECT 1" }
`);
    const worker = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-canary-2', python: false, logger });
    await worker.start();
    const ids: string[] = [];
    try {
      for (const path of ['t/refused', 't/pgrefused']) ids.push((await c.run({ path, payload: {} })).execution_id);
      for (const id of ids) expect((await c.getExecution(id, { wait: 30 })).status).toBe('failed');
    } finally {
      await worker.stop();
    }
    const [http, pg] = await Promise.all(ids.map((id) => c.getExecution(id)));
    // The calls failed for the reasons staged, and what they say of it is masked, not dropped.
    expect(http.error).toMatchObject({ message: expect.stringContaining(`HTTP 401 from GET ${apiUrl}/refuse/***`) });
    expect(JSON.stringify(http.error)).toContain('"got":"Bearer ***"');
    expect(JSON.stringify(pg.error)).toMatch(/role \\"\*\*\*\\" does not exist/);

    for (const id of ids) {
      expect(failed(JSON.stringify(await c.getEvents(id, { limit: 1000 }))), `events of ${id}`).toEqual([]);
      expect(failed(JSON.stringify(await c.getExecution(id))), `execution ${id}`).toEqual([]);
    }
    // every table but credential (where they are, sealed) and the keychain (sealed as well)
    const tables = await core.db.pool.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
    for (const { table_name } of tables.rows) {
      const rows = await core.db.pool.query<{ t: string }>(`SELECT t::text AS t FROM "${table_name}" t`);
      expect(failed(rows.rows.map((r) => r.t).join('\n')), `table ${table_name}`).toEqual([]);
    }
    expect(failed(logLines.join('')), 'logs').toEqual([]);
  });
});
