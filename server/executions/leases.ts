/**
 * Leases of queue rows: a claim (handed to the execution's group commit), a heartbeat that extends
 * the lease of its holder, a restarted worker's leases ended, and an expired lease re-checked
 * under the execution lock (queued again while attempts remain, else a failed `call.done`).
 */
import type pg from 'pg';
import type { ClaimedCommand, ClaimNextRequest, ClaimRequest, HeartbeatRequest, HeartbeatResponse, ReleaseLeaseRequest, ReleaseLeasesResponse } from '../../common/protocol.js';
import { DEFAULT_POOL } from '../../playbook/types.js';
import type { EngineEvent } from '../engine/contract.js';
import { conflict, gone, notFound } from '../errors.js';
import { metrics } from '../metrics.js';
import type { Db } from '../services.js';
import * as queueStore from '../store/queue.js';
import type { QueueRow } from '../store/queue.js';
import { eagerLeaseToken, newLeaseToken } from './helpers.js';
import type { Logger } from '../../common/logger.js';
import { claimRefusal } from './claimed.js';
import type { Lru } from './lru.js';
import type { Applied, BatchItem, BatchRequest, EagerClaim, LeaseHolder, Loaded, QueueRef, TxCtx } from './tx-types.js';

/** What leases need of the service: its pool, log, queue-row cache, lease bounds, group commit and transactions. */
export interface LeasesDeps {
  db: Db;
  log: Logger;
  queueRows: Lru<string, QueueRef>;
  defaultLease: number;
  maxLease: number;
  enqueue<T>(executionId: string, req: BatchRequest): Promise<T>;
  run<T>(fn: (client: pg.PoolClient, ctx: TxCtx) => Promise<T>): Promise<T>;
  lockAndLoad(client: pg.PoolClient, executionId: string): Promise<Loaded | null>;
  applyLoaded(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, event: EngineEvent): Promise<Applied>;
}

export class Leases {
  constructor(private readonly s: LeasesDeps) {}

  /** `req` is valid (common/contract ClaimRequest, checked at the HTTP edge). */
  async claim(queueId: string, req: ClaimRequest): Promise<ClaimedCommand> {
    const workerId = req.worker_id;
    const lease = this.leaseSeconds(req.lease_seconds);
    let ref = this.s.queueRows.get(queueId);
    if (!ref) {
      const row0 = await queueStore.get(this.s.db.pool, queueId);
      if (!row0) throw notFound(`queue entry ${queueId} not found`);
      // Fast refusal without the execution lock (duplicate notifications are common). A row only
      // leaves a finished status never; a stale 'leased' may have been queued again meanwhile, and
      // that re-queue published a fresh notification, so refusing this one loses nothing.
      if (row0.status !== 'queued') throw claimRefusal(row0, workerId);
      ref = { execution_id: row0.execution_id, command_id: row0.command_id, step: row0.step };
      this.s.queueRows.set(queueId, ref);
    }
    // A row this process issued is claimed without that look-up: the group commit refuses it under
    // the lock if it is no longer queued. The lease and its `action_started` are written by the
    // execution's next group commit (see enqueue), with whatever else arrived for it meanwhile.
    return this.s.enqueue<ClaimedCommand>(ref.execution_id, { kind: 'claim', queueId, commandId: ref.command_id, workerId, lease, fresh: ref.fresh });
  }

  /** `req` is valid (common/contract HeartbeatRequest, checked at the HTTP edge). */
  async heartbeat(queueId: string, req: HeartbeatRequest): Promise<HeartbeatResponse> {
    const workerId = req.worker_id;
    const token = req.lease_token ?? null;
    const until = req.lease_seconds === undefined
      ? await queueStore.heartbeatAsGranted(this.s.db.pool, queueId, workerId, token, this.s.defaultLease, this.s.maxLease)
      : await queueStore.heartbeat(this.s.db.pool, queueId, workerId, token, this.leaseSeconds(req.lease_seconds));
    if (until) return { lease_until: until.toISOString() };
    const row = await queueStore.get(this.s.db.pool, queueId);
    if (!row) throw notFound(`queue entry ${queueId} not found`);
    if (queueStore.isClosed(row.status)) throw gone('finished', `queue entry ${queueId} is ${row.status}`, { status: row.status });
    const holder = row.worker_id === workerId && row.status === 'leased';
    // the lease_token proves the lease (README, Leases): a heartbeat without it extends no lease issued with one
    throw conflict('not_owner', !holder
      ? `queue entry ${queueId} is not leased by worker '${workerId}'`
      : token === null
        ? `queue entry ${queueId} is leased by worker '${workerId}' with a lease_token, and this heartbeat has none: lease_token is required to extend the lease`
        : `queue entry ${queueId} is leased by worker '${workerId}' under another lease_token (a claim of another process with that id)`,
    { status: row.status, worker_id: row.worker_id });
  }

  /** `workerId` is valid (common/contract WorkerId, checked at the HTTP edge). */
  async releaseWorker(workerId: string): Promise<ReleaseLeasesResponse> {
    const released = await this.reclaimEach(await queueStore.expireWorkerLeases(this.s.db.pool, workerId));
    if (released) this.s.log.info({ worker_id: workerId, released }, 'worker restarted; its previous leases ended');
    return { released };
  }

