/**
 * URL redaction (issue 20): an http step's URL may carry a credential in its userinfo or query
 * string. On the real stack (server core over PostgreSQL, JetStream, the HTTP app, the worker
 * runtime, all logging at debug level into one capture), steps to
 * `http://<user>:<password>@127.0.0.1:<port>/…?api_key=<secret>` that succeed, answer 500, and
 * cannot connect leave neither the password nor the secret in the event table, the events and
 * execution served by the API, or any log line of server and worker — while the local API did
 * receive both (so they really flowed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import http from 'node:http';
import { type ServerCore } from '../server/core.js';
import { createLogger } from '../common/logger.js';
import { PlayflowClient } from '../client/http.js';
import { WorkerRuntime } from '../worker/runtime.js';import { startSecureStack, type SecureStack } from './helpers/secure-stack.js';


const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;
const SECRET = `SECRET-${randomBytes(6).toString('hex')}`;
const USER = `user-${randomBytes(3).toString('hex')}`;

let stack: SecureStack;
let core: ServerCore;
let base: string;
let api: http.Server;
let port: number;
let closedPort: number;
const logLines: string[] = [];
const received: string[] = [];

beforeAll(async () => {
  api = http.createServer((req, res) => {
    received.push(`${req.url} ${req.headers.authorization ?? ''}`);
    res.writeHead(req.url?.startsWith('/fail') ? 500 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: !req.url?.startsWith('/fail') }));
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  port = (api.address() as AddressInfo).port;
  // A port nobody listens on: the connection is refused.
  const tmp = http.createServer();
  await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', r));
  closedPort = (tmp.address() as AddressInfo).port;
  await new Promise((r) => tmp.close(r));

  const sink = new Writable({ write(chunk, _enc, cb) { logLines.push(String(chunk)); cb(); } });
  const logger = createLogger({ level: 'debug', destination: sink });
  stack = await startSecureStack({ name: 'urlredact', logger });
  ({ core, base } = stack);
  const c = new PlayflowClient({ baseUrl: base });
  worker = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-redact', python: false, logger });
  await worker.start();
}, 60_000);
let worker: WorkerRuntime;

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
  await new Promise((r) => api?.close(r));
});

const leaks = (text: string) => [PASSWORD, SECRET].filter((s) => text.includes(s));

/** The execution once it has ended (the client's long poll), within 30 s. */
const finish = (c: PlayflowClient, executionId: string) => c.awaitExecution(executionId, { timeoutMs: 30_000 });

describe('URL redaction', () => {
  it('userinfo and query strings of http step URLs reach the API but no event or log line', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const url = (p: number, path: string) => `http://${USER}:${PASSWORD}@127.0.0.1:${p}${path}?api_key=${SECRET}&page=2`;
    const cases = [
      { path: 'redact/ok', url: url(port, '/ok'), status: 'completed' },
      { path: 'redact/http-error', url: url(port, '/fail'), status: 'failed' },
      { path: 'redact/refused', url: url(closedPort, '/down'), status: 'failed' },
    ];
    const ids: string[] = [];
    for (const k of cases) {
      await c.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: r, path: ${k.path} }
workload: { target: "${k.url}" }
workflow:
  - step: start
    tool: { kind: http, endpoint: "{{ workload.target }}" }
`);
      const ex = await finish(c, (await c.run({ path: k.path, payload: {} })).execution_id);
      expect(ex.status, `${k.path}: ${JSON.stringify(ex.error)}`).toBe(k.status);
      ids.push(ex.execution_id);
    }
    // A keychain token endpoint with credentials in its URL: fetch refuses it with a message
    // quoting the URL, which becomes the step's error and a worker log line.
    await c.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: r, path: redact/keychain }
workload: { token_url: "${url(port, '/token')}" }
keychain:
  - { name: tok, kind: oauth2, scope: local, endpoint: "{{ workload.token_url }}", data: { grant_type: client_credentials } }
workflow:
  - step: start
    tool: { kind: http, endpoint: "http://127.0.0.1:${port}/ok", headers: { Authorization: "Bearer {{ keychain.tok.access_token }}" } }
`);
    const kc = await finish(c, (await c.run({ path: 'redact/keychain', payload: {} })).execution_id);
    expect(kc.status).toBe('failed');
    expect(JSON.stringify(kc.error)).toContain("KEYCHAIN: Failed to acquire 'tok'");
    ids.push(kc.execution_id);

    // The credentials did flow: the API saw the query secret and the basic credentials.
    const basic = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
    expect(received).toEqual(expect.arrayContaining([`/ok?api_key=${SECRET}&page=2 ${basic}`, `/fail?api_key=${SECRET}&page=2 ${basic}`]));

    // The failures say what happened, with the URL in redacted form.
    const failed = await c.getExecution(ids[1]);
    expect(JSON.stringify(failed.error)).toContain(`HTTP 500 from GET http://127.0.0.1:${port}/fail?api_key=***&page=***`);
    const refused = JSON.stringify((await c.getExecution(ids[2])).error);
    expect(refused).toContain(`GET http://127.0.0.1:${closedPort}/down?api_key=***&page=*** failed`);

    // 1. The event table (every column) and the events/executions the API serves. The one
    // exception is the stored command_issued event: it is the command's source of truth (a retry
    // re-issues its tool config), like the queue row; served by the API it is redacted too.
    const rows = await core.db.pool.query<{ name: string; t: string }>(`SELECT name, e::text AS t FROM event e`);
    expect(rows.rows.length).toBeGreaterThan(6);
    expect(leaks(rows.rows.filter((r) => r.name !== 'command_issued').map((r) => r.t).join('\n'))).toEqual([]);
    for (const [i, id] of ids.entries()) {
      const served = await c.getEvents(id, { limit: 1000 });
      if (i < cases.length) expect(JSON.stringify(served)).toContain('"endpoint":"http://***@127.0.0.1');
      expect(leaks(JSON.stringify(served))).toEqual([]);
      expect(leaks(JSON.stringify(await c.getExecution(id)))).toEqual([]);
    }
    // 2. Every log line of server and worker, at debug level.
    expect(logLines.length).toBeGreaterThan(10);
    const leaked = logLines.filter((l) => leaks(l).length);
    expect(leaked).toEqual([]);
  }, 90_000);
});
