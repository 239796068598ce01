/**
 * What belongs to an execution through the vars and keychain APIs, against the execution's life:
 * the real core on PostgreSQL (in-process broker, commands claimed by hand), the real
 * credentials/keychain/vars services and hooks, and the HTTP app over both.
 *
 *   - a completed execution's variables and local/shared keychain entries were removed when it
 *     completed: a later write is a 409 naming the execution and its status, and stores nothing;
 *     failed and cancelled executions stay writable (a retry resumes them);
 *   - a removed playbook path keeps its versions for the executions running them: their keychain
 *     writes under its catalog id are accepted (an id never stored is still a 404).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import type { ClaimedCommand } from '../../common/protocol.js';
import type { JsonObject } from '../../playbook/types.js';
import type { ServerCore } from '../../server/core.js';
import { buildApp } from '../../server/app/index.js';
import { createSecretsServices } from '../../server/secrets/index.js';
import { callDone, testCore, testDatabase } from '../../server/executions/testkit.js';
import { silentLogger } from '../../common/logger.js';
import type { TestDatabase } from '../helpers/pg.js';
import { newKey } from '../helpers/secrets.js';
import { Cipher } from '../../server/crypto.js';

let tdb: TestDatabase;
let core: ServerCore;
let app: FastifyInstance;

const playbook = (path: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: one, path: ${path} }
workflow:
  - step: start
    tool: { kind: python, code: "result = 1" }
`;

beforeAll(async () => {
  tdb = await testDatabase('pf_seclife');
  const cipher = new Cipher(newKey());
  let secrets: ReturnType<typeof createSecretsServices> | undefined;
  core = await testCore(tdb.url, { hooks: (db) => (secrets = createSecretsServices(db, { cipher, logger: silentLogger })).hooks });
  app = await buildApp({ ...core.deps, ...secrets!.deps }, { logger: false });
  await core.deps.catalog.register(playbook('life/one'));
  await core.deps.catalog.register(playbook('life/removed'));
}, 60_000);
afterAll(async () => {
  await app?.close();
  await core?.stop();
  await tdb?.drop();
});

const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, body?: object) => {
  const r = await app.inject({ method, url, payload: body });
  return { status: r.statusCode, json: r.json() };
};

/** Starts a run of `path` and claims its command. */
async function started(path: string): Promise<ClaimedCommand> {
  const { execution_id } = await core.deps.executions.start({ path });
  const [m] = await core.broker.fetch({ max: 1, expiresMs: 5000 });
  m.ack();
  expect(m.data.execution_id).toBe(execution_id);
  return core.deps.executions.claim(m.data.queue_id, { worker_id: 'w' });
}

async function ended(path: string, payload: JsonObject): Promise<{ id: string; catalogId: string }> {
  const c = await started(path);
  await core.deps.executions.handleEvents([callDone(c, payload)]);
  const rec = await core.deps.executions.get(c.execution_id);
  return { id: c.execution_id, catalogId: rec!.catalog_id };
}

const count = async (sql: string, id: string) => (await core.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, [id])).rows[0].n;

describe('writes to an execution that has ended', () => {
  it('a completed execution: vars and local/shared keychain writes are 409 naming it and its status, and store nothing', async () => {
    const { id, catalogId } = await ended('life/one', { response: { ok: true } });
    expect((await core.deps.executions.get(id))?.status).toBe('completed');

    const v = await call('POST', `/api/vars/${id}`, { variables: { late: 1 } });
    expect(v.status).toBe(409);
    expect(v.json.error).toMatchObject({ code: 'execution_completed', details: { execution_id: id, status: 'completed' } });
    expect(v.json.error.message).toContain(`execution ${id} is completed`);
    expect(await count('vars WHERE execution_id = $1', id)).toBe(0);

    for (const scope_type of ['local', 'shared']) {
      const k = await call('POST', `/api/keychain/${catalogId}/tok`, { token_data: { t: 1 }, scope_type, execution_id: id });
      expect(k.status).toBe(409);
      expect(k.json.error.message).toContain(`execution ${id} is completed`);
    }
    expect(await count('keychain WHERE execution_id = $1', id)).toBe(0);
    // global entries belong to the playbook, not to an execution
    expect((await call('POST', `/api/keychain/${catalogId}/tok`, { token_data: { t: 1 } })).status).toBe(200);
  });

  it('failed and cancelled executions stay writable: a retry resumes them', async () => {
    const failed = await ended('life/one', { error: { message: 'boom' } });
    expect((await core.deps.executions.get(failed.id))?.status).toBe('failed');
    const c = await started('life/one');
    expect((await core.deps.executions.cancel(c.execution_id)).status).toBe('cancelled');
    for (const id of [failed.id, c.execution_id]) {
      expect((await call('POST', `/api/vars/${id}`, { variables: { again: 1 } })).status).toBe(200);
      expect((await call('POST', `/api/keychain/${failed.catalogId}/tok`, { token_data: { t: 1 }, scope_type: 'local', execution_id: id })).status).toBe(200);
    }
  });

  it('a running execution is writable', async () => {
    const c = await started('life/one');
    expect((await call('POST', `/api/vars/${c.execution_id}`, { variables: { now: 1 } })).status).toBe(200);
    await core.deps.executions.cancel(c.execution_id);
  });
});

describe('keychain of a removed playbook path', () => {
  it('an execution running a removed path keeps storing keychain entries under its catalog id', async () => {
    const c = await started('life/removed');
    const catalogId = (await core.deps.executions.get(c.execution_id))!.catalog_id;
    expect(await core.deps.catalog.remove('life/removed')).toBe(true);
    expect(await core.deps.catalog.getById(catalogId)).toBeNull(); // hidden from lookups, kept for its executions

    const local = await call('POST', `/api/keychain/${catalogId}/tok`, { token_data: { t: 1 }, scope_type: 'local', execution_id: c.execution_id });
    expect(local.status).toBe(200);
    const read = await call('GET', `/api/keychain/${catalogId}/tok?scope_type=local&execution_id=${c.execution_id}`);
    expect(read.json).toMatchObject({ status: 'success', token_data: { t: 1 } });
    expect((await call('POST', `/api/keychain/${catalogId}/glob`, { token_data: { t: 2 } })).status).toBe(200);

    // an id never stored is still unknown
    const unknown = await call('POST', '/api/keychain/987654321/tok', { token_data: { t: 1 } });
    expect(unknown.status).toBe(404);
    await core.deps.executions.cancel(c.execution_id);
  });
});
