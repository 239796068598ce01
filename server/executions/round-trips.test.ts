/**
 * The round trips to PostgreSQL of an execution's life, counted on the wire (every query this
 * process sends; a simple query of several statements is one). Each transaction's last statement
 * carries its COMMIT (db.ts CommitRules): a top-level start is BEGIN with the insert (a session
 * statement, EXECUTEd; PREPAREd ahead of it where the connection lacks it), then the
 * write (migration 340's function, its arguments inlined) with COMMIT; the claim of a row this process
 * queued is the write leasing it; a claim under the lock is its prelude, the lease, then the write with
 * COMMIT; the step that ends the execution is the write and the end's statements, bound, in one
 * pipeline (one Sync: one implicit transaction). What is stored is checked as well: fewer trips, same rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedCommand } from '../../common/protocol.js';
import { recordQueries, type TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import { secretsHooks } from '../secrets/hooks.js';
import type { PgExecutionService } from './service.js';
import type { Lru } from './lru.js';
import type { QueueRef } from './tx-types.js';
import { callDone, chainPlaybook, CORE_TIMER_QUERIES, testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
let core: ServerCore;

const sent = <T>(fn: () => Promise<T>) => recordQueries(fn, CORE_TIMER_QUERIES);
const claimNext = { worker_id: 'w1', max: 1 };

beforeAll(async () => {
  tdb = await testDatabase('pf_trips');
  core = await testCore(tdb.url, { hooks: secretsHooks });
  await core.deps.catalog.register(chainPlaybook('r/chain', 3));
  // the first start of a version in a process reads its playbook once (the loader's cache)
  await core.deps.executions.start({ path: 'r/chain', payload: {} });
});
afterAll(async () => {
  await core?.stop();
  await tdb?.drop();
});

const sequence = async (name: string) =>
  (await core.db.pool.query<{ v: string | null }>('SELECT last_value::text AS v FROM pg_sequences WHERE sequencename = $1', [name])).rows[0]?.v;

/** Claims the execution's first command (the notifications of earlier tests' executions are dropped). */
async function claimFirst(executionId: string, beforeClaim?: (queueId: string) => void): Promise<ClaimedCommand> {
  let msg;
  do {
    [msg] = await core.broker.fetch({ max: 1, expiresMs: 2000 });
    expect(msg).toBeDefined();
    msg.ack();
  } while (msg.data.execution_id !== executionId);
  beforeClaim?.(msg.data.queue_id);
  return core.deps.executions.claim(msg.data.queue_id, { worker_id: 'w1' });
}

