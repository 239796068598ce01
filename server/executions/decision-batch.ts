/**
 * What one group-commit transaction accumulates while the engine decides on its requests in
 * arrival order: the running state, the events and commands to write, the queue rows closed, the
 * eager leases, and each caller's outcome. Nothing is written until finish: one write for all.
 */
import type pg from 'pg';
import type { ClaimedCommand } from '../../common/protocol.js';
import { DEFAULT_POOL, type JsonObject, type Playbook } from '../../playbook/types.js';
import type { Command, Decision, EngineEvent, ExecutionStateView } from '../engine/contract.js';
import { conflict, gone, notFound } from '../errors.js';
import { metrics } from '../metrics.js';
import type { ExecutionHooks } from '../services.js';
import type { ClaimLease, CloseStatus, EagerLease } from '../store/decision.js';
import * as queueStore from '../store/queue.js';
import type { QueueRow } from '../store/queue.js';
import { claimedCommand, claimRefusal } from './claimed.js';
import { keepUnchanged, type DecisionWriter } from './decision-write.js';
import { eagerLeaseToken, isTerminal, newLeaseToken } from './helpers.js';
import { claimRun } from './leases.js';
import type { BatchItem, EagerClaim, EventOutcome, ItemOutcome, LeaseHolder, Loaded, Peek, TxCtx } from './tx-types.js';

/** What a batch needs of the service: the engine on a loaded state, its cache hand-over, the hooks and the write. */
export interface DecisionBatchDeps {
  hooks: ExecutionHooks;
  writer: DecisionWriter;
  /** The engine's decision on `state` (which it may change in place: see handOver); `owned` see HandleOptions. */
  handle(state: ExecutionStateView, playbook: Playbook, event: EngineEvent, now: number, externalVars: JsonObject, owned?: Set<object>): Decision;
  /** Drops the cached state that shares the loaded steps map, before the engine changes it. */
  handOver(executionId: string): void;
}

/** The transaction a batch runs in, the execution loaded under its lock, and what BEGIN brought back. */
export interface DecisionBatchTx {
  client: pg.PoolClient;
  ctx: TxCtx;
  loaded: Loaded;
  /** The loaded state (the caller checked there is one). */
  state: ExecutionStateView;
  peek: Peek;
  now: number;
  externalVars: JsonObject;
}

type ClaimItem = Extract<BatchItem, { kind: 'claim' }>;
type EventItem = Extract<BatchItem, { kind: 'event' }>;

export class DecisionBatch {
  private readonly client: pg.PoolClient;
  private readonly ctx: TxCtx;
  private readonly loaded: Loaded;
  private readonly id: string;
  private readonly now: number;
  private readonly holders: Peek['holders'];
  /** The state the batch started from (its steps map is what `touched` names changes of). */
  private readonly start: ExecutionStateView;
  private readonly wasTerminal: boolean;
  private state: ExecutionStateView;
  private externalVars: JsonObject;
  /** A decision wrote vars: the next one reloads them. */
  private varsChanged = false;
  /** Steps whose summaries the batch's decisions changed; null when one did not say. */
  private touched: Set<string> | null = new Set();
  private readonly events: EngineEvent[] = [];
  private readonly commands: Command[] = [];
  /** Which caller's decision issued each command (its ack counts the rows inserted). */
  private readonly issuedBy = new Map<number, EventOutcome>();
  /** Queue rows this batch closes, first decision wins (like one-by-one: only open rows change). */
  private readonly closes = new Map<number, CloseStatus>();
  /** A decision appended events or issued commands: there is something to write. */
  private changed = false;
  private readonly outcomes: ItemOutcome[] = [];
  /** Commands leased at insertion (eager claims), with the ids reserved for them in the prelude. */
  private readonly leases = new Map<number, EagerLease>();
  private readonly reserved: string[];
  /** Leases taken for a run of consecutive claims (one UPDATE), by batch index. */
  private readonly leased = new Map<number, QueueRow | null>();
  /** A speculation: fresh rows' claims leased by the write (Peek.speculative). */
  private readonly speculative: boolean;
  private readonly claims: ClaimLease[] = [];
  /**
   * The copies the batch's decisions made of the state's parts (HandleOptions.owned): each decision
   * starts from the previous one's state, so a later one changes them in place.
   */
  private readonly owned = new Set<object>();

  constructor(private readonly s: DecisionBatchDeps, tx: DecisionBatchTx) {
    this.client = tx.client;
    this.ctx = tx.ctx;
    this.loaded = tx.loaded;
    this.id = tx.loaded.row.execution_id;
    this.now = tx.now;
    this.holders = tx.peek.holders;
    this.reserved = [...tx.peek.queueIds];
    this.speculative = tx.peek.speculative ?? false;
    this.start = tx.state;
    this.state = tx.state;
    this.externalVars = tx.externalVars;
    this.wasTerminal = isTerminal(tx.loaded.row.status);
  }

