/**
 * Group commit: requests (worker events, claims) for one execution that arrive while a
 * transaction of that execution runs in this process wait and are then applied together — one
 * lock, one load, the engine on each in arrival order, one multi-row append, bulk queue writes,
 * one execution-row update, one commit, one outbox publish. Each caller gets its own outcome.
 * Across replicas the advisory lock still serialises the transactions. A batch on an execution
 * whose state this process holds is speculated: decided without the lock, written guarded in one
 * round trip (lazy-tx.ts). The service (service.ts) owns the transactions and their context.
 */
import type pg from 'pg';
import { notFound } from '../errors.js';
import { isConnectionError } from '../db.js';
import type { Db, ExecutionHooks } from '../services.js';
import * as queueStore from '../store/queue.js';
import { StaleDecision, type GuardedLease } from '../store/decision.js';
import type { Logger } from '../../common/logger.js';
import { DecisionBatch, type DecisionBatchDeps } from './decision-batch.js';
import { newCtx } from './helpers.js';
import { KeyedBatcher, MAX_BATCH } from './keyed-batcher.js';
import { LazyTransaction } from './lazy-tx.js';
import { groupCommitPrelude, type ExecutionLoader } from './loader.js';
import type { BatchItem, BatchRequest, ItemOutcome, Peek, RunOptions, TxCtx, TxLifecycle } from './tx-types.js';

/** What the group commit needs of the service: its pool, hooks, log, loader, engine (batchDeps), and its transactions with their context. */
export interface GroupCommitDeps extends TxLifecycle {
  db: Db;
  hooks: ExecutionHooks;
  log: Logger;
  loader: ExecutionLoader;
  batchDeps: DecisionBatchDeps;
  /** Speculative writes are on (with API vars in the vars table). */
  speculation: boolean;
  now(): number;
  runTx<T>(fn: (client: pg.PoolClient, ctx: TxCtx, begun: pg.QueryResult[]) => Promise<T>, opts?: RunOptions): Promise<{ value: T; ctx: TxCtx }>;
}

/**
 * The leases a batch's events claim, one per queue row, when the batch can be speculated: events
 * each reporting with its lease (worker id and token), and claims of fresh rows (QueueRef.fresh:
 * the write leases them only if they are still queued and undelivered). Null otherwise, or when
 * two events claim one row with different leases (one of them is refused, which the locked path
 * decides).
 */
function speculationHolders(batch: BatchItem[]): GuardedLease[] | null {
  const byRow = new Map<string, GuardedLease>();
  for (const it of batch) {
    if (it.kind === 'claim') {
      if (!it.fresh) return null;
      continue;
    }
    if (!it.holder?.workerId || !it.holder.leaseToken) return null;
    const h = { queue_id: it.holder.queueId, worker_id: it.holder.workerId, lease_token: it.holder.leaseToken };
    const seen = byRow.get(h.queue_id);
    if (seen && (seen.worker_id !== h.worker_id || seen.lease_token !== h.lease_token)) return null;
    byRow.set(h.queue_id, h);
  }
  return [...byRow.values()];
}

/** Queue ids a batch's eager claims may take (the sum of their claim_next.max). */
const eagerWanted = (batch: BatchItem[]): number => batch.reduce((n, it) => n + (it.kind === 'event' && it.claimNext ? it.claimNext.max : 0), 0);

/**
 * Queue ids to take with a speculative commit, for the next batch: twice what this one wanted, and
 * never fewer than the execution's previous reservation (`previous`), up to MAX_BATCH. A batch's
 * size follows the requests that came in while the previous one ran, and under load sizes
 * alternate (1, 13, 2, 20…): with exactly what the last batch wanted, 37% of the batches of a
 * 4,000-item loop made a round trip for the rest. Ids left unused are gaps in the queue's
 * sequence, nothing else; a sequential chain (one at a time) still takes one.
 */
export const idsToReserve = (want: number, previous = 0): number =>
  Math.max(want, Math.min(Math.max(want <= 1 ? want : 2 * want, previous), MAX_BATCH));

