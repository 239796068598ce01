/**
 * Speculative decisions (group-commit.ts speculate, lazy-tx.ts): workers' call.done events (one, or a
 * group commit of several) and claims of rows this process queued, on an execution whose state this
 * process wrote last, are decided on the cached state and written in one round trip. The write's guard
 * makes it apply only while the log, every lease reported on and the API vars are what the
 * decision saw; otherwise nothing is written and the events are decided again under the lock. Two
 * cores on one database stand for two replicas.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedCommand } from '../../common/protocol.js';
import { recordQueries, type TestDatabase } from '../../test/helpers/pg.js';
import type { ServerCore } from '../core.js';
import { metrics } from '../metrics.js';
import type { PgExecutionService } from './service.js';
import { secretsHooks } from '../secrets/hooks.js';
import * as execStore from '../store/executions.js';
import * as vars from '../store/vars.js';
import { callDone, chainPlaybook, CORE_TIMER_QUERIES, loopPlaybook, testCore, testDatabase } from './testkit.js';

let tdb: TestDatabase;
let a: ServerCore;
let b: ServerCore;

const service = (core: ServerCore) => core.deps.executions as PgExecutionService;
const claimNext = { worker_id: 'w1', max: 1 };

beforeAll(async () => {
  tdb = await testDatabase('pf_spec');
  // the server's hooks: speculation needs the vars the hooks read to be the vars table's
  a = await testCore(tdb.url, { hooks: secretsHooks });
  b = await testCore(tdb.url, { hooks: secretsHooks });
  await a.deps.catalog.register(chainPlaybook('s/chain', 6));
  // names whose stored order (code points: length, then value) differs from JavaScript's UTF-16 order
  const names = ['start', 'zz', '𝔸', 'ümlaut', 'b', 'end'];
  await a.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: names, path: s/names }
workflow:
${names.map((n, i) => `  - step: "${n}"
    tool: { kind: python, code: "result = 1" }${i < names.length - 1 ? `
    next: "${names[i + 1]}"` : ''}`).join('\n')}
`);
  await a.deps.catalog.register(loopPlaybook('s/window', '{{ range(8) | list }}', 2));
  await a.deps.catalog.register(loopPlaybook('s/loop', '{{ [1, 2, 3, 4] }}', 4));
  await a.deps.catalog.register(loopPlaybook('s/long', '{{ range(16) | list }}', 4));
});
afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await tdb?.drop();
});

/** Starts a chain on `core` and claims its first command there. */
async function started(core: ServerCore, path = 's/chain'): Promise<ClaimedCommand> {
  const { execution_id } = await core.deps.executions.start({ path, payload: {} });
  const [msg] = await core.broker.fetch({ max: 1, expiresMs: 2000 });
  expect(msg?.data.execution_id).toBe(execution_id);
  msg.ack();
  return core.deps.executions.claim(msg.data.queue_id, { worker_id: 'w1' });
}

/** Starts a loop on `core` (the 4-item one unless told) and claims the `inFlight` commands it issues there. */
async function loopStarted(core: ServerCore, path = 's/loop', inFlight = 4): Promise<ClaimedCommand[]> {
  const { execution_id } = await core.deps.executions.start({ path, payload: {} });
  const msgs = await core.broker.fetch({ max: inFlight, expiresMs: 2000 });
  expect(msgs.map((m) => m.data.execution_id)).toEqual(msgs.map(() => execution_id));
  expect(msgs).toHaveLength(inFlight);
  msgs.forEach((m) => m.ack());
  return Promise.all(msgs.map((m) => core.deps.executions.claim(m.data.queue_id, { worker_id: 'w1' })));
}

/** Reports a loop item's command done on `core` and takes the next item eagerly (its result: the item's index). */
function reportItem(core: ServerCore, c: ClaimedCommand) {
  return core.deps.executions.handleEvents([callDone(c, { response: c.iteration })], { claimNext });
}

/** Reports `cmd` done on `core` and takes the next command eagerly. */
async function done(core: ServerCore, cmd: ClaimedCommand): Promise<ClaimedCommand | undefined> {
  const ack = await core.deps.executions.handleEvents([callDone(cmd, { response: { i: 1 } })], { claimNext });
  return ack.claimed?.[0];
}