  /**
   * A claim: refused when the row was closed earlier in the batch (or the execution ended), or
   * when the lease of its run of claims did not take it; else its `action_started` is decided.
   */
  async claim(batch: BatchItem[], index: number): Promise<void> {
    const item = batch[index] as ClaimItem;
    // a row this batch closed says how; one of an execution that had ended says its own status
    // (done, failed or cancelled: the end cancelled those still open)
    const closed = this.closes.get(item.commandId) ?? (isTerminal(this.state.status) ? await this.closedStatus(item.queueId) : undefined);
    if (closed) return this.refuse(gone('finished', `queue entry ${item.queueId} is ${closed}`, { status: closed }));
    if (!this.leased.has(index)) {
      if (this.speculative && item.fresh) this.leaseFresh(batch, index, item.fresh);
      else await claimRun(this.client, batch, index, this.closes, this.leased);
    }
    const claimed = this.leased.get(index) ?? null;
    if (!claimed) {
      const row = await queueStore.get(this.client, item.queueId);
      return this.refuse(row ? claimRefusal(row, item.workerId) : notFound(`queue entry ${item.queueId} not found`));
    }
    this.ctx.counts.push({ counter: metrics.commandsClaimed });
    this.ctx.claimed.push(item.queueId);
    await this.decide({
      name: 'action_started', step: claimed.step, command_id: claimed.command_id,
      payload: { queue_id: item.queueId, worker_id: item.workerId, delivery: claimed.attempts, lease_until: claimed.lease_until!.toISOString() },
    });
    this.outcomes.push({ ok: true, value: this.claimedCommand(claimed) });
  }

  /**
   * A speculation's claim of a fresh row: leased as the write will lease it (store/decision.ts
   * DecisionWrite.claims), first delivery; a second claim of the row in this batch finds it leased.
   */
  private leaseFresh(batch: BatchItem[], index: number, command: Command): void {
    const item = batch[index] as ClaimItem;
    const taken = this.claims.some((c) => c.queue_id === item.queueId);
    if (taken) {
      this.leased.set(index, null);
      return;
    }
    const lease: ClaimLease = { queue_id: item.queueId, worker_id: item.workerId, lease_token: newLeaseToken(), lease_until: new Date(this.now + item.lease * 1000) };
    this.claims.push(lease);
    this.leased.set(index, this.heldRow(item.queueId, command, lease));
  }

  /** The row of a command this batch leases (an eager claim, or a speculative claim of a fresh row), as the write leaves it. */
  private heldRow(queueId: string, c: Command, lease: { worker_id: string; lease_token: string; lease_until: Date }): QueueRow {
    const now = new Date(this.now);
    return {
      queue_id: queueId, execution_id: this.id, command_id: c.command_id, step: c.step, command: c, status: 'leased', attempts: 1, pool: c.pool ?? DEFAULT_POOL,
      max_deliveries: c.max_deliveries ?? 3, available_at: now, lease_until: lease.lease_until, worker_id: lease.worker_id, lease_token: lease.lease_token,
      heartbeat_at: now, published_at: null, created_at: now, finished_at: null,
    };
  }

  /** The status of a row of an ended execution: its own once closed, else cancelled (the end closes it so). */
  private async closedStatus(queueId: string): Promise<string> {
    const row = await queueStore.get(this.client, queueId);
    return row && queueStore.isClosed(row.status) ? row.status : 'cancelled';
  }

  /** A worker's event: refused when it reports on a lease its sender does not hold; with claim_next, the eager claims. */
  async event(item: EventItem): Promise<void> {
    if (item.holder && !this.holds(item.holder)) {
      return this.refuse(conflict('not_lease_holder', `queue entry ${item.holder.queueId} is not leased to this worker_id and lease_token; its call.done is refused`, { worker_id: item.holder.workerId }));
    }
    const { decision, outcome } = await this.decide(item.event);
    if (item.claimNext) outcome.claimed = this.claimNext(decision.commands, item.claimNext, item.holder?.leaseToken ?? null);
    this.outcomes.push({ ok: true, value: outcome });
  }

