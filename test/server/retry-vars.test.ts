/**
 * Variables set through the vars API survive a failure so that a retry sees them (the spec drops
 * them when the execution completes); retention deletes those a failed execution kept.
 * The real core, PostgreSQL and the real credentials/keychain/vars hooks; commands claimed by hand.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../playbook/types.js';
import type { ServerCore } from '../../server/core.js';
import { createSecretsHooks } from '../../server/secrets/hooks.js';
import { sweepRetention } from '../../server/store/retention.js';
import { testCore, testDatabase } from '../../server/executions/testkit.js';
import { silentLogger } from '../../common/logger.js';
import type { TestDatabase } from '../helpers/pg.js';

type ClaimedCommand = Awaited<ReturnType<ServerCore['deps']['executions']['claim']>>;

let tdb: TestDatabase;
let core: ServerCore;

beforeAll(async () => {
  tdb = await testDatabase('pf_retryvars');
  core = await testCore(tdb.url, { hooks: createSecretsHooks({ logger: silentLogger }) });
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: rv, path: rv/one }
workflow:
  - step: first
    tool: { kind: python, code: "result = 0" }
    next: call
  - step: call
    tool:
      kind: python
      code: "result = 1"
      args: { token: "{{ vars.token }}" }
`);
}, 60_000);
afterAll(async () => {
  await core?.stop();
  await tdb?.drop();
});

async function claimNext(): Promise<ClaimedCommand> {
  const [m] = await core.broker.fetch({ max: 1, expiresMs: 5000 });
  m.ack();
  return core.deps.executions.claim(m.data.queue_id, { worker_id: 'w' });
}

async function reply(c: ClaimedCommand, payload: JsonObject): Promise<void> {
  await core.deps.executions.handleEvents([{ execution_id: c.execution_id, step: c.step, name: 'call.done', queue_id: c.queue_id, worker_id: c.worker_id, lease_token: c.lease_token, payload }]);
}

const varsOf = async (id: string) => (await core.db.pool.query('SELECT var_name, var_value FROM vars WHERE execution_id = $1 ORDER BY var_name', [id])).rows;

describe('API variables and retry', () => {
  it('a failed execution keeps its API variables; the retried step sees them; completion drops them', async () => {
    const ex = core.deps.executions;
    const run = await ex.start({ path: 'rv/one' });
    await core.db.pool.query(`INSERT INTO vars (execution_id, var_name, var_type, var_value) VALUES ($1, 'token', 'user_defined', '"T-1"')`, [run.execution_id]);
    await reply(await claimNext(), { response: { ok: true } }); // first
    const c1 = await claimNext();
    expect(c1.step).toBe('call');
    expect((c1.tool.args as JsonObject).token).toBe('T-1');
    await reply(c1, { error: { status: 500, message: 'upstream down' } });
    expect((await ex.get(run.execution_id))?.status).toBe('failed');
    expect(await varsOf(run.execution_id)).toEqual([{ var_name: 'token', var_value: 'T-1' }]);

    await ex.retry(run.execution_id);
    const c2 = await claimNext();
    expect(c2.step).toBe('call');
    // rendered again for the retry, with the variable set through the API before the failure
    expect((c2.tool.args as JsonObject).token).toBe('T-1');
    expect(c2.context.vars).toMatchObject({ token: 'T-1' });
    await reply(c2, { response: { ok: true } });
    expect((await ex.get(run.execution_id))?.status).toBe('completed');
    expect(await varsOf(run.execution_id)).toEqual([]);
  });

  it('a cancelled execution keeps them too; retention deletes them with the execution', async () => {
    const ex = core.deps.executions;
    const run = await ex.start({ path: 'rv/one' });
    await core.db.pool.query(`INSERT INTO vars (execution_id, var_name, var_type, var_value) VALUES ($1, 'token', 'user_defined', '"T-2"')`, [run.execution_id]);
    const [m] = await core.broker.fetch({ max: 1, expiresMs: 5000 });
    m.ack();
    expect((await ex.cancel(run.execution_id)).status).toBe('cancelled');
    expect(await varsOf(run.execution_id)).toHaveLength(1);
    await core.db.pool.query(`UPDATE execution SET finished_at = now() - interval '10 days' WHERE execution_id = $1`, [run.execution_id]);
    expect(await sweepRetention(core.db.pool, 7)).toBeGreaterThanOrEqual(1);
    expect(await ex.get(run.execution_id)).toBeNull();
    expect(await varsOf(run.execution_id)).toEqual([]);
  });
});
