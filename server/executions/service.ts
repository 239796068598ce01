/**
 * ExecutionService: every mutation of an execution runs in ONE transaction holding
 * `pg_advisory_xact_lock(execution_id)`:
 *   lock → load the state (process cache, snapshot + newer events, or the whole log) → engine →
 *   one write (store/decision.ts): the decision's events with consecutive seq, queue rows for its
 *   commands, closes of the rows it finished or made obsolete, the execution row, the snapshot →
 *   when it became terminal: cancel its open queue rows, call the terminal hook, and deliver the
 *   child's outcome to its parent as a `call.done` (same transaction; lock order child → parent,
 *   a parent never locks a child).
 * After commit: publish notifications for the new due rows (outbox), cancel the running children
 * of executions that ended.
 *
 * Memory holds only caches that are checked against the database under the lock or are immutable
 * (catalog rows, queue rows' execution/command/step, the latest state when its seq is the log's);
 * any replica can serve any call.
 *
 * This file is the façade and the transactions' plumbing; the other concerns live beside it:
 * group-commit.ts (a batch of one execution's requests in one transaction, speculated when it can
 * be), keyed-batcher.ts (per-execution queue of the group commit), decision-batch.ts (what one group
 * commit accumulates: running state, events, closes, eager leases, each caller's outcome),
 * decision-write.ts (side effects, the one-statement write and the end of an execution, shared by
 * the one-by-one path and the group commit), loader.ts (lock and load, state and playbook caches,
 * the BEGIN prelude), starts.ts (starts, replays, admission), children.ts, leases.ts, lifecycle.ts
 * (cancel, retry, rerun), steps-diff.ts, helpers.ts and tx-types.ts.
 */
import type pg from 'pg';
import type { ClaimedCommand, ClaimNextRequest, ClaimRequest, EventsAck, RerunRequest, RetryRequest, HeartbeatRequest, HeartbeatResponse, ReleaseLeaseRequest, ReleaseLeasesResponse, RunRequest, RunResponse, WorkerEvent } from '../../common/protocol.js';
import type { JsonObject, Playbook } from '../../playbook/types.js';
import type { Decision, Engine, EngineEvent, EngineInput, ExecutionStateView, ExecutionStatus } from '../engine/contract.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { metrics } from '../metrics.js';
import { noopHooks, type Db, type ExecutionHooks, type ExecutionListItem, type ExecutionListView, type ExecutionRecord, type ExecutionService, type StoredEvent } from '../services.js';
import * as eventStore from '../store/events.js';
import * as execStore from '../store/executions.js';
import { iso, parseId } from '../store/sql.js';
import type { Outbox } from './outbox.js';
import type { Ended } from './waiters.js';
import { ValuesGate } from './values-gate.js';
import { Lru } from './lru.js';
import { MAX_BATCH } from './keyed-batcher.js';
import { Children } from './children.js';
import { Leases } from './leases.js';
import { ExecutionLoader } from './loader.js';
import { decisionCommitRules } from './lazy-tx.js';
import { Starts } from './starts.js';
import { GroupCommit } from './group-commit.js';
import { Lifecycle } from './lifecycle.js';
import { DecisionWriter } from './decision-write.js';
import type { Applied, EventOutcome, LeaseHolder, Loaded, QueueRef, RunOptions, TxCtx, TxLifecycle } from './tx-types.js';
import { isObject, newCtx, RETRYABLE } from './helpers.js';
import { type Logger, silentLogger } from '../../common/logger.js';
import { EVENTS_PAGE_LIMIT, EXECUTION_LIST_LIMIT, SERVER_EVENT_NAMES as SERVER_EVENT_NAME_LIST } from '../../common/contract/index.js';

