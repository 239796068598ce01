/**
 * ExecutionWaiters against the real PostgreSQL: a waiter is woken by the COMMIT of the
 * transaction that sent `notifyEndedSql`, not by the statement and not by a rollback, on every
 * process (two instances stand for two replicas); awaitEnd reads again on each wake-up.
 *
 * "Not woken" is checked without timing: notifications arrive in commit order, so once a later
 * commit's notification (a barrier) has arrived, an earlier one would have too, and a woken
 * subscription's next() settles before a setImmediate does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { notifyEndedSql } from '../store/executions.js';
import { awaitEnd, ExecutionWaiters, type Ended, type WaitSubscription } from './waiters.js';

/** The statement the service sends in the transaction that ends an execution. */
const notifyEnded = (q: pg.Pool | pg.PoolClient, id: string) => q.query(notifyEndedSql(id));

let db: TestDatabase;
let pool: pg.Pool;
const instances: ExecutionWaiters[] = [];

async function waiters(): Promise<ExecutionWaiters> {
  const w = new ExecutionWaiters({ connectionString: db.url });
  instances.push(w);
  await w.start();
  expect(w.listening).toBe(true);
  return w;
}

/** true when `sub` has a wake-up pending (or gets one before the event loop turns). */
async function woken(sub: WaitSubscription): Promise<boolean> {
  const ctl = new AbortController();
  const r = await Promise.race([
    sub.next(Date.now() + 60_000, ctl.signal).then(() => true),
    new Promise<boolean>((resolve) => setImmediate(() => resolve(false))),
  ]);
  ctl.abort();
  return r;
}

/** Commits a notification for `id` and waits until every instance heard it. */
async function barrier(ws: ExecutionWaiters[], id: string) {
  const subs = ws.map((w) => w.subscribe(id));
  const before = ws.map((w) => w.stats.notifications);
  await notifyEnded(pool, id);
  for (const sub of subs) {
    await sub.next(Date.now() + 10_000);
    sub.close();
  }
  // woken at the deadline instead would make every "not woken" check below meaningless
  expect(ws.map((w) => w.stats.notifications), `barrier ${id} not heard within 10 s`).toEqual(before.map((n) => n + 1));
  // a re-established session wakes every waiter by design, which a "not woken" check would misread
  expect(ws.map((w) => w.stats.connects), 'LISTEN session re-established during the test').toEqual(ws.map(() => 1));
}

beforeAll(async () => {
  db = await createTestDatabase('pfwait');
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
});

afterAll(async () => {
  for (const w of instances) await w.stop();
  await pool?.end();
  await db?.drop();
});