  /**
   * Ends one lease now when `req.worker_id` holds it: queued again (or failed when it had no
   * delivery left), as when it runs out. A lease held by another worker, or a row not leased, is
   * left as it is (`released` 0): the caller may not know whether its claim was committed.
   */
  async releaseLease(queueId: string, req: ReleaseLeaseRequest): Promise<ReleaseLeasesResponse> {
    const row = await queueStore.expireLease(this.s.db.pool, queueId, req.worker_id);
    if (!row) {
      if (!(await queueStore.get(this.s.db.pool, queueId))) throw notFound(`queue entry ${queueId} not found`);
      return { released: 0 };
    }
    const outcome = await this.reclaimLease(row.queue_id, row.execution_id);
    if (outcome !== 'skipped') this.s.log.info({ queue_id: queueId, execution_id: row.execution_id, worker_id: req.worker_id, outcome }, 'lease released by its holder');
    return { released: outcome === 'skipped' ? 0 : 1 };
  }

  /**
   * A call.done with claim_next sent again because its answer was lost, and recorded the first
   * time: the commands that answer handed over are leased to a worker that never got them, and
   * nobody would run them before their leases ran out. Ends exactly those leases (their tokens
   * derive from the call's: helpers.ts eagerLeaseToken), as a release does. Returns how many.
   * Only for a resend the worker marks (`claim_next.resent`): a client may repeat a report whose
   * answer it did get and still run what it was handed.
   */
  async releaseLostAnswer(executionId: string, holder: LeaseHolder): Promise<number> {
    const { workerId, leaseToken } = holder;
    if (!workerId || !leaseToken) return 0;
    const ended: Array<{ queue_id: string; execution_id: string }> = [];
    for (const r of await queueStore.eagerLeases(this.s.db.pool, executionId, workerId)) {
      if (r.lease_token !== eagerLeaseToken(leaseToken, r.queue_id)) continue;
      const row = await queueStore.expireLease(this.s.db.pool, r.queue_id, workerId, r.lease_token);
      if (row) ended.push(row);
    }
    const released = await this.reclaimEach(ended);
    if (released) this.s.log.info({ execution_id: executionId, queue_id: holder.queueId, worker_id: workerId, released }, 'call.done sent again: the commands its lost answer handed over are queued again');
    return released;
  }

  /** Leases just ended (store/queue.ts expire*), each re-checked as an expired one; how many were not skipped. */
  private async reclaimEach(rows: ReadonlyArray<{ queue_id: string; execution_id: string }>): Promise<number> {
    let n = 0;
    for (const r of rows) if ((await this.reclaimLease(r.queue_id, r.execution_id)) !== 'skipped') n++;
    return n;
  }

  /**
   * An expired lease, re-checked under the execution lock: back to queued while attempts remain,
   * else a failed `call.done` {error: {code: 'lease_expired'}} so the execution never hangs.
   */
  async reclaimLease(queueId: string, executionId: string): Promise<'requeued' | 'failed' | 'skipped'> {
    return this.s.run(async (client, ctx) => {
      const loaded = await this.s.lockAndLoad(client, executionId);
      if (!loaded) return 'skipped';
      const { rows } = await client.query<QueueRow>(
        `SELECT * FROM queue WHERE queue_id = $1 AND status = 'leased' AND lease_until < now() FOR UPDATE`, [queueId]);
      const r = rows[0];
      if (!r) return 'skipped';
      if (r.attempts < r.max_deliveries) {
        await queueStore.requeue(client, queueId);
        ctx.toPublish.push({ queue_id: queueId, execution_id: executionId, step: r.step, pool: r.pool });
        this.s.log.info({ queue_id: queueId, execution_id: executionId, attempts: r.attempts, worker_id: r.worker_id }, 'lease expired; command queued again');
        return 'requeued';
      }
      const error = { message: `lease expired after ${r.attempts} attempts`, code: 'lease_expired' };
      await this.s.applyLoaded(client, ctx, loaded, {
        name: 'call.done', step: r.step, command_id: r.command_id,
        payload: { error, meta: { queue_id: queueId, attempts: r.attempts, worker_id: r.worker_id } },
      });
      await queueStore.finish(client, executionId, r.command_id, 'failed'); // even if the engine had it already
      ctx.counts.push({ counter: metrics.commandsFinished, labels: { outcome: 'expired' } });
      this.s.log.warn({ queue_id: queueId, execution_id: executionId, attempts: r.attempts }, 'lease expired after the last attempt; step call failed');
      return 'failed';
    });
  }

  eagerClaim(req: ClaimNextRequest): EagerClaim {
    return { workerId: req.worker_id, lease: this.leaseSeconds(req.lease_seconds), max: req.max ?? 1, pool: req.pool ?? DEFAULT_POOL, resent: req.resent === true };
  }

  /** The lease a worker asked for (the contract bounds it to (0, 86400]), at least 1 s and at most the server's cap. */
  private leaseSeconds(v: number | undefined): number {
    if (v === undefined) return this.s.defaultLease;
    return Math.min(this.s.maxLease, Math.max(1, v));
  }
}

/**
 * Leases the claims from `start` up to the next non-claim in one UPDATE (an action_started does
 * not close rows, so nothing in between could refuse them). A queue id asked twice goes to the
 * first asker; the others find the row leased (409), as one by one.
 */
export async function claimRun(client: pg.PoolClient, batch: BatchItem[], start: number, closes: Map<number, string>, leased: Map<number, QueueRow | null>): Promise<void> {
  const first = new Map<string, number>();
  for (let i = start; i < batch.length; i++) {
    const it = batch[i];
    if (it.kind !== 'claim') break;
    leased.set(i, null);
    if (!closes.has(it.commandId) && !first.has(it.queueId)) first.set(it.queueId, i);
  }
  const rows = await queueStore.claimMany(client, [...first].map(([queueId, i]) => {
    const it = batch[i] as Extract<BatchItem, { kind: 'claim' }>;
    return { queue_id: queueId, worker_id: it.workerId, lease_seconds: it.lease, lease_token: newLeaseToken() };
  }));
  for (const r of rows) leased.set(first.get(String(r.queue_id))!, r);
}