export interface ExecutionServiceOptions {
  db: Db;
  engine: Engine<any>;
  outbox: Outbox;
  hooks?: ExecutionHooks;
  logger?: Logger;
  /** Cache folded state in execution_snapshot (default true). Off: every mutation folds the log. */
  snapshots?: boolean;
  /**
   * Write the snapshot when this many events were appended since the last one (default 20), and
   * always when the execution ends: a large state is not rewritten on every event; loading reduces
   * the few newer events.
   */
  snapshotEvery?: number;
  /**
   * The spacing also grows to this fraction of the snapshot's own seq (default 0.5; 0 keeps it
   * fixed). A large loop's state grows with its events, so a fixed spacing makes the snapshot
   * bytes written grow with the square of the loop; a geometric one keeps them linear, and a cold
   * load still reduces at most that fraction of the log.
   */
  snapshotGrowth?: number;
  /** Executions whose latest state is kept in process memory (default 1000; 0 disables). */
  stateCacheSize?: number;
  /** Lease of a claim when the worker asks for none (default 20 s, as the worker asks) and the cap (default 3600 s). */
  defaultLeaseSeconds?: number;
  maxLeaseSeconds?: number;
  /** Async loop bound handed to the engine (engine default 16). */
  maxInFlight?: number;
  /** Clock and jitter source (tests). */
  now?: () => number;
  /** Called after an execution was stored waiting for a concurrency slot (the admitter's kick). */
  onWaiting?: () => void;
  random?: () => number;
  /** This server's runtime name (values-gate.ts leaves its own registration out). */
  serverName?: string;
  /**
   * A worker's event on an execution whose state this process has cached is decided before the
   * lock and written in one round trip, checked at the write (default true; see speculate).
   */
  speculation?: boolean;
  /** A top-level start of a playbook this process started before goes in one round trip (default: as `speculation`; see startAhead). */
  startAhead?: boolean;
}

/**
 * Names only the server and the engine write. The request schema refuses them at the edge; the
 * service still does, as it guards the event log (the fold) for in-process callers too.
 */
const SERVER_EVENT_NAMES = new Set<string>(SERVER_EVENT_NAME_LIST);

/**
 * The engine changes the loaded state's `steps` map in place instead of copying it (O(changed
 * steps), not O(steps), per decision): the service keeps only the newest state of an execution.
 */
const REUSE_STEPS = { reuseSteps: true } as const;

/** Most events and claims of one execution applied in one group-commit transaction. */
export { MAX_BATCH };

/** The steps diff moved to steps-diff.ts; its tests import it from here. */
export { changedSteps, touchedSteps } from './steps-diff.js';

export class PgExecutionService implements ExecutionService {
  private readonly db: Db;
  private readonly engine: Engine<ExecutionStateView>;
  private readonly hooks: ExecutionHooks;
  private readonly outbox: Outbox;
  private readonly log: Logger;
  private readonly snapshots: boolean;
  private readonly snapshotEvery: number;
  private readonly snapshotGrowth: number;
  /** The execution lock and load: the state cache and the playbook cache (loader.ts). */
  private readonly loader: ExecutionLoader;
  /**
   * Immutable facts of recent queue rows (execution, command, step) so claims and events skip
   * their look-up query; a miss asks the database. Bounded like the state cache.
   */
  private readonly queueRows = new Lru<string, QueueRef>(10_000);
  private readonly defaultLease: number;
  private readonly maxLease: number;
  private readonly maxInFlight?: number;
  private readonly now: () => number;
  private readonly random: () => number;
  /** Set by the core to its admitter's kick (server/executions/limits.ts). */
  onWaiting?: () => void;
  /** Whether writes may store large values beside their documents (rolling upgrades; values-gate.ts). */
  readonly valuesGate: ValuesGate;
  /** Set by the core: after the commit that ended an execution, its outcome to this process's waiters. */
  onEnded?: (executionId: string, ended: Ended) => void;
  /**
   * Set by the core: a transaction that ends the execution is about to commit in this process
   * (its waiters here wait for onEnded rather than read the row when the NOTIFY comes first), and
   * such a transaction that did not commit, or whose outcome is unknown (they read it then).
   */
  onEnding?: (executionId: string) => void;
  onEndAbandoned?: (executionId: string) => void;
  private readonly group: GroupCommit;
  private readonly children: Children;
  private readonly leases: Leases;
  private readonly lifecycle: Lifecycle;
  private readonly writer: DecisionWriter;
  /** Group-commit counters (tests, diagnostics): transactions committed and requests they carried. */
  get groupCommits(): GroupCommit['counters'] {
    return this.group.counters;
  }
  /** Reads of an execution whose step summaries came from the state cache (get). */
  readonly reads = { fromCache: 0 };
  /** Speculative decisions (tests, diagnostics): written in one round trip, in an opened transaction, or decided again under the lock. */
  get speculations(): GroupCommit['speculations'] {
    return this.group.speculations;
  }
  private readonly speculation: boolean;
  private readonly starts: Starts;
  /** Top-level starts (tests, diagnostics): in one pipeline, or the guess of the catalog row was stale (then two round trips). */
  get startsAhead(): { pipelined: number; stale: number } {
    return this.starts.counters;
  }

