/**
 * Credential scoping and the lease-checked credential read (issue 20), on the real stack: server
 * core over PostgreSQL, JetStream on the machine's NATS, the HTTP app, the real client and the
 * worker runtime, and a local API that records the Authorization header it receives.
 *
 *   - a credential scoped to `team-a/**` is used by a team-a playbook's http step (the API sees
 *     the token) and refused to a team-b playbook's step: that step fails with an error naming
 *     the credential and the path, and the API never sees the token;
 *   - a credential scoped to a namespace serves a playbook owned by a resource in it;
 *   - the read path serves only the lease holder of a command (another worker id or token: 409),
 *     never a scoped credential without a lease, and include_data never a scoped credential.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import http from 'node:http';
import { type ServerCore } from '../server/core.js';
import { ApiError, PlayflowClient } from '../client/http.js';
import { SecretsClient } from '../client/secrets.js';
import { WorkerRuntime } from '../worker/runtime.js';import { startSecureStack, type SecureStack } from './helpers/secure-stack.js';


const TOKEN_A = `tok-a-${randomBytes(6).toString('hex')}`;
const TOKEN_N = `tok-n-${randomBytes(6).toString('hex')}`;

let stack: SecureStack;
let core: ServerCore;
let base: string;
let api: http.Server;
let apiUrl: string;
/** Authorization headers the local API received, by request path. */
const received: Array<{ url: string; auth: string | undefined }> = [];