/** The command counters of /metrics (one registry per process: the deltas are what count). */
async function counts() {
  const total = async (c: typeof metrics.commandsIssued, outcome?: string) =>
    (await c.get()).values.filter((v) => outcome === undefined || v.labels.outcome === outcome).reduce((n, v) => n + v.value, 0);
  return { finished: await total(metrics.commandsFinished, 'ok'), issued: await total(metrics.commandsIssued), claimed: await total(metrics.commandsClaimed) };
}

/** The queue id sequence's position (ids reserved for eager claims advance it). */
async function lastQueueId(core: ServerCore): Promise<string> {
  const { rows } = await core.db.pool.query<{ v: string }>(`SELECT last_value::text AS v FROM pg_sequences WHERE sequencename = 'queue_queue_id_seq'`);
  expect(rows).toHaveLength(1);
  return rows[0].v;
}

/** The log is contiguous and folds to the state the service holds (the fold-equivalence check). */
async function consistent(core: ServerCore, executionId: string) {
  const { rows } = await core.db.pool.query<{ seq: number }>('SELECT seq FROM event WHERE execution_id = $1 ORDER BY seq', [executionId]);
  expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
  const ex = service(core);
  expect(await ex.foldState(executionId)).toEqual(await ex.loadState(executionId));
}