  constructor(o: ExecutionServiceOptions) {
    this.db = o.db;
    this.engine = o.engine;
    this.hooks = o.hooks ?? noopHooks;
    this.outbox = o.outbox;
    this.log = o.logger ?? silentLogger;
    this.snapshots = o.snapshots ?? true;
    this.snapshotEvery = Math.max(1, o.snapshotEvery ?? 20);
    this.snapshotGrowth = Math.max(0, o.snapshotGrowth ?? 0.5);
    this.loader = new ExecutionLoader(this.engine, this.snapshots, Math.max(0, o.stateCacheSize ?? 1000));
    this.defaultLease = o.defaultLeaseSeconds ?? 20;
    this.maxLease = o.maxLeaseSeconds ?? 3600;
    this.maxInFlight = o.maxInFlight;
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
    this.onWaiting = o.onWaiting;
    // the guard compares the vars table's API vars: only with hooks that read vars from it
    this.speculation = (o.speculation ?? true) && this.hooks.loadVarsSql !== undefined;
    this.leases = new Leases({
      db: this.db,
      log: this.log,
      queueRows: this.queueRows,
      defaultLease: this.defaultLease,
      maxLease: this.maxLease,
      enqueue: (executionId, req) => this.group.enqueue(executionId, req),
      run: (fn) => this.run(fn),
      lockAndLoad: (client, executionId) => this.loader.lockAndLoad(client, executionId),
      applyLoaded: (client, ctx, loaded, event) => this.applyLoaded(client, ctx, loaded, event),
    });
    this.lifecycle = new Lifecycle({
      db: this.db,
      log: this.log,
      run: (fn) => this.run(fn),
      lockAndLoad: (client, executionId) => this.loader.lockAndLoad(client, executionId),
      applyLoaded: (client, ctx, loaded, event) => this.applyLoaded(client, ctx, loaded, event),
      start: (req, origin) => this.start(req, origin),
    });
    this.children = new Children({
      db: this.db,
      log: this.log,
      lockAndLoad: (client, executionId) => this.loader.lockAndLoad(client, executionId),
      applyLoaded: (client, ctx, loaded, event) => this.applyLoaded(client, ctx, loaded, event),
      cancel: (executionId) => this.cancel(executionId),
    });
    this.valuesGate = new ValuesGate(this.db, { self: o.serverName ?? '' });
    this.writer = new DecisionWriter({
      hooks: this.hooks, log: this.log, children: this.children, snapshots: this.snapshots, snapshotEvery: this.snapshotEvery, snapshotGrowth: this.snapshotGrowth,
      valuesGate: this.valuesGate,
    });
    const lifecycle: TxLifecycle = {
      ending: (ctx) => this.ending(ctx),
      abandoned: (ctx) => this.abandoned(ctx),
      committed: (ctx) => this.committed(ctx),
      afterCommit: (ctx) => this.afterCommit(ctx),
    };
    this.starts = new Starts({
      db: this.db, hooks: this.hooks, engine: this.engine, loader: this.loader, children: this.children, writer: this.writer,
      aheadOn: this.speculation && (o.startAhead ?? true),
      now: () => this.now(),
      input: (now, externalVars) => this.input(now, externalVars),
      run: (fn, opts) => this.run(fn, opts),
      ...lifecycle,
      onWaiting: () => this.onWaiting?.(),
    });
    this.group = new GroupCommit({
      db: this.db, hooks: this.hooks, log: this.log, loader: this.loader, speculation: this.speculation,
      batchDeps: {
        hooks: this.hooks,
        writer: this.writer,
        handle: (state, playbook, event, now, externalVars, owned) => this.handle(state, playbook, event, now, externalVars, owned),
        handOver: (executionId) => this.handOver(executionId),
      },
      now: () => this.now(),
      runTx: (fn, opts) => this.runTx(fn, opts),
      ...lifecycle,
    });
  }

  // ---------------------------------------------------------------------------------- start

  /** `req` is valid (common/contract RunBody, checked at the HTTP edge; internal callers are typed). */
  start(req: RunRequest, origin: execStore.ExecutionOrigin = {}): Promise<RunResponse> {
    return this.starts.start(req, origin);
  }