beforeAll(async () => {
  api = http.createServer((req, res) => {
    received.push({ url: req.url ?? '', auth: req.headers.authorization });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  stack = await startSecureStack({ name: 'credscope' });
  ({ core, base } = stack);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await new Promise((r) => api?.close(r));
});

const playbook = (path: string, cred: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: job, path: ${path} }
workflow:
  - step: start
    tool: { kind: http, endpoint: "${apiUrl}/${path}", auth: ${cred} }
`;

/** The execution once it has ended (the client's long poll), within 30 s. */
const finish = (c: PlayflowClient, executionId: string) => c.awaitExecution(executionId, { timeoutMs: 30_000 });

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe('credential scope', () => {
  it('a credential scoped to team-a/** serves a team-a playbook and fails a team-b playbook naming credential and path', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const s = new SecretsClient(c);
    const meta = await s.putCredential({ name: 'team_a_api', type: 'bearer', data: { access_token: TOKEN_A }, scope: { paths: ['team-a/**'] } });
    expect(meta.scope).toEqual({ paths: ['team-a/**'] });
    // An update that does not mention the scope keeps it; metadata shows it.
    await s.putCredential({ name: 'team_a_api', type: 'bearer', data: { access_token: TOKEN_A }, description: 'team a' });
    expect((await s.getCredential('team_a_api')).scope).toEqual({ paths: ['team-a/**'] });

    await s.putCredential({ name: 'ns_api', type: 'bearer', data: { access_token: TOKEN_N }, scope: { namespaces: ['team-n'] } });
    await c.registerPlaybook(playbook('team-a/etl/load', 'team_a_api'));
    await c.registerPlaybook(playbook('team-b/steal', 'team_a_api'));
    await c.registerPlaybook(playbook('team-n/job', 'ns_api'), undefined, { kind: 'Playbook', namespace: 'team-n', name: 'job' });
    await c.registerPlaybook(playbook('team-n-api/job', 'ns_api'));

    const worker = new WorkerRuntime({ broker: core.broker, client: c, workerId: 'w-scope', python: false });
    await worker.start();
    try {
      const allowed = await finish(c, (await c.run({ path: 'team-a/etl/load', payload: {} })).execution_id);
      expect(allowed.status, JSON.stringify(allowed.error)).toBe('completed');
      expect(received.find((r) => r.url === '/team-a/etl/load')?.auth).toBe(`Bearer ${TOKEN_A}`);

      const refused = await finish(c, (await c.run({ path: 'team-b/steal', payload: {} })).execution_id);
      expect(refused.status).toBe('failed');
      const msg = JSON.stringify(refused.error);
      expect(msg).toContain("credential 'team_a_api' may not be used by playbook 'team-b/steal'");
      expect(msg).not.toContain(TOKEN_A);
      expect(received.some((r) => r.url === '/team-b/steal')).toBe(false);

      const byNamespace = await finish(c, (await c.run({ path: 'team-n/job', payload: {} })).execution_id);
      expect(byNamespace.status, JSON.stringify(byNamespace.error)).toBe('completed');
      expect(received.find((r) => r.url === '/team-n/job')?.auth).toBe(`Bearer ${TOKEN_N}`);
      // Not owned by a resource in team-n: the path alone does not make it in scope.
      const noNamespace = await finish(c, (await c.run({ path: 'team-n-api/job', payload: {} })).execution_id);
      expect(noNamespace.status).toBe('failed');
      expect(JSON.stringify(noNamespace.error)).toContain("credential 'ns_api' may not be used by playbook 'team-n-api/job'");
    } finally {
      await worker.stop();
    }
  }, 60_000);

  it('the read path serves a credential only to the lease holder of a command, and a scoped one never without a lease', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const s = new SecretsClient(c);
    await s.putCredential({ name: 'open_api', type: 'bearer', data: { access_token: 'open' } });
    // No worker runs: this test claims the command itself, as a worker would.
    const ex = await c.run({ path: 'team-a/etl/load', payload: {} });
    const { rows } = await core.db.pool.query<{ queue_id: string }>('SELECT queue_id::text AS queue_id FROM queue WHERE execution_id = $1', [ex.execution_id]);
    expect(rows).toHaveLength(1);
    const queueId = rows[0].queue_id;
    const cmd = await c.claim(queueId, { worker_id: 'w-holder' });
    const lease = { queue_id: queueId, worker_id: 'w-holder', lease_token: cmd.lease_token };

    expect((await s.readCredential('team_a_api', lease)).data).toEqual({ access_token: TOKEN_A });
    expect((await s.readCredential('open_api', lease)).data).toEqual({ access_token: 'open' });

    for (const bad of [{ ...lease, worker_id: 'w-other' }, { ...lease, lease_token: 'forged' }]) {
      for (const name of ['team_a_api', 'open_api', 'no_such_credential']) {
        const err = await refusal(s.readCredential(name, bad));
        expect(err.status).toBe(409);
        expect(err.code).toBe('not_lease_holder');
        expect(JSON.stringify(err)).not.toContain(TOKEN_A);
      }
    }
    const unknownQueue = await refusal(s.readCredential('team_a_api', { ...lease, queue_id: '999999999' }));
    expect(unknownQueue.status).toBe(404);

    const noLease = await refusal(s.readCredential('team_a_api'));
    expect(noLease.status).toBe(403);
    expect(noLease.code).toBe('credential_scoped');
    const includeData = await refusal(s.getCredential('team_a_api', { include_data: true }));
    expect(includeData.status).toBe(403);
    expect(JSON.stringify(includeData)).not.toContain(TOKEN_A);
    // An unscoped credential keeps the old read path.
    expect((await s.readCredential('open_api')).data).toEqual({ access_token: 'open' });

    // A command of a playbook outside the scope, held by its worker: 403 naming both.
    const other = await c.run({ path: 'team-b/steal', payload: {} });
    const q2 = (await core.db.pool.query<{ queue_id: string }>('SELECT queue_id::text AS queue_id FROM queue WHERE execution_id = $1', [other.execution_id])).rows[0].queue_id;
    const cmd2 = await c.claim(q2, { worker_id: 'w-holder' });
    const outOfScope = await refusal(s.readCredential('team_a_api', { queue_id: q2, worker_id: 'w-holder', lease_token: cmd2.lease_token }));
    expect(outOfScope.status).toBe(403);
    expect(outOfScope.code).toBe('credential_not_allowed');
    expect(outOfScope.message).toBe("credential 'team_a_api' may not be used by playbook 'team-b/steal': its scope allows paths team-a/**");

    // Once the command is reported, its lease is gone: the token no longer opens anything.
    await c.sendEvents({ execution_id: ex.execution_id, step: 'start', name: 'call.done', queue_id: queueId, worker_id: 'w-holder', lease_token: cmd.lease_token, payload: { response: { ok: true } } } as never);
    expect((await refusal(s.readCredential('team_a_api', lease))).status).toBe(409);
  }, 60_000);

  it('bad scopes are 400 naming the field; scope null removes the scope', async () => {
    const s = new SecretsClient(new PlayflowClient({ baseUrl: base }));
    const put = (scope: unknown) => s.putCredential({ name: 'bad_scope', type: 'bearer', data: { access_token: 'x' }, scope: scope as never });
    for (const [scope, field] of [
      [{}, 'scope'], [{ paths: [] }, 'scope'], [{ paths: ['/abs/**'] }, "scope.paths[0] '/abs/**' must not start with '/'"],
      [{ namespaces: ['Not_A_NS'] }, 'scope.namespaces[0]'], [{ paths: 'team-a/**' }, 'scope.paths'],
    ] as const) {
      const err = await refusal(put(scope));
      expect(err.status).toBe(400);
      expect(err.message).toContain(field);
    }
    await put({ paths: ['x/*'] });
    expect((await s.getCredential('bad_scope')).scope).toEqual({ paths: ['x/*'] });
    await put(null);
    expect((await s.getCredential('bad_scope')).scope).toBeNull();
    expect((await s.getCredential('bad_scope', { include_data: true })).data).toEqual({ access_token: 'x' });
  });
});