export class GroupCommit {
  /** Counters (tests, diagnostics): transactions committed, requests they carried, batches redone one by one, time. */
  readonly counters = { transactions: 0, items: 0, fallbacks: 0, ms: 0 };
  /** Speculative decisions (tests, diagnostics): written in one round trip, in an opened transaction, or decided again under the lock. */
  readonly speculations = { oneTrip: 0, opened: 0, redone: 0 };
  /** Per execution with a group commit running: the requests waiting for the next one. */
  private readonly batcher = new KeyedBatcher<BatchItem>((executionId, batch) => this.commitBatch(executionId, batch));

  constructor(private readonly s: GroupCommitDeps) {}

  /** Whether a group commit of the execution is running in this process. */
  busy(executionId: string): boolean {
    return this.batcher.busy(executionId);
  }

  /** A request for the execution's next group commit; settled once that commit's after-commit work is done. */
  enqueue<T>(executionId: string, req: BatchRequest): Promise<T> {
    return new Promise<T>((resolve, reject) => this.batcher.add(executionId, { ...req, resolve, reject } as BatchItem));
  }

  /** Never throws: every item is settled. A failed batch of several is retried one by one. */
  private async commitBatch(executionId: string, batch: BatchItem[]): Promise<void> {
    let outcomes: ItemOutcome[];
    let ctx: TxCtx;
    const t0 = performance.now();
    try {
      const speculated = await this.speculate(executionId, batch);
      if (speculated) {
        ({ outcomes, ctx } = speculated);
        this.settle(batch, outcomes, ctx, t0);
        return;
      }
      const reserve = eagerWanted(batch);
      const holders = [...new Set(batch.flatMap((it) => (it.kind === 'event' && it.holder ? [it.holder.queueId] : [])))];
      const prelude = groupCommitPrelude(this.s.hooks, executionId, reserve, holders);
      ({ value: outcomes, ctx } = await this.s.runTx((client, c, begun) => this.applyBatch(client, c, executionId, batch, prelude.read(begun)),
        { begin: prelude.sql, prepare: prelude.prepare, lastCommits: true }));
    } catch (err) {
      if (batch.length === 1) {
        batch[0].reject(err);
        return;
      }
      this.counters.fallbacks++;
      this.s.log.warn({ execution_id: executionId, requests: batch.length, err: String(err) }, 'group commit failed; applying its requests one by one');
      for (const item of batch) await this.commitBatch(executionId, [item]);
      return;
    }
    this.settle(batch, outcomes, ctx, t0);
  }

  /** A batch committed: counters, then its callers' answers once the after-commit work is done. */
  private settle(batch: BatchItem[], outcomes: ItemOutcome[], ctx: TxCtx, t0: number): void {
    this.counters.ms += performance.now() - t0;
    this.counters.transactions++;
    this.counters.items += batch.length;
    // The next batch of this execution need not wait for this one's notifications: publishing
    // (one broker round trip per command) overlaps its transaction. Callers are answered after it.
    void this.s.afterCommit(ctx).finally(() => batch.forEach((item, i) => {
      const o = outcomes[i];
      if (o.ok) item.resolve(o.value);
      else item.reject(o.err);
    }));
  }