  /** Starts an execution that waited for a concurrency slot (the admitter decided there is one); false when it no longer waits. */
  admit(executionId: string): Promise<boolean> {
    return this.starts.admit(executionId);
  }

  /** The limit of a catalog version's playbook (the admitter's question). */
  concurrencyLimit(catalogId: string): Promise<number | null> {
    return this.starts.concurrencyLimit(catalogId);
  }

  // ----------------------------------------------------------------------------------- reads

  async get(executionId: string, opts: { steps?: boolean } = {}): Promise<ExecutionRecord | null> {
    const id = parseId(executionId);
    if (!id) return null; // well-formed (the edge checked) but no execution has it: 0, or beyond int64
    if (opts.steps !== false && this.loader.stateCache.has(id)) {
      // A running execution this process wrote last (a client polling it, a long poll): the step
      // summaries are the cached state's when the log has nothing newer, instead of aggregating
      // every summary row in PostgreSQL and parsing them here on each read.
      const row = await execStore.getWithLastSeq(this.db.pool, id);
      if (!row) return null;
      const cached = this.loader.stateCache.get(id); // after the read: a commit in between shows as a newer seq
      if (cached && cached.seq === row.last_seq) {
        this.reads.fromCache++;
        // a copy: the next decision changes the cached map in place (REUSE_STEPS); summaries are replaced, never changed
        return execStore.toOrderedRecord(row, cached.state.steps);
      }
    }
    const row = await execStore.get(this.db.pool, id, opts);
    return row ? execStore.toRecord(row) : null;
  }

  async list(opts: { status?: ExecutionStatus; path?: string; parent?: string; limit?: number; offset?: number; view?: ExecutionListView } = {}): Promise<ExecutionListItem[]> {
    const summary = opts.view === 'summary';
    const rows = await execStore.list(this.db.pool, {
      status: opts.status, path: opts.path, parent: opts.parent, limit: opts.limit ?? EXECUTION_LIST_LIMIT.default, offset: opts.offset ?? 0, summary,
    });
    return rows.map(summary ? execStore.toSummary : execStore.toRecord);
  }

  async stepCounts(executionId: string): Promise<eventStore.StepCounts[] | null> {
    const id = parseId(executionId);
    if (!id || !(await execStore.get(this.db.pool, id, { steps: false }))) return null;
    return eventStore.stepCounts(this.db.pool, id);
  }

  async events(executionId: string, opts: { after?: number; limit?: number } = {}): Promise<{ events: StoredEvent[]; next_after: number | null }> {
    const id = parseId(executionId);
    if (!id || !(await execStore.get(this.db.pool, id, { steps: false }))) throw notFound(`execution ${executionId} not found`);
    const limit = opts.limit ?? EVENTS_PAGE_LIMIT.default;
    const after = opts.after ?? 0;
    return eventStore.toPage(await eventStore.list(this.db.pool, id, after, limit + 1), limit);
  }

  // ---------------------------------------------------------------------------------- events