  /**
   * Writes what the batch decided (or caches the state back when nothing changed) and returns
   * each caller's outcome, in batch order.
   */
  async finish(): Promise<ItemOutcome[]> {
    if (!this.changed) {
      keepUnchanged(this.ctx, this.loaded);
      this.cacheVars();
      return this.outcomes;
    }
    const { row, inserted } = await this.s.writer.write(this.client, this.ctx, this.loaded, {
      state: this.state, events: this.events, commands: this.commands, closes: this.closes, now: this.now, leases: this.leases, claims: this.claims,
      touched: this.touched ? { from: this.start.steps, names: this.touched } : undefined,
      ends: isTerminal(this.state.status) && !this.wasTerminal,
    });
    this.cacheVars();
    for (const c of inserted) {
      const o = this.issuedBy.get(c.command_id);
      if (o) o.commands++;
    }
    if (this.leases.size) {
      // an eager claim holds only if its row went in leased: not skipped as a duplicate command,
      // not closed by a later event of this batch
      const ok = new Set(inserted.filter((c) => !this.closes.has(c.command_id)).map((c) => c.queue_id));
      for (const o of this.outcomes) {
        if (o.ok && 'claimed' in o.value && o.value.claimed) o.value.claimed = o.value.claimed.filter((c) => ok.has(String(c.queue_id)));
      }
    }
    if (isTerminal(row.status) && !this.wasTerminal) await this.s.writer.ended(this.client, this.ctx, row);
    return this.outcomes;
  }

  /** The API vars go with the cached state, unless a decision of the batch wrote vars. */
  private cacheVars(): void {
    const entry = this.ctx.cache.get(this.id);
    if (entry) entry.vars = this.varsChanged ? undefined : this.externalVars;
  }

  private refuse(err: unknown): void {
    this.outcomes.push({ ok: false, err });
  }

  private holds(holder: LeaseHolder): boolean {
    const h = this.holders.get(holder.queueId);
    return !!h && h.worker_id !== null && h.worker_id === holder.workerId && h.lease_token !== null && h.lease_token === holder.leaseToken;
  }

  /** The engine on the running state; the decision's events, commands and closes join the batch's. */
  private async decide(event: EngineEvent): Promise<{ decision: Decision; outcome: EventOutcome }> {
    if (this.varsChanged) {
      this.externalVars = await this.s.hooks.loadVars(this.client, this.id);
      this.varsChanged = false;
    }
    this.s.handOver(this.id);
    const decision = this.s.handle(this.state, this.loaded.playbook, event, this.now, this.externalVars, this.owned);
    this.touch(decision);
    if (await this.s.writer.sideEffects(this.client, this.ctx, this.id, decision, this.closes)) this.varsChanged = true;
    this.events.push(...decision.events);
    const outcome: EventOutcome = { recorded: decision.events.length > 0, commands: 0 };
    for (const c of decision.commands) {
      this.commands.push(c);
      this.issuedBy.set(c.command_id, outcome);
    }
    if (decision.events.length || decision.commands.length) this.changed = true;
    this.state = decision.state;
    return { decision, outcome };
  }

  /**
   * Eager claims (claim_next): the due commands of the worker's pool that this decision issued
   * are leased to it at insertion, up to `max` and the ids reserved in the prelude, each with its
   * `action_started` decided now. finish drops the ones whose row did not go in leased. Their
   * tokens derive from the reporting call's (`callToken`), when it sent one.
   */
  private claimNext(issued: Command[], want: EagerClaim, callToken: string | null): ClaimedCommand[] {
    const claimed: ClaimedCommand[] = [];
    const now = this.now;
    for (const c of issued) {
      if (claimed.length >= want.max || this.reserved.length === 0 || isTerminal(this.state.status)) break;
      if ((c.available_at ?? now) > now) continue;
      if ((c.pool ?? DEFAULT_POOL) !== want.pool) continue; // another pool's workers run it
      const queueId = this.reserved.shift()!;
      const token = callToken ? eagerLeaseToken(callToken, queueId) : newLeaseToken();
      const lease: EagerLease = { queue_id: queueId, worker_id: want.workerId, lease_token: token, lease_until: new Date(now + want.lease * 1000) };
      const started = this.s.handle(this.state, this.loaded.playbook, {
        name: 'action_started', step: c.step, command_id: c.command_id,
        payload: { queue_id: lease.queue_id, worker_id: lease.worker_id, delivery: 1, lease_until: lease.lease_until.toISOString() },
      }, now, this.externalVars, this.owned);
      if (started.events.length === 0) continue;
      this.touch(started);
      this.events.push(...started.events);
      this.state = started.state;
      this.leases.set(c.command_id, lease);
      this.ctx.counts.push({ counter: metrics.commandsClaimed });
      claimed.push(this.claimedCommand(this.heldRow(lease.queue_id, c, lease)));
    }
    return claimed;
  }

  private touch(d: Decision): void {
    if (!d.changed_steps) this.touched = null;
    else if (this.touched) for (const n of d.changed_steps) this.touched.add(n);
  }

  /** The worker's answer for a row it now holds, with the vars as the batch's decisions left them. */
  private claimedCommand(row: QueueRow): ClaimedCommand {
    return claimedCommand(this.loaded.playbook, this.loaded.row, row, { ...(this.state.vars ?? {}), ...this.externalVars });
  }
}
