/**
 * The round trips to PostgreSQL of an execution's life, counted on the wire (every query this
 * process sends; a simple query of several statements is one). Each transaction's last statement
 * carries its COMMIT (db.ts CommitRules): the first top-level start of a playbook in a process is
 * BEGIN with the insert (a session statement, EXECUTEd; PREPAREd ahead of it where the connection
 * lacks it), then the write (migration 340's function, its arguments inlined) with COMMIT; a later
 * one is the insert under an id taken ahead, the write and the next start's id in one pipeline; the claim of a row this process
 * queued is the write leasing it; a claim under the lock is its prelude, the lease, then the write with
 * COMMIT; the step that ends the execution is the write and the end's statements, bound, in one
 * pipeline (one Sync: one implicit transaction). What is stored is checked as well: fewer trips, same rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedCommand } from '../../common/protocol.js';
import { recordQueries, type TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import { secretsHooks } from '../secrets/hooks.js';
import { metrics } from '../metrics.js';
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
  it('the first top-level start of a playbook: BEGIN with the insert and the lock, then the write with COMMIT, then the publish', async () => {
    await core.deps.catalog.register(chainPlaybook('r/first', 3));
    const { value: res, sent: trips } = await sent(() => core.deps.executions.start({ path: 'r/first', payload: { n: "it's \\ here" } }));
    // the first start of a version in a process also reads its playbook (the loader's cache), once
    expect(trips).toHaveLength(4);
    expect(trips[0]).toMatch(/^(PREPARE [^;]+; )*BEGIN; EXECUTE playflow_insert_live\(/);
    expect(trips[1]).toMatch(/FROM catalog WHERE catalog_id = \$1/);
    expect(trips[2]).toMatch(/^SELECT [^;]* FROM playflow_write_decision\(.*\); COMMIT$/s);
    expect(trips[3]).toBe('playflow.mark_published');
    const row = await core.deps.executions.get(res.execution_id);
    expect(row).toMatchObject({ status: 'started', path: 'r/first', version: 1, payload: { n: "it's \\ here" } });
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
    expect(trips[2]).not.toMatch(/"cmd":/);
  });

  it('a first start whose payload is too large to inline binds its values instead: more trips, the payload intact', async () => {
    await core.deps.catalog.register(chainPlaybook('r/large', 3));
    const payload = { blob: 'x'.repeat(300_000) };
    const { value: res, sent: trips } = await sent(() => core.deps.executions.start({ path: 'r/large', payload }));
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

  /** Starts `path` until one went in one pipeline: the first start of a path in a process cannot, nor one that finds no id taken ahead. */
  async function startedAhead(path: string): Promise<void> {
    const ex = core.deps.executions as PgExecutionService;
    for (let i = 0; i < 10; i++) {
      const before = ex.startsAhead.pipelined;
      await core.deps.executions.start({ path, payload: {} });
      if (ex.startsAhead.pipelined > before) return;
      await new Promise((r) => setTimeout(r, 20)); // the ids being taken in the background
    }
    throw new Error(`no start of ${path} went in one pipeline`);
  }

  /** playflow_executions_total{status="started"} (one registry per process: the delta is what counts). */
  const startedCount = async () => (await metrics.executions.get()).values.find((v) => v.labels.status === 'started')?.value ?? 0;

  const START_PIPELINE = 'PIPELINE playflow.insert_at, playflow.write_decision, playflow.next_execution_id';

  it('a later start: the insert under an id taken ahead, the write and the next start\'s id in one pipeline, then the publish', async () => {
    const ex = core.deps.executions as PgExecutionService;
    await startedAhead('r/chain');
    const { value: res, sent: trips } = await sent(() => core.deps.executions.start({ path: 'r/chain', payload: { n: "it's \\ here" } }));
    expect(trips).toEqual([START_PIPELINE, 'playflow.mark_published']);
    expect(res).toMatchObject({ status: 'started', path: 'r/chain', version: 1, commands: 1 });
    const row = await core.deps.executions.get(res.execution_id);
    expect(row).toMatchObject({ execution_id: res.execution_id, root_execution_id: res.execution_id, status: 'started', path: 'r/chain', version: 1, payload: { n: "it's \\ here" } });
    const { rows } = await core.db.pool.query('SELECT name FROM event WHERE execution_id = $1 ORDER BY seq', [res.execution_id]);
    expect(rows.map((r) => r.name)).toEqual(['execution_started', 'step.enter', 'command_issued']);
    expect((await core.db.pool.query('SELECT status, published_at IS NOT NULL AS published FROM queue WHERE execution_id = $1', [res.execution_id])).rows)
      .toEqual([{ status: 'queued', published: true }]);
    expect(await ex.foldState(res.execution_id)).toEqual(await ex.loadState(res.execution_id));
    // its cached state is the committed one: the first claim is still one round trip, and the execution runs to its end
    const { value: cmd, sent: claimTrips } = await sent(() => claimFirst(res.execution_id));
    expect(claimTrips).toEqual(['playflow.write_decision']);
    let next: ClaimedCommand | undefined = cmd;
    while (next) next = (await ex.handleEvents([callDone(next, { response: { i: next.step } })], { claimNext })).claimed?.[0];
    expect(await core.deps.executions.get(res.execution_id)).toMatchObject({ status: 'completed', result: { i: 's3' }, created_at: row!.created_at });
  });

  it('a start after a newer version was registered: the guess inserts nothing, and the start takes the new version the first way; a removed path is a 404', async () => {
    const ex = core.deps.executions as PgExecutionService;
    await core.deps.catalog.register(chainPlaybook('r/stale', 2));
    await startedAhead('r/stale');
    await core.deps.catalog.register(chainPlaybook('r/stale', 3));
    const count = async () => (await core.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM execution WHERE path = 'r/stale'`)).rows[0].n;
    const before = await count();
    const stale = ex.startsAhead.stale;
    const startedBefore = await startedCount();
    const { value: res, sent: trips } = await sent(() => core.deps.executions.start({ path: 'r/stale', payload: {} }));
    // the engine decided twice, the execution started once
    expect(await startedCount()).toBe(startedBefore + 1);
    expect(trips[0]).toBe(START_PIPELINE);
    expect(trips[1]).toMatch(/^(PREPARE [^;]+; )*BEGIN; EXECUTE playflow_insert_live\(/);
    expect(res.version).toBe(2);
    expect(ex.startsAhead.stale).toBe(stale + 1);
    expect(await count()).toBe(before + 1);
    // the pipeline's write found no execution: nothing of it is stored anywhere
    const orphans = await core.db.pool.query(`SELECT 'event' FROM event e WHERE NOT EXISTS (SELECT 1 FROM execution x WHERE x.execution_id = e.execution_id)
      UNION ALL SELECT 'queue' FROM queue q WHERE NOT EXISTS (SELECT 1 FROM execution x WHERE x.execution_id = q.execution_id)`);
    expect(orphans.rows).toEqual([]);

    await startedAhead('r/stale');
    await core.deps.catalog.remove('r/stale');
    const left = await count();
    await expect(core.deps.executions.start({ path: 'r/stale', payload: {} })).rejects.toMatchObject({ statusCode: 404 });
    expect(await count()).toBe(left);
  });

  it('a later start whose first decision writes vars first: BEGIN, the insert, the vars, then the write with COMMIT', async () => {
    const ex = core.deps.executions as PgExecutionService;
    // a first step without a tool completes in the start's own decision, and its vars go before the write
    await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: router, path: r/router }
workflow:
  - step: start
    vars: { who: "{{ payload.who }}" }
    next: s1
  - step: s1
    tool: { kind: python, code: "result = 1" }
`);
    await startedAhead('r/router');
    const before = ex.startsAhead.pipelined;
    const { value: res, sent: trips } = await sent(() => core.deps.executions.start({ path: 'r/router', payload: { who: 'ann' } }));
    expect(trips[0]).toBe('BEGIN');
    expect(trips[1]).toBe('PIPELINE playflow.insert_at');
    expect(trips.some((t) => /playflow_insert_live/.test(t))).toBe(false);
    expect(ex.startsAhead.pipelined).toBe(before + 1);
    const { rows: vars } = await core.db.pool.query('SELECT var_name, var_value FROM vars WHERE execution_id = $1', [res.execution_id]);
    expect(vars).toEqual([{ var_name: 'who', var_value: 'ann' }]);
    const { rows } = await core.db.pool.query('SELECT name FROM event WHERE execution_id = $1 ORDER BY seq', [res.execution_id]);
    expect(rows.map((r) => r.name)).toContain('vars_set');
    expect(await ex.foldState(res.execution_id)).toEqual(await ex.loadState(res.execution_id));
    expect(await core.deps.executions.get(res.execution_id)).toMatchObject({ status: 'started', payload: { who: 'ann' } });
  });

  it('two pipelined starts with one Idempotency-Key at once: one execution, the other answered with it as a replay', async () => {
    const ex = core.deps.executions as PgExecutionService;
    /** Until two starts at once both went in a pipeline: then each of them took an id for a later one. */
    const twoIdsAhead = async () => {
      for (let i = 0; i < 20; i++) {
        const before = ex.startsAhead.pipelined;
        await Promise.all([1, 2].map(() => core.deps.executions.start({ path: 'r/chain', payload: {} })));
        if (ex.startsAhead.pipelined - before === 2) return true;
        await new Promise((r) => setTimeout(r, 20));
      }
      return false;
    };
    // Ids taken ahead are used only while less than a second old: on a loaded machine the keyed
    // pair may come after they went stale and take the two-round-trip way. Whichever way it went,
    // the key holds; the pipelined race is what this test is for, so it is tried until it ran.
    let raced = false;
    for (let attempt = 0; attempt < 5 && !raced; attempt++) {
      expect(await twoIdsAhead()).toBe(true);
      const key = `twins-${Date.now()}-${attempt}`;
      const before = ex.startsAhead.pipelined;
      const { value: [a, b], sent: trips } = await sent(() =>
        Promise.all([1, 2].map(() => core.deps.executions.start({ path: 'r/chain', payload: { k: 1 }, idempotency_key: key }))));
      expect(a.execution_id).toBe(b.execution_id);
      expect([a, b].filter((r) => (r as { replayed?: boolean }).replayed)).toHaveLength(1);
      const { rows } = await core.db.pool.query('SELECT count(*)::int AS n FROM execution WHERE idempotency_key = $1', [key]);
      expect(rows[0].n).toBe(1);
      raced = trips.filter((t) => t === START_PIPELINE).length === 2;
      if (raced) {
        // both went in a pipeline; the second insert met the first one's key (23505) and rolled back
        expect(trips.some((t) => /playflow_insert_live/.test(t))).toBe(false);
        expect(ex.startsAhead.pipelined).toBe(before + 1);
      }
    }
    expect(raced).toBe(true);
  });

  it('with speculative writes off (PLAYFLOW_SPECULATIVE_WRITES=off), every start takes the two round trips', async () => {
    const off = await testCore(tdb.url, { hooks: secretsHooks, speculativeWrites: false });
    try {
      for (let i = 0; i < 3; i++) await off.deps.executions.start({ path: 'r/chain', payload: {} });
      const { sent: trips } = await recordQueries(() => off.deps.executions.start({ path: 'r/chain', payload: {} }), CORE_TIMER_QUERIES);
      expect(trips[0]).toMatch(/^(PREPARE [^;]+; )*BEGIN; EXECUTE playflow_insert_live\(/);
      expect(trips.some((t) => t.startsWith('PIPELINE'))).toBe(false);
      expect((off.deps.executions as PgExecutionService).startsAhead.pipelined).toBe(0);
    } finally {
      await off.stop();
    }
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