  /**
   * `events` and `claimNext` are valid (common/contract WorkerEvent / ClaimNextRequest, checked at
   * the HTTP edge, ids canonical decimal strings); what needs the database or the lease is checked here.
   */
  async handleEvents(events: WorkerEvent[], opts: { claimNext?: ClaimNextRequest } = {}): Promise<EventsAck> {
    if (events.length === 0) return { status: 'ok', accepted: 0, duplicates: 0, commands: 0, ...(opts.claimNext ? { claimed: [] } : {}) };
    const eager = opts.claimNext ? this.leases.eagerClaim(opts.claimNext) : undefined;
    const prepared = events.map((e, i) => {
      if (SERVER_EVENT_NAMES.has(e.name)) throw badRequest(`event '${e.name}' is recorded by the server and cannot be sent${events.length > 1 ? ` (events[${i}])` : ''}`);
      const executionId = String(e.execution_id);
      const queueId = e.queue_id !== undefined && e.queue_id !== null ? String(e.queue_id) : null;
      return { executionId, queueId, name: e.name, step: e.step ?? null, payload: (e.payload ?? {}) as JsonObject, workerId: e.worker_id, leaseToken: e.lease_token };
    });

    // Existence checks before anything is applied; executions and queue rows this process knows
    // (they are never deleted while running) skip the query. A group commit hands its execution's
    // cache entry over while it runs, and events arriving then are most of them under load.
    const execIds = [...new Set(prepared.map((p) => p.executionId))].filter((id) => !this.loader.stateCache.has(id) && !this.group.busy(id));
    if (execIds.length) {
      const { rows: found } = await this.db.pool.query<{ execution_id: string }>('SELECT execution_id FROM execution WHERE execution_id = ANY($1::bigint[])', [execIds]);
      const known = new Set(found.map((r) => r.execution_id));
      const unknown = execIds.filter((id) => !known.has(id));
      if (unknown.length) throw notFound(`execution ${unknown.join(', ')} not found`, { execution_ids: unknown });
    }

    const qmap = new Map<string, QueueRef>();
    const toLookUp: string[] = [];
    for (const q of new Set(prepared.flatMap((p) => (p.queueId ? [p.queueId] : [])))) {
      const ref = this.queueRows.get(q);
      if (ref) qmap.set(q, ref);
      else toLookUp.push(q);
    }
    if (toLookUp.length) {
      const { rows } = await this.db.pool.query<QueueRef & { queue_id: string }>(
        'SELECT queue_id, execution_id, command_id, step FROM queue WHERE queue_id = ANY($1::bigint[])', [toLookUp]);
      for (const { queue_id, ...ref } of rows) {
        qmap.set(queue_id, ref);
        this.queueRows.set(queue_id, ref);
      }
      const missing = toLookUp.filter((q) => !qmap.has(q));
      if (missing.length) throw notFound(`queue entry ${missing.join(', ')} not found`, { queue_ids: missing });
    }
    for (const [i, p] of prepared.entries()) {
      const q = p.queueId ? qmap.get(p.queueId) : undefined;
      if (q && q.execution_id !== p.executionId) throw badRequest(`queue entry ${p.queueId} belongs to execution ${q.execution_id}, not ${p.executionId}`);
      // A call.done finishes a leased command: only its lease holder may send it, naming the row.
      if (p.name === 'call.done' && !p.queueId) {
        throw conflict('not_lease_holder', `call.done needs the queue_id, worker_id and lease_token of the command's lease${prepared.length > 1 ? ` (events[${i}])` : ''}`);
      }
    }

    const ack: EventsAck = { status: 'ok', accepted: 0, duplicates: 0, commands: 0 };
    if (eager) ack.claimed = [];
    for (const [i, p] of prepared.entries()) {
      const q = p.queueId ? qmap.get(p.queueId) : undefined;
      const payload = { ...p.payload };
      if (q) payload.meta = { ...(isObject(payload.meta) ? payload.meta : {}), queue_id: p.queueId, ...(p.workerId ? { worker_id: p.workerId } : {}) };
      const event: EngineEvent = { name: p.name, step: q ? q.step : p.step, payload }; // the queue row's step is authoritative
      if (q) event.command_id = q.command_id;
      const end = metrics.eventHandling.startTimer({ event: p.name });
      const claimNext = eager && i === prepared.length - 1 ? eager : undefined;
      const holder: LeaseHolder | undefined = p.name === 'call.done' && p.queueId
        ? { queueId: p.queueId, workerId: typeof p.workerId === 'string' ? p.workerId : null, leaseToken: typeof p.leaseToken === 'string' ? p.leaseToken : null }
        : undefined;
      const applied = await this.group.enqueue<EventOutcome>(p.executionId, { kind: 'event', event, claimNext, holder });
      end();
      // sent again after its answer was lost: what that answer handed over waits for nobody
      if (!applied.recorded && claimNext?.resent && holder) {
        await this.leases.releaseLostAnswer(p.executionId, holder)
          .catch((err: Error) => this.log.warn({ execution_id: p.executionId, queue_id: holder.queueId, err: err.message }, 'could not release the commands of a lost call.done answer; their leases run out'));
      }
      if (applied.recorded) ack.accepted++;
      else ack.duplicates++;
      ack.commands += applied.commands;
      if (applied.claimed) ack.claimed!.push(...applied.claimed);
    }
    return ack;
  }

  // ----------------------------------------------------------------------------- claim/lease

  /** `req` is valid (common/contract ClaimRequest, checked at the HTTP edge). */
  claim(queueId: string, req: ClaimRequest): Promise<ClaimedCommand> {
    return this.leases.claim(queueId, req);
  }