describe('ExecutionWaiters', () => {
  it('wakes at the commit of the notifying transaction, never at the statement or on rollback, on every instance', async () => {
    const a = await waiters();
    const b = await waiters();
    const subA = a.subscribe('101');
    const subB = b.subscribe('101');
    expect([a.size, b.size]).toEqual([1, 1]);

    // rolled back: nobody hears it
    const rb = await pool.connect();
    try {
      await rb.query('BEGIN');
      await notifyEnded(rb, '101');
      await rb.query('ROLLBACK');
    } finally {
      rb.release();
    }
    await barrier([a, b], '900');
    expect(await woken(subA)).toBe(false);
    expect(await woken(subB)).toBe(false);

    // sent but not committed yet: nobody hears it; committed: both instances do
    const tx = await pool.connect();
    try {
      await tx.query('BEGIN');
      await notifyEnded(tx, '101');
      await barrier([a, b], '901');
      expect(await woken(subA)).toBe(false);
      await tx.query('COMMIT');
    } finally {
      tx.release(); // an open transaction left behind would hold pool.end() in afterAll
    }
    await subA.next(Date.now() + 30_000);
    await subB.next(Date.now() + 30_000);
    expect([a.stats.notifications, b.stats.notifications]).toEqual([3, 3]); // 900, 901, 101
    subA.close();
    subB.close();
    subA.close(); // idempotent
    expect([a.size, b.size]).toEqual([0, 0]);
  });

  it('awaitEnd reads again on each wake-up and answers the terminal state', async () => {
    const w = await waiters();
    const states = ['running', 'running', 'completed'];
    let reads = 0;
    const read = async () => ({ status: states[Math.min(reads++, states.length - 1)] });
    const done = awaitEnd(w, '202', read, 60_000);
    const readsReach = async (n: number) => {
      while (reads < n) await new Promise((r) => setTimeout(r, 10));
    };
    await readsReach(1);
    await notifyEnded(pool, '202'); // woken, but still running (say a retried execution)
    await readsReach(2);
    await notifyEnded(pool, '202');
    expect(await done).toEqual({ status: 'completed' });
    expect(reads).toBe(3);
    expect(w.size).toBe(0);
  });

  it('awaitEnd answers an outcome handed over in this process without reading again', async () => {
    const w = await waiters();
    let reads = 0;
    const ended: Ended = { status: 'completed', result: { big: 'x'.repeat(100) }, error: null, finished_at: '2026-11-25T00:00:00.000Z' };
    const read = async (): Promise<Ended> => {
      reads++;
      return { status: 'running', result: null, error: null, finished_at: null };
    };
    const done = awaitEnd(w, '606', read, 60_000, undefined, (e) => e);
    while (reads < 1) await new Promise((r) => setTimeout(r, 5));
    w.ended('707', { ...ended, status: 'failed' }); // another execution's: not this waiter's
    w.ended('606', ended);
    expect(await done).toBe(ended);
    expect(reads).toBe(1);
    // without fromEnded (a caller that needs more than the outcome) it reads the row
    let status = 'running';
    let fullReads = 0;
    const readFull = async () => {
      fullReads++;
      return { status, result: null, steps: {} };
    };
    const full = awaitEnd(w, '606', readFull, 60_000);
    while (fullReads < 1) await new Promise((r) => setTimeout(r, 5));
    status = 'completed';
    w.ended('606', ended);
    expect(await full).toEqual({ status: 'completed', result: null, steps: {} });
    expect(fullReads).toBe(2);
  });

  it('an end this process is committing: its NOTIFY does not wake the waiters here (the outcome is handed over); an end that did not commit wakes them to read', async () => {
    const here = await waiters();
    const other = await waiters(); // another replica: woken by the NOTIFY as always
    const heard = async (w: ExecutionWaiters, n: number) => {
      for (let i = 0; i < 2000 && w.stats.notifications < n; i++) await new Promise((r) => setTimeout(r, 5));
      expect(w.stats.notifications).toBe(n);
    };
    const mine = here.subscribe('808');
    const theirs = other.subscribe('808');
    here.ending('808');
    const [h0, o0] = [here.stats.notifications, other.stats.notifications];
    await notifyEnded(pool, '808'); // the commit's NOTIFY, read before the committing connection's reply
    await heard(here, h0 + 1);
    await heard(other, o0 + 1);
    expect(await woken(mine)).toBe(false);
    expect(await woken(theirs)).toBe(true);
    const ended: Ended = { status: 'completed', result: 1, error: null, finished_at: '2026-11-25T00:00:00.000Z' };
    here.ended('808', ended);
    expect(await woken(mine)).toBe(true);
    expect(mine.ended).toBe(ended);
    // after ended(), a late NOTIFY wakes as usual
    await notifyEnded(pool, '808');
    await heard(here, h0 + 2);
    expect(await woken(mine)).toBe(true);
    mine.close();
    theirs.close();
    // a rolled-back or unknown end: the waiters read
    const again = here.subscribe('811');
    here.ending('811');
    here.notEnded('811');
    expect(await woken(again)).toBe(true);
    expect(again.ended).toBeUndefined();
    here.notEnded('811'); // no announced end left: nothing to wake
    expect(await woken(again)).toBe(false);
    again.close();
  });

  it('awaitEnd answers the current state at the deadline, and at once when aborted', async () => {
    const w = await waiters();
    const read = async () => ({ status: 'running' });
    expect(await awaitEnd(w, '303', read, 50)).toEqual({ status: 'running' });
    const ctl = new AbortController();
    const pending = awaitEnd(w, '303', read, 60_000, ctl.signal);
    expect(w.size).toBe(1);
    ctl.abort();
    expect(await pending).toEqual({ status: 'running' });
    expect(w.size).toBe(0);
    expect(await awaitEnd(w, '404', async () => null, 60_000)).toBeNull(); // unknown: no wait
  });

  it('stop() answers every waiter at once', async () => {
    const w = await waiters();
    const pending = awaitEnd(w, '505', async () => ({ status: 'running' }), 60_000);
    await new Promise((r) => setTimeout(r, 0));
    await w.stop();
    expect(await pending).toEqual({ status: 'running' });
    expect(w.size).toBe(0);
  });
});
