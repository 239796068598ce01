/**
 * The execution core with the real credentials/keychain/vars hooks (server/secrets): variables
 * written by a vars block commit with the event log, API-set variables reach templates and the
 * claim context, and an execution's variables are dropped when it ends.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { JsonObject } from '../../playbook/types.js';
import { silentLogger } from '../../common/logger.js';
import type { TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import { createSecretsHooks } from '../secrets/hooks.js';
import { callDone, testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
let core: ServerCore;
const warnings: Array<{ obj: object; msg?: string }> = [];

beforeAll(async () => {
  tdb = await testDatabase('pf_hooks');
  core = await testCore(tdb.url, {
    hooks: createSecretsHooks({ logger: silentLogger }),
    logger: { ...silentLogger, warn: (obj, msg) => warnings.push({ obj, msg }) },
  });
});
afterAll(async () => {
  await core?.stop();
  await tdb?.drop();
});

/** The next notification, acked and claimed, as a worker does. */
const claimNext = async () => {
  const [m] = await core.broker.fetch({ max: 1, expiresMs: 2000 });
  m.ack();
  return core.deps.executions.claim(m.data.queue_id, { worker_id: 'w' });
};

it('vars block → vars table in the same transaction; API vars reach templates; terminal drops them', async () => {
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: vars, path: h/vars }
workflow:
  - step: fetch
    tool: { kind: python, code: "result = 1" }
    vars:
      answer: "{{ result.value }}"
    next: use
  - step: use
    tool:
      kind: python
      code: "result = 2"
      args: { answer: "{{ vars.answer }}" }
`);
  const run = await core.deps.executions.start({ path: 'h/vars' });
  const ex = core.deps.executions;
  const c1 = await claimNext();
  await ex.handleEvents([callDone(c1, { response: { value: 42 } })]);
  const { rows } = await core.db.pool.query('SELECT var_name, var_value, var_type, source_step FROM vars WHERE execution_id = $1', [run.execution_id]);
  expect(rows).toEqual([{ var_name: 'answer', var_value: 42, var_type: 'step_result', source_step: 'fetch' }]);
  // set through the vars API before the next step is claimed … but the command was rendered already,
  // so it shows in the claim context (the worker's view), not in the rendered args
  await core.db.pool.query(`INSERT INTO vars (execution_id, var_name, var_type, var_value) VALUES ($1, 'late', 'user_defined', '"L"')`, [run.execution_id]);
  const c2 = await claimNext();
  expect((c2.tool.args as JsonObject).answer).toBe(42);
  expect(c2.context.vars).toMatchObject({ answer: 42, late: 'L' });
  await ex.handleEvents([callDone(c2, { response: { ok: true } })]);
  expect((await ex.get(run.execution_id))?.status).toBe('completed');
  const after = await core.db.pool.query('SELECT count(*) AS n FROM vars WHERE execution_id = $1', [run.execution_id]);
  expect(after.rows[0].n).toBe('0');
});

it("a vars template that fails to render is skipped and logged (the spec's `Failed to render var '<name>'`)", async () => {
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: badvars, path: h/badvars }
workflow:
  - step: fetch
    tool: { kind: python, code: "result = 1" }
    vars:
      good: "{{ result.value }}"
      bad: "{{ result.nope.deeper }}"
`);
  const run = await core.deps.executions.start({ path: 'h/badvars' });
  const ex = core.deps.executions;
  await ex.handleEvents([callDone(await claimNext(), { response: { value: 7 } })]);
  expect((await ex.get(run.execution_id))?.status).toBe('completed');
  const logged = warnings.filter((w) => (w.obj as { execution_id?: string }).execution_id === run.execution_id);
  expect(logged).toHaveLength(1);
  expect(logged[0]!.obj).toMatchObject({ step: 'fetch', var_name: 'bad' });
  expect(logged[0]!.msg).toMatch(/^Failed to render var 'bad': /);
  // and the event says so too, with the good one set
  const events = await ex.events(run.execution_id);
  const varsSet = events.events.find((e) => e.name === 'vars_set');
  expect(varsSet?.payload).toMatchObject({ variables: { good: 7 }, errors: [{ name: 'bad' }] });
});

it('an execution that ends drops its local and shared keychain entries and its auth cache, in its last transaction; others stay', async () => {
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: one, path: h/one }
workflow:
  - step: only
    tool: { kind: python, code: "result = 1" }
`);
  const ex = core.deps.executions;
  const run = await ex.start({ path: 'h/one' });
  const other = await ex.start({ path: 'h/one' });
  const q = (sql: string, values: unknown[]) => core.db.pool.query(sql, values);
  const keychainRow = (key: string, scope: string, executionId: string | null) => q(
    `INSERT INTO keychain (cache_key, keychain_name, catalog_id, credential_type, cache_type, scope_type, execution_id, data_enc, key_id, expires_at)
     VALUES ($1, 'k', 1, 'bearer', 'token', $2, $3, 'x', 'k1', now() + interval '1 hour')`, [key, scope, executionId]);
  for (const id of [run.execution_id, other.execution_id]) {
    await keychainRow(`local:${id}`, 'local', id);
    await keychainRow(`shared:${id}`, 'shared', id); // each is its own root
  }
  await keychainRow('global', 'global', null);
  const { rows: [cred] } = await q(`INSERT INTO credential (name, type, data_enc, key_id) VALUES ('c', 'bearer', 'x', 'k1') RETURNING id`, []);
  for (const id of [run.execution_id, other.execution_id]) {
    await q(`INSERT INTO auth_cache (cache_key, credential_id, credential_name, credential_type, cache_type, scope_type, execution_id, data_enc, key_id, expires_at)
             VALUES ($1, $2, 'c', 'bearer', 'secret', 'execution', $3, 'x', 'k1', now() + interval '1 hour')`, [`c:${id}`, cred.id, id]);
  }
  const messages = await core.broker.fetch({ max: 2, expiresMs: 2000 });
  const mine = messages.find((m) => m.data.execution_id === run.execution_id)!;
  for (const m of messages) m.ack();
  const cmd = await ex.claim(mine.data.queue_id, { worker_id: 'w' });
  await ex.handleEvents([callDone(cmd, { response: 1 })]);
  expect((await ex.get(run.execution_id))?.status).toBe('completed');
  const left = await q(`SELECT cache_key FROM keychain UNION ALL SELECT cache_key FROM auth_cache ORDER BY 1`, []);
  expect(left.rows.map((r) => r.cache_key)).toEqual([`c:${other.execution_id}`, 'global', `local:${other.execution_id}`, `shared:${other.execution_id}`].sort());
  await ex.cancel(other.execution_id);
  expect((await q(`SELECT cache_key FROM keychain UNION ALL SELECT cache_key FROM auth_cache`, [])).rows.map((r) => r.cache_key)).toEqual(['global']);
});