  /** `req` is valid (common/contract HeartbeatRequest, checked at the HTTP edge). */
  heartbeat(queueId: string, req: HeartbeatRequest): Promise<HeartbeatResponse> {
    return this.leases.heartbeat(queueId, req);
  }

  /** `req` is valid (common/contract ReleaseLeaseRequest, checked at the HTTP edge). */
  releaseLease(queueId: string, req: ReleaseLeaseRequest): Promise<ReleaseLeasesResponse> {
    return this.leases.releaseLease(queueId, req);
  }

  /** `workerId` is valid (common/contract WorkerId, checked at the HTTP edge). */
  releaseWorker(workerId: string): Promise<ReleaseLeasesResponse> {
    return this.leases.releaseWorker(workerId);
  }

  // ---------------------------------------------------------------------------------- cancel

  cancel(executionIdRaw: string): Promise<ExecutionRecord> {
    return this.lifecycle.cancel(executionIdRaw);
  }

  // ----------------------------------------------------------------------------------- retry

  /**
   * Resumes a failed or cancelled execution in place (engine `execution.retry`): completed steps
   * keep their results, the unfinished runs start again. `args[step]` overrides a retried step's
   * args; `payload` is merged over the execution payload. 409 `not_retryable` for a running or
   * completed execution, one with nothing left to run, or a child whose parent has ended (a child
   * is retried with its parent: the parent's re-issued command resumes it).
   */
  retry(executionIdRaw: string, body: RetryRequest = {}): Promise<ExecutionRecord> {
    return this.lifecycle.retry(executionIdRaw, body);
  }

  /**
   * Run again: a new execution of the same playbook version (even if a newer one was registered
   * since) with the same payload, or `payload` instead, linked by `rerun_of`. Any status.
   */
  rerun(executionIdRaw: string, body: RerunRequest = {}): Promise<RunResponse> {
    return this.lifecycle.rerun(executionIdRaw, body);
  }

  // --------------------------------------------------------------------- sweeper operations

  /**
   * An expired lease, re-checked under the execution lock: back to queued while attempts remain,
   * else a failed `call.done` {error: {code: 'lease_expired'}} so the execution never hangs.
   */
  reclaimLease(queueId: string, executionId: string): Promise<'requeued' | 'failed' | 'skipped'> {
    return this.leases.reclaimLease(queueId, executionId);
  }

  /** Cancels executions whose parent already ended (normally done right after the parent's commit). */
  cancelOrphans(limit = 100): Promise<number> {
    return this.lifecycle.cancelOrphans(limit);
  }

  /** Drops cached state (snapshot rows and this process's cache; all, or one execution's): the next mutation folds the log. */
  async dropSnapshots(executionId?: string): Promise<void> {
    await eventStore.dropSnapshot(this.db.pool, executionId);
    if (executionId === undefined) this.loader.stateCache.clear();
    else this.loader.stateCache.delete(executionId);
  }

  /** Current state the way a mutation loads it (process cache, snapshot + newer events, or the log). */
  async loadState(executionId: string): Promise<ExecutionStateView | undefined> {
    return this.db.tx(async (client) => (await this.loader.lockAndLoad(client, executionId))?.state);
  }

  /** State rebuilt from the event log alone (no snapshot), for checks and diagnostics. */
  async foldState(executionId: string, uptoSeq?: number): Promise<ExecutionStateView> {
    const events = (await eventStore.list(this.db.pool, executionId, 0)).filter((e) => uptoSeq === undefined || e.seq <= uptoSeq);
    return this.engine.fold(events.map(eventStore.toEngineEvent));
  }

  // -------------------------------------------------------------------------------- internals

  private input(now: number, externalVars: JsonObject): EngineInput {
    const input: EngineInput = { now, random: this.random, externalVars };
    if (this.maxInFlight !== undefined) input.maxInFlight = this.maxInFlight;
    return input;
  }

  /**
   * The engine's decision on a loaded state, changing its steps map in place (REUSE_STEPS: hand the
   * cache entry over first); `owned`: a batch's copies (HandleOptions.owned).
   */
  private handle(state: ExecutionStateView, playbook: Playbook, event: EngineEvent, now: number, externalVars: JsonObject, owned?: Set<object>): Decision {
    return this.engine.handle(state, playbook, event, this.input(now, externalVars), owned ? { reuseSteps: true, owned } : REUSE_STEPS);
  }