describe('speculative decisions', () => {
  it('write a chain step in one round trip once the state is cached, the end with its write too', async () => {
    const before = { ...service(a).speculations };
    let cmd: ClaimedCommand | undefined = await started(a);
    const id = cmd.execution_id;
    const seen: string[] = [];
    let lastIdBeforeEnd = '';
    while (cmd) {
      seen.push(cmd.step);
      if (cmd.step === 's6') lastIdBeforeEnd = await lastQueueId(a);
      cmd = await done(a, cmd);
    }
    expect(seen).toEqual(['s1', 's2', 's3', 's4', 's5', 's6']);
    // the step that ends it takes no queue ids after its COMMIT (no next step; and the COMMIT's
    // reply must not wait behind them, see lazy-tx.ts finish)
    expect(await lastQueueId(a)).toBe(lastIdBeforeEnd);
    const after = service(a).speculations;
    // the start cached the state with its vars: the claim of s1 (a row it queued) and s1…s5 in one
    // trip each; s6 ends it, its end's statements pipelined with the write (lazy-tx.ts writeAndEnd)
    expect(after.oneTrip - before.oneTrip).toBe(7);
    expect(after.opened - before.opened).toBe(0);
    expect(after.redone - before.redone).toBe(0);
    expect((await a.deps.executions.get(id))?.status).toBe('completed');
    await consistent(a, id);
  });

  it('an end whose guard no longer holds raises in its pipeline: nothing of it is written, and it is decided again under the lock', async () => {
    const before = { ...service(a).speculations };
    let cmd: ClaimedCommand | undefined = await started(a);
    const id = cmd.execution_id;
    while (cmd.step !== 's6') cmd = (await done(a, cmd))!;
    // an API var written since a's cache: the guard of the end's write fails, so the pipeline's
    // statements after it (the queue closed, the cleanup, NOTIFY) must not run
    await vars.upsertVars(b.db.pool, id, { colour: 'red' }, 'user_defined', null, 'api');
    const { sent } = await recordQueries(() => done(a, cmd!), CORE_TIMER_QUERIES);
    expect(sent[0]).toMatch(/^PIPELINE playflow\.write_decision_or_stale, playflow\.cancel_open, /);
    expect(service(a).speculations.redone - before.redone).toBe(1);
    expect((await a.deps.executions.get(id))?.status).toBe('completed');
    // decided again under the lock, once: one execution_completed, the API var dropped with the end
    const { rows } = await a.db.pool.query(`SELECT count(*)::int AS n FROM event WHERE execution_id = $1 AND name = 'execution_completed'`, [id]);
    expect(rows[0].n).toBe(1);
    expect((await a.db.pool.query('SELECT count(*)::int AS n FROM vars WHERE execution_id = $1', [id])).rows[0].n).toBe(0);
    // had the stale pipeline gone on, its cancel of the open rows would have closed s6's row first
    expect((await a.db.pool.query(`SELECT status FROM queue WHERE execution_id = $1 AND step = 's6'`, [id])).rows).toEqual([{ status: 'done' }]);
    await consistent(a, id);
  });

  it('do not apply when another replica wrote since the cache: the event is decided again under the lock', async () => {
    const before = { ...service(a).speculations };
    const s1 = await started(a);
    const id = s1.execution_id;
    const s2 = (await done(a, s1))!; // one trip, as the claim was
    const s3 = (await done(b, s2))!; // b writes: a's cache is one decision behind
    // a decides on its stale cache (where s3 was never issued: nothing to write), then again under the lock
    const s4 = (await done(a, s3))!;
    expect([s2.step, s3.step, s4.step]).toEqual(['s2', 's3', 's4']);
    expect(service(a).speculations.redone - before.redone).toBe(1);
    const s5 = (await done(a, s4))!; // cached again: one trip
    expect(service(a).speculations.oneTrip - before.oneTrip).toBe(3); // the claim, s2 and s5
    expect(await done(a, s5)).toMatchObject({ step: 's6' });
    await consistent(a, id);
  });

  it('do not apply over a cancel another replica wrote since the cache', async () => {
    const s1 = await started(a);
    const id = s1.execution_id;
    const s2 = (await done(a, s1))!; // a caches the running state with s2 issued
    await b.deps.executions.cancel(id);
    const { rows: [{ n: afterCancel }] } = await a.db.pool.query('SELECT max(seq)::int AS n FROM event WHERE execution_id = $1', [id]);
    const redone = service(a).speculations.redone;
    const ack = await a.deps.executions.handleEvents([callDone(s2, { response: { i: 2 } })], { claimNext });
    expect(service(a).speculations.redone).toBe(redone + 1);
    expect(ack.claimed ?? []).toEqual([]);
    expect((await a.deps.executions.get(id))?.status).toBe('cancelled');
    const { rows } = await a.db.pool.query<{ name: string }>('SELECT name FROM event WHERE execution_id = $1 AND seq > $2 ORDER BY seq', [id, afterCancel]);
    expect(rows.map((r) => r.name)).not.toContain('step.enter');
    await consistent(a, id);
  });

  it('refuse a call.done whose lease was taken away since the cache, writing nothing', async () => {
    const s1 = await started(a);
    const id = s1.execution_id;
    const s2 = (await done(a, s1))!;
    const s3 = (await done(a, s2))!; // cached, with s3 leased to w1
    await a.db.pool.query(`UPDATE queue SET lease_token = 'someone-else' WHERE queue_id = $1`, [s3.queue_id]);
    const { rows: [{ n: eventsBefore }] } = await a.db.pool.query('SELECT count(*)::int AS n FROM event WHERE execution_id = $1', [id]);
    const redone = service(a).speculations.redone;
    await expect(done(a, s3)).rejects.toMatchObject({ code: 'not_lease_holder' });
    expect(service(a).speculations.redone).toBe(redone + 1);
    const { rows: [{ n: eventsAfter }] } = await a.db.pool.query('SELECT count(*)::int AS n FROM event WHERE execution_id = $1', [id]);
    expect(eventsAfter).toBe(eventsBefore);
    await consistent(a, id);
  });

  it('claim a row this process queued in one round trip; another replica claiming it first gets it, and this claim is refused as under the lock', async () => {
    const { execution_id: id } = await a.deps.executions.start({ path: 's/chain', payload: {} });
    const [msg] = await a.broker.fetch({ max: 1, expiresMs: 2000 });
    msg.ack();
    const before = { ...service(a).speculations };
    // b did not queue the row: it claims under the lock, first
    const theirs = await b.deps.executions.claim(msg.data.queue_id, { worker_id: 'w-b' });
    await expect(a.deps.executions.claim(msg.data.queue_id, { worker_id: 'w-a' })).rejects.toMatchObject({ statusCode: 409, code: 'already_claimed' });
    expect(service(a).speculations.redone - before.redone).toBe(1);
    const { rows } = await a.db.pool.query('SELECT status, worker_id, attempts FROM queue WHERE queue_id = $1', [msg.data.queue_id]);
    expect(rows).toEqual([{ status: 'leased', worker_id: 'w-b', attempts: 1 }]);
    const started = await a.db.pool.query(`SELECT payload->>'worker_id' AS w FROM event WHERE execution_id = $1 AND name = 'action_started'`, [id]);
    expect(started.rows).toEqual([{ w: 'w-b' }]);
    expect(await done(b, theirs)).toMatchObject({ step: 's2' });
    await consistent(a, id);

    // a row of a cancelled execution: the speculation sees the log moved on, the claim is refused 410
    const { execution_id: other } = await a.deps.executions.start({ path: 's/chain', payload: {} });
    const [m2] = await a.broker.fetch({ max: 1, expiresMs: 2000 });
    m2.ack();
    await b.deps.executions.cancel(other);
    await expect(a.deps.executions.claim(m2.data.queue_id, { worker_id: 'w-a' })).rejects.toMatchObject({ statusCode: 410 });
    await consistent(a, other);
  });

  it('see API vars set since the cache: the next command carries them', async () => {
    const s1 = await started(a);
    const id = s1.execution_id;
    const s2 = (await done(a, s1))!;
    const s3 = (await done(a, s2))!;
    expect(s3.context.vars).not.toHaveProperty('colour');
    await vars.upsertVars(a.db.pool, id, { colour: 'blue' }, 'user_defined', null, 'api');
    const redone = service(a).speculations.redone;
    const counted = await counts();
    const s4 = (await done(a, s3))!;
    expect(service(a).speculations.redone).toBe(redone + 1);
    expect(s4.context.vars).toMatchObject({ colour: 'blue' });
    // decided twice, written once: one call finished, one command issued and claimed
    expect(await counts()).toEqual({ finished: counted.finished + 1, issued: counted.issued + 1, claimed: counted.claimed + 1 });
    await consistent(a, id);
  });

  it('see an API var of var_type step_result like any other API var, and guard on exactly the vars the loader loads', async () => {
    const s1 = await started(a);
    const id = s1.execution_id;
    const s2 = (await done(a, s1))!;
    const s3 = (await done(a, s2))!;
    // the spec lets API callers POST var_type step_result: it is not the engine's vars block output
    await vars.upsertVars(a.db.pool, id, { shade: 'teal' }, 'step_result', 'external', 'api');
    const redone = service(a).speculations.redone;
    const s4 = (await done(a, s3))!;
    expect(service(a).speculations.redone).toBe(redone + 1);
    expect(s4.context.vars).toMatchObject({ shade: 'teal' });
    // nothing changed since: the guard's vars are the loader's, so the next decision is not redone
    const s5 = (await done(a, s4))!;
    expect(service(a).speculations.redone).toBe(redone + 1);
    expect(s5.context.vars).toMatchObject({ shade: 'teal' });
    await consistent(a, id);
  });

  it('write a group commit of several events in one round trip', async () => {
    const cmds = await loopStarted(a);
    const id = cmds[0].execution_id;
    const ex = service(a);
    const before = { ...ex.speculations };
    const tx0 = ex.groupCommits.transactions;
    // sent together: the first goes alone, the other two wait for it and go as one batch
    const acks = await Promise.all(cmds.slice(0, 3).map((c) => reportItem(a, c)));
    expect(acks.map((k) => k.accepted)).toEqual([1, 1, 1]);
    expect(ex.groupCommits.transactions - tx0).toBe(2);
    expect(ex.speculations.oneTrip - before.oneTrip).toBe(2);
    expect(ex.speculations.redone - before.redone).toBe(0);
    await consistent(a, id);
    expect((await a.deps.executions.get(id))?.status).toBe('running');
    await a.deps.executions.cancel(id);
  });

  it('lease the next items of a loop to the call.dones of one group commit, the state folding as stored', async () => {
    let cmds = await loopStarted(a, 's/window', 2);
    const id = cmds[0].execution_id;
    const ran: number[] = [];
    while (cmds.length) {
      ran.push(...cmds.map((c) => c.iteration!));
      // reported together: the second waits for the first's transaction, or both go as one batch;
      // each decision's action_started for its next item shares the batch's copies (HandleOptions.owned)
      const acks = await Promise.all(cmds.map((c) => reportItem(a, c)));
      cmds = acks.flatMap((k) => k.claimed ?? []);
      await consistent(a, id);
    }
    expect(ran.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(await a.deps.executions.get(id)).toMatchObject({ status: 'completed', result: [0, 1, 2, 3, 4, 5, 6, 7] });
  });

  it('take the queue ids of the next batch with the COMMIT, also when batch sizes alternate', async () => {
    let cmds = await loopStarted(a, 's/long', 4);
    const id = cmds[0].execution_id;
    const ex = service(a);
    const redone = ex.speculations.redone;
    // four call.dones reported together go as two batches: the first alone (one next item), the
    // other three together (three); a round of them shows what the previous rounds reserved
    const round = async () => {
      const tx0 = ex.groupCommits.transactions;
      const { value: acks, sent } = await recordQueries(() => Promise.all(cmds.map((c) => reportItem(a, c))));
      expect(ex.groupCommits.transactions - tx0).toBe(2);
      cmds = acks.flatMap((k) => k.claimed ?? []);
      expect(cmds).toHaveLength(4);
      return sent.filter((q) => q === 'playflow.take_queue_ids').length;
    };
    // the claims (speculated: rows this process queued) took the ids of their workers' next eager
    // claims with their writes: no batch takes its ids in a round trip of its own, and from then on a
    // one-item batch keeps the execution's larger reservation for the next
    expect(await round()).toBe(0);
    expect(await round()).toBe(0);
    expect(await round()).toBe(0);
    expect(ex.speculations.redone - redone).toBe(0);
    await consistent(a, id);
    await a.deps.executions.cancel(id);
  });

  it('decide a batch again under the lock when any one of its leases was taken away', async () => {
    const cmds = await loopStarted(a);
    const id = cmds[0].execution_id;
    const ex = service(a);
    const before = { ...ex.speculations };
    const tx0 = ex.groupCommits.transactions;
    // the batch's second lease is no longer the worker's
    await a.db.pool.query(`UPDATE queue SET lease_token = 'someone-else' WHERE queue_id = $1`, [cmds[2].queue_id]);
    const settled = await Promise.allSettled(cmds.slice(0, 3).map((c) => reportItem(a, c)));
    expect(ex.groupCommits.transactions - tx0).toBe(2); // the first alone, then [1, 2] together
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect((settled[2] as PromiseRejectedResult).reason).toMatchObject({ code: 'not_lease_holder' });
    expect(ex.speculations.redone - before.redone).toBe(1);
    const { rows } = await a.db.pool.query<{ queue_id: string; status: string }>(
      // q.queue_id: the bigint (the output column is text, and '100' sorts before '98')
      'SELECT q.queue_id::text, q.status FROM queue q WHERE q.execution_id = $1 ORDER BY q.queue_id', [id]);
    expect(rows.map((r) => r.status)).toEqual(['done', 'done', 'leased', 'leased']);
    await consistent(a, id);
    await a.deps.executions.cancel(id);
  });

  it('read a running execution this process wrote with the cached step summaries, equal to the stored ones', async () => {
    let cmd = (await started(a, 's/names'))!;
    const id = cmd.execution_id;
    for (let i = 0; i < 4; i++) cmd = (await done(a, cmd))!; // start, zz, 𝔸, ümlaut done; b running
    const ex = service(a);
    const stored = async () => execStore.toRecord((await execStore.get(a.db.pool, id))!);
    const before = ex.reads.fromCache;
    const cachedRead = (await a.deps.executions.get(id))!;
    expect(ex.reads.fromCache).toBe(before + 1);
    const expected = await stored();
    expect(cachedRead).toEqual(expected);
    expect(Object.keys(cachedRead.steps)).toEqual(Object.keys(expected.steps));
    expect(Object.keys(expected.steps)).toEqual(['b', '𝔸', 'zz', 'start', 'ümlaut'].filter((k) => k in expected.steps));
    // another replica writes: this one's cache is behind, and its read aggregates the stored rows
    await done(b, cmd);
    const after = (await a.deps.executions.get(id))!;
    expect(ex.reads.fromCache).toBe(before + 1);
    expect(after).toEqual(await stored());
    expect(after.steps.b?.status).toBe('completed');
    await a.deps.executions.cancel(id);
  });
});