describe('round trips', () => {
  it('a top-level start: BEGIN with the insert and the lock, then the write with COMMIT, then the publish', async () => {
    const { value: res, sent: trips } = await sent(() => core.deps.executions.start({ path: 'r/chain', payload: { n: "it's \\ here" } }));
    expect(trips).toHaveLength(3);
    expect(trips[0]).toMatch(/^(PREPARE [^;]+; )*BEGIN; EXECUTE playflow_insert_live\(/);
    expect(trips[1]).toMatch(/^SELECT [^;]* FROM playflow_write_decision\(.*\); COMMIT$/s);
    expect(trips[2]).toBe('playflow.mark_published');
    const row = await core.deps.executions.get(res.execution_id);
    expect(row).toMatchObject({ status: 'started', path: 'r/chain', version: 1, payload: { n: "it's \\ here" } });
    const { rows } = await core.db.pool.query('SELECT name FROM event WHERE execution_id = $1 ORDER BY seq', [res.execution_id]);
    expect(rows.map((r) => r.name)).toEqual(['execution_started', 'step.enter', 'command_issued']);
    expect((await core.db.pool.query('SELECT status, published_at IS NOT NULL AS published FROM queue WHERE execution_id = $1', [res.execution_id])).rows)
      .toEqual([{ status: 'queued', published: true }]);
    // the write sent the command once, in its command_issued event; the queue row took it from there
    const { rows: [cmd] } = await core.db.pool.query(
      `SELECT q.command AS queued, e.payload -> 'command' AS issued FROM queue q JOIN event e ON e.execution_id = q.execution_id AND e.name = 'command_issued'
        WHERE q.execution_id = $1`, [res.execution_id]);
    expect(cmd.queued).toMatchObject({ step: 's1', tool: { kind: 'python' } });
    expect(cmd.queued).toEqual(cmd.issued);
    expect(trips[1]).not.toMatch(/"cmd":/);
  });

  it('a start whose payload is too large to inline binds its values instead: more trips, the payload intact', async () => {
    const payload = { blob: 'x'.repeat(300_000) };
    const { value: res, sent: trips } = await sent(() => core.deps.executions.start({ path: 'r/chain', payload }));
    expect(trips.some((t) => /EXECUTE playflow_insert_live/.test(t))).toBe(false);
    expect(trips.length).toBeGreaterThan(3);
    expect((await core.deps.executions.get(res.execution_id))?.payload).toEqual(payload);
  });

  it('a start of an unknown playbook is a 404 that takes no execution id', async () => {
    const before = await sequence('execution_execution_id_seq');
    const { sent: trips } = await sent(() => expect(core.deps.executions.start({ path: 'r/none', payload: {} })).rejects.toMatchObject({ statusCode: 404 }));
    expect(trips).toEqual([expect.stringMatching(/^(PREPARE [^;]+; )*BEGIN; EXECUTE playflow_insert_live\(/), 'ROLLBACK']);
    expect(await sequence('execution_execution_id_seq')).toBe(before);
  });

  it('a start of a given version or of the latest, again and again on the prepared inserts: the right version, or a 404', async () => {
    await core.deps.catalog.register(chainPlaybook('r/versions', 1));
    await core.deps.catalog.register(chainPlaybook('r/versions', 2));
    // past PostgreSQL's five custom plans, on whichever connections the pool hands out
    for (let i = 0; i < 8; i++) {
      const [v1, latest] = await Promise.all([
        core.deps.executions.start({ path: 'r/versions', version: 1, payload: {} }),
        core.deps.executions.start({ path: 'r/versions', payload: {} }),
      ]);
      expect([v1.version, latest.version]).toEqual([1, 2]);
      expect((await core.deps.executions.get(v1.execution_id))?.version).toBe(1);
      await expect(core.deps.executions.start({ path: 'r/versions', version: 3, payload: {} })).rejects.toMatchObject({ statusCode: 404 });
    }
  });

  it('a claim of a row this process queued, on its cached state: the write with the lease, one round trip', async () => {
    const { execution_id } = await core.deps.executions.start({ path: 'r/chain', payload: {} });
    const { value: cmd, sent: trips } = await sent(() => claimFirst(execution_id));
    expect(cmd.step).toBe('s1');
    expect(trips).toEqual(['playflow.write_decision']);
    expect((await core.db.pool.query('SELECT status, worker_id, attempts FROM queue WHERE execution_id = $1', [execution_id])).rows).toEqual([{ status: 'leased', worker_id: 'w1', attempts: 1 }]);
    const { rows } = await core.db.pool.query(`SELECT payload FROM event WHERE execution_id = $1 AND name = 'action_started'`, [execution_id]);
    expect(rows).toEqual([{ payload: { queue_id: cmd.queue_id, worker_id: 'w1', delivery: 1, lease_until: cmd.lease_until } }]);
    expect((await core.deps.executions.get(execution_id))?.status).toBe('running');
  });

  it('a claim under the lock: the prelude, the lease, the write with COMMIT', async () => {
    const { execution_id } = await core.deps.executions.start({ path: 'r/chain', payload: {} });
    // a row this process knows but did not queue itself (another replica did) is claimed under the lock
    const known = (core.deps.executions as unknown as { queueRows: Lru<string, QueueRef> }).queueRows;
    const { value: cmd, sent: trips } = await sent(() => claimFirst(execution_id, (queueId) => {
      const { fresh: _fresh, ...ref } = known.get(queueId)!;
      known.set(queueId, ref);
    }));
    expect(cmd.step).toBe('s1');
    expect(trips).toHaveLength(3);
    expect(trips[0]).toMatch(/^(PREPARE [^;]+; )*BEGIN; EXECUTE playflow_lock/);
    expect(trips[1]).toBe('playflow.claim_many');
    expect(trips[2]).toMatch(/^SELECT [^;]* FROM playflow_write_decision\(.*\); COMMIT$/s);
    expect((await core.db.pool.query('SELECT status, worker_id FROM queue WHERE execution_id = $1', [execution_id])).rows).toEqual([{ status: 'leased', worker_id: 'w1' }]);
  });

  it('the step that ends the execution: the write and the end in one pipeline', async () => {
    const ex = core.deps.executions as PgExecutionService;
    const { execution_id } = await core.deps.executions.start({ path: 'r/chain', payload: {} });
    let cmd: ClaimedCommand | undefined = await claimFirst(execution_id);
    while (cmd && cmd.step !== 's3') cmd = (await ex.handleEvents([callDone(cmd, { response: { i: 1 } })], { claimNext })).claimed?.[0];
    expect(cmd?.step).toBe('s3');
    const { sent: trips } = await sent(() => ex.handleEvents([callDone(cmd!, { response: { i: 3 } })], { claimNext }));
    expect(trips).toEqual(['PIPELINE playflow.write_decision_or_stale, playflow.cancel_open, playflow.keychain_local_drop, playflow.auth_cache_drop, ' +
      'playflow.vars_drop, playflow.keychain_shared_drop, playflow.notify_ended, playflow.open_children']);
    expect(await core.deps.executions.get(execution_id)).toMatchObject({ status: 'completed', result: { i: 3 } });
    expect(await ex.foldState(execution_id)).toEqual(await ex.loadState(execution_id));
  });
});