  /** One transaction; after commit: outbox publish, then cancel the children of ended executions. */
  private async run<T>(fn: (client: pg.PoolClient, ctx: TxCtx, begun: pg.QueryResult[]) => Promise<T>, opts: RunOptions = {}): Promise<T> {
    const { value, ctx } = await this.runTx(fn, opts);
    await this.afterCommit(ctx);
    return value;
  }

  /** After commit (never throws): outbox publish, then cancel the children of ended executions. */
  private async afterCommit(ctx: TxCtx): Promise<void> {
    for (const { id } of ctx.terminated) {
      const row = ctx.cache.get(id)?.row;
      if (row && this.onEnded) this.onEnded(id, { status: row.status, result: row.result, error: row.error, finished_at: iso(row.finished_at) ?? null });
      else this.onEndAbandoned?.(id);
    }
    if (ctx.toPublish.length) await this.outbox.publish(ctx.toPublish);
    for (const { openChildren } of ctx.terminated) await this.children.cancel(openChildren);
  }

  /** The transaction with its retries; the process cache is updated right after the commit. */
  private async runTx<T>(fn: (client: pg.PoolClient, ctx: TxCtx, begun: pg.QueryResult[]) => Promise<T>, opts: RunOptions = {}): Promise<{ value: T; ctx: TxCtx }> {
    for (let attempt = 1; ; attempt++) {
      const ctx = newCtx();
      let value: T;
      try {
        value = await this.db.tx(async (client, begun) => {
          const v = await fn(client, ctx, begun);
          this.ending(ctx); // the COMMIT goes next (unless it went with the last statement)
          return v;
        }, { begin: opts.begin, prepare: opts.prepare, commit: opts.lastCommits ? decisionCommitRules(() => this.ending(ctx)) : undefined });
      } catch (err) {
        this.abandoned(ctx);
        const code = (err as { code?: string }).code;
        const retry = attempt < 4 && (RETRYABLE.has(code ?? '') ||
          (opts.retryUniqueChild && code === '23505' && (err as { constraint?: string }).constraint === 'execution_parent_command'));
        if (!retry) throw err;
        continue;
      }
      this.committed(ctx);
      return { value, ctx };
    }
  }

  /** The transaction's ends are about to commit (onEnding). */
  private ending(ctx: TxCtx): void {
    for (const { id } of ctx.terminated) this.onEnding?.(id);
  }

  /** The transaction's ends did not commit, or may not have (onEndAbandoned). */
  private abandoned(ctx: TxCtx): void {
    for (const { id } of ctx.terminated) this.onEndAbandoned?.(id);
  }

  /** Right after a commit: the states and queue rows it wrote become this process's cache. */
  private committed(ctx: TxCtx): void {
    for (const c of ctx.counts) {
      if (c.labels) c.counter.inc(c.labels, c.n ?? 1);
      else c.counter.inc(c.n ?? 1);
    }
    for (const [id, entry] of ctx.cache) this.loader.remember(id, entry);
    for (const r of ctx.queueRows) {
      const ref: QueueRef = { execution_id: r.execution_id, command_id: r.command_id, step: r.step };
      if (r.command) ref.fresh = r.command;
      this.queueRows.set(r.queue_id, ref);
    }
    for (const q of ctx.claimed) {
      const ref = this.queueRows.get(q);
      if (ref?.fresh) this.queueRows.set(q, { execution_id: ref.execution_id, command_id: ref.command_id, step: ref.step });
    }
  }

  private async applyLoaded(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, event: EngineEvent): Promise<Applied> {
    if (!loaded.state) throw new Error(`execution ${loaded.row.execution_id} has no events`);
    const now = this.now();
    const externalVars = await this.hooks.loadVars(client, loaded.row.execution_id);
    this.handOver(loaded.row.execution_id);
    const decision = this.handle(loaded.state, loaded.playbook, event, now, externalVars);
    return this.writer.persist(client, ctx, loaded, decision, now, externalVars);
  }

  /**
   * The engine is about to change the loaded state's `steps` map in place (REUSE_STEPS): the cache
   * entry sharing it goes, so a transaction that fails leaves no half-changed state behind (the next
   * load rebuilds it); the commit caches the new state, and a decision that changed nothing puts
   * the entry back (keepUnchanged, decision-write.ts).
   */
  private handOver(executionId: string): void {
    this.loader.stateCache.delete(executionId);
  }
}