  /**
   * Workers' events on an execution whose state, API vars and log position this process has
   * cached (it wrote the last decision): the engine decides on the cache without the lock, and the
   * write goes with BEGIN, the lock and COMMIT in one round trip, guarded (lazy-tx.ts). The leases
   * the events report on are taken as the events claim them; the guard checks them, with the log's
   * last seq and the vars, under the lock. Returns null when the speculation could not be made or
   * did not hold: nothing was written, and the caller decides again under the lock (from the log:
   * the engine changed the cached state in place). Such a redo is rare (another replica or a
   * reclaim wrote in between; speculations.redone counts them); the command counters of the
   * decisions it replaces are not taken back. A batch with a claim is speculated only when each
   * claim is of a fresh row (QueueRef.fresh: queued and due at its insertion by this process, not
   * claimed since as far as it knows): the write leases those rows if they are still queued and
   * undelivered, else writes nothing, and the locked path then answers the claims as it would have.
   */
  private async speculate(executionId: string, batch: BatchItem[]): Promise<{ outcomes: ItemOutcome[]; ctx: TxCtx } | null> {
    if (!this.s.speculation) return null;
    const holders = speculationHolders(batch);
    if (!holders) return null;
    const cached = this.s.loader.stateCache.get(executionId);
    if (!cached?.vars) return null;
    const want = eagerWanted(batch);
    // a worker reports the command it claims with claim_next: the ids of its eager claim are taken now
    const claims = batch.reduce((n, it) => n + (it.kind === 'claim' ? 1 : 0), 0);
    const reserveNext = idsToReserve(want + claims, cached.queueIds?.length);
    // the previous speculation's ids, else a round trip for the rest (the first after a locked decision)
    const queueIds = want === 0 ? [] : cached.queueIds?.slice(0, want) ?? [];
    if (queueIds.length < want) queueIds.push(...await queueStore.takeIds(this.s.db.pool, want - queueIds.length));
    cached.queueIds = undefined;
    const peek: Peek = {
      lastSeq: cached.seq, vars: cached.vars, queueIds, speculative: true,
      holders: new Map(holders.map((h) => [h.queue_id, { worker_id: h.worker_id, lease_token: h.lease_token }])),
    };
    const guard = { lastSeq: cached.seq, holders, vars: cached.vars };
    const ctx = newCtx();
    const tx = new LazyTransaction(this.s.db.pool, executionId, guard, reserveNext, () => this.s.ending(ctx));
    let outcomes: ItemOutcome[];
    try {
      outcomes = await this.applyBatch(tx.client, ctx, executionId, batch, peek);
      // (tx announces the ends, this.s.ending, before any COMMIT it sends)
      await tx.finish(ctx.terminated.length > 0);
      // nothing reached PostgreSQL, so the guard never ran: the lease is unchecked
      if (!tx.committed) {
        this.s.abandoned(ctx);
        this.s.loader.stateCache.delete(executionId);
        this.speculations.redone++;
        return null;
      }
      if (tx.opened) this.speculations.opened++;
      else this.speculations.oneTrip++;
    } catch (err) {
      this.s.abandoned(ctx);
      await tx.abort();
      this.s.loader.stateCache.delete(executionId);
      // a stale write wrote nothing, even when it went with its COMMIT; a connection lost after a
      // COMMIT was sent leaves its outcome unknown (answered 503, as the locked path does);
      // anything else failed before COMMIT, and the locked path (which retries a lost BEGIN) redoes it
      if (!(err instanceof StaleDecision) && (tx.committed || (tx.commitSent && isConnectionError(err)))) throw err;
      this.speculations.redone++;
      return null;
    }
    const entry = ctx.cache.get(executionId);
    if (entry && tx.reserved.length) entry.queueIds = tx.reserved;
    this.s.committed(ctx);
    return { outcomes, ctx };
  }

  /**
   * One transaction for a batch. Per-request refusals (a claim of a row no longer queued) are
   * outcomes; anything else throws and fails the whole batch (the caller then retries one by one,
   * so one bad request cannot fail the others). Queue rows closed earlier in the batch are known
   * in memory, so a later claim of one is refused exactly as if each request had its own
   * transaction.
   */
  private async applyBatch(client: pg.PoolClient, ctx: TxCtx, id: string, batch: BatchItem[], peek: Peek): Promise<ItemOutcome[]> {
    const loaded = await this.s.loader.lockAndLoad(client, id, peek);
    if (!loaded) return batch.map(() => ({ ok: false, err: notFound(`execution ${id} not found`) }));
    if (!loaded.state) throw new Error(`execution ${id} has no events`);
    const now = this.s.now();
    const externalVars = peek.vars ?? await this.s.hooks.loadVars(client, id);
    const decisions = new DecisionBatch(this.s.batchDeps, { client, ctx, loaded, state: loaded.state, peek, now, externalVars });
    for (const [index, item] of batch.entries()) {
      if (item.kind === 'claim') await decisions.claim(batch, index);
      else await decisions.event(item);
    }
    return decisions.finish();
  }
}
