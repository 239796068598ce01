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
 */
import type pg from 'pg';
import type { ClaimedCommand, ClaimNextRequest, ClaimRequest, EventsAck, HeartbeatRequest, HeartbeatResponse, RunRequest, RunResponse, WorkerEvent } from '../../client/protocol.js';
import type { Json, JsonObject, Playbook } from '../../playbook/types.js';
import { TERMINAL_STATUSES, type Command, type Decision, type Engine, type EngineEvent, type EngineInput, type ExecutionStateView, type ExecutionStatus } from '../engine/contract.js';
import { badRequest, conflict, gone, notFound } from '../errors.js';
import { metrics } from '../metrics.js';
import { noopHooks, type Db, type ExecutionHooks, type ExecutionRecord, type ExecutionService, type StoredEvent } from '../services.js';
import * as catalogStore from '../store/catalog.js';
import * as eventStore from '../store/events.js';
import * as execStore from '../store/executions.js';
import type { ExecutionRow } from '../store/executions.js';
import * as queueStore from '../store/queue.js';
import type { QueueRow } from '../store/queue.js';
import { writeDecision, type CloseStatus, type EagerLease } from '../store/decision.js';
import { idLiteral, parseId } from '../store/sql.js';
import { apiVarsObject, type ApiVarRow } from '../store/vars.js';
import { clampInt } from '../store/catalog-service.js';
import type { Outbox, OutboxItem } from './outbox.js';
import { Lru } from './lru.js';
import { claimedCommand, claimRefusal } from './claimed.js';
import { silentCoreLogger, type CoreLogger } from './types.js';

export interface ExecutionServiceOptions {
  db: Db;
  engine: Engine<any>;
  outbox: Outbox;
  hooks?: ExecutionHooks;
  logger?: CoreLogger;
  /** Cache folded state in execution_state (default true). Off: every mutation folds the log. */
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
  /** Lease of a claim when the worker asks for none (default 60 s) and the cap (default 3600 s). */
  defaultLeaseSeconds?: number;
  maxLeaseSeconds?: number;
  /** Async loop bound handed to the engine (engine default 16). */
  maxInFlight?: number;
  /** Clock and jitter source (tests). */
  now?: () => number;
  random?: () => number;
}

/** Names only the server and the engine write; a worker may not send them. */
const SERVER_EVENT_NAMES = new Set([
  'execution_started', 'command_issued', 'action_started', 'action_completed', 'step_completed', 'vars_set',
  'step_skipped', 'step_failed', 'execution_completed', 'execution_failed', 'execution_cancelled', 'transition',
  'case_applied', 'execution.cancel',
]);

interface TxCtx {
  toPublish: OutboxItem[];
  /** Queue rows inserted (their ids are remembered once the transaction committed). */
  queueRows: queueStore.InsertedCommand[];
  /** States to put in the process cache once the transaction committed. */
  cache: Map<string, CachedState>;
  /** Executions that became terminal in this transaction (their children are cancelled after commit). */
  terminated: string[];
}

interface CachedState {
  seq: number;
  state: ExecutionStateView;
  snapSeq: number;
  /** The execution row as this process last wrote it (its mutable columns follow the state). */
  row: ExecutionRow;
}

interface QueueRef {
  execution_id: string;
  command_id: number;
  step: string;
}

interface Loaded {
  row: ExecutionRow;
  state: ExecutionStateView | undefined;
  seq: number;
  /** seq of the stored snapshot (0: none). */
  snapSeq: number;
  playbook: Playbook;
}

interface Applied {
  decision: Decision;
  recorded: boolean;
  inserted: queueStore.InsertedCommand[];
  row: ExecutionRow;
  externalVars: JsonObject;
}

/** What one caller of the group commit waits for. */
type BatchRequest =
  | { kind: 'event'; event: EngineEvent; claimNext?: EagerClaim }
  | { kind: 'claim'; queueId: string; commandId: number; workerId: string; lease: number };
type BatchItem = BatchRequest & { resolve: (v: any) => void; reject: (e: unknown) => void };
/** An event's share of a group commit (its EventsAck counts, and its eager claims). */
interface EventOutcome { recorded: boolean; commands: number; claimed?: ClaimedCommand[] }
/** claim_next of an events request, validated. */
interface EagerClaim { workerId: string; lease: number; max: number }

/**
 * What BEGIN brought back (see prelude): the log's last seq, the API vars when the hooks can send
 * their query with it, and queue ids reserved for eager claims.
 */
interface Peek { lastSeq: number; vars?: JsonObject; queueIds: string[] }
type ItemOutcome = { ok: true; value: EventOutcome | ClaimedCommand } | { ok: false; err: unknown };

/** Most events and claims of one execution applied in one group-commit transaction. */
export const MAX_BATCH = 256;

const isTerminal = (s: ExecutionStatus) => TERMINAL_STATUSES.includes(s);
const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);
const RETRYABLE = new Set(['40P01', '40001']); // deadlock, serialization failure

export class PgExecutionService implements ExecutionService {
  private readonly db: Db;
  private readonly engine: Engine<ExecutionStateView>;
  private readonly hooks: ExecutionHooks;
  private readonly outbox: Outbox;
  private readonly log: CoreLogger;
  private readonly snapshots: boolean;
  private readonly snapshotEvery: number;
  private readonly snapshotGrowth: number;
  /**
   * Latest committed state per execution, an LRU that may be dropped at any time. Used only when
   * its seq equals the log's last seq read under the execution lock, so another replica's writes
   * are never missed. States are never mutated (the engine is copy-on-write).
   */
  private readonly stateCache: Lru<string, CachedState>;
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
  private readonly playbooks = new Map<string, Playbook>();
  /** Per execution with a group commit running: the requests waiting for the next one. */
  private readonly waiting = new Map<string, BatchItem[]>();
  /** Group-commit counters (tests, diagnostics): transactions committed and requests they carried. */
  readonly groupCommits = { transactions: 0, items: 0, fallbacks: 0, ms: 0 };

  constructor(o: ExecutionServiceOptions) {
    this.db = o.db;
    this.engine = o.engine;
    this.hooks = o.hooks ?? noopHooks;
    this.outbox = o.outbox;
    this.log = o.logger ?? silentCoreLogger;
    this.snapshots = o.snapshots ?? true;
    this.snapshotEvery = Math.max(1, o.snapshotEvery ?? 20);
    this.snapshotGrowth = Math.max(0, o.snapshotGrowth ?? 0.5);
    this.stateCache = new Lru(Math.max(0, o.stateCacheSize ?? 1000));
    this.defaultLease = o.defaultLeaseSeconds ?? 60;
    this.maxLease = o.maxLeaseSeconds ?? 3600;
    this.maxInFlight = o.maxInFlight;
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
  }

  // ---------------------------------------------------------------------------------- start

  async start(req: RunRequest): Promise<RunResponse> {
    if (!req || typeof req.path !== 'string' || req.path.trim() === '') throw badRequest('path is required');
    const payload = req.payload ?? {};
    if (!isObject(payload)) throw badRequest('payload must be a JSON object');
    if (req.version !== undefined && req.version !== null && (!Number.isInteger(req.version) || req.version < 1)) throw badRequest('version must be a positive integer');
    const entry = await catalogStore.getLive(this.db.pool, req.path, req.version ?? undefined);
    if (!entry) throw notFound(req.version ? `playbook '${req.path}' version ${req.version} not found` : `playbook '${req.path}' not found`);

    let parentId: string | null = null;
    let parentQueue: QueueRow | null = null;
    if (req.parent_execution_id !== undefined && req.parent_execution_id !== null) {
      parentId = parseId(req.parent_execution_id);
      if (!parentId) throw badRequest('parent_execution_id is not an id');
    }
    if (req.parent_queue_id !== undefined && req.parent_queue_id !== null) {
      const qid = parseId(req.parent_queue_id);
      if (!qid) throw badRequest('parent_queue_id is not an id');
      parentQueue = await queueStore.get(this.db.pool, qid);
      if (!parentQueue) throw notFound(`queue entry ${qid} not found`);
      if (parentId && parentQueue.execution_id !== parentId) throw badRequest(`queue entry ${qid} belongs to execution ${parentQueue.execution_id}, not ${parentId}`);
      parentId = parentQueue.execution_id;
    }
    let parentRow: ExecutionRow | null = null;
    if (parentId) {
      parentRow = await execStore.get(this.db.pool, parentId);
      if (!parentRow) throw notFound(`parent execution ${parentId} not found`);
    }

    return this.run(async (client, ctx) => {
      if (parentId && parentQueue) {
        const existing = await execStore.findChild(client, parentId, parentQueue.command_id);
        if (existing) return { execution_id: existing.execution_id, status: 'started' as const, path: existing.path, version: existing.version, commands: 0 };
      }
      const row = await execStore.insert(client, {
        catalog_id: entry.catalog_id, path: entry.path, version: entry.version, payload,
        parent_execution_id: parentId, parent_command_id: parentQueue?.command_id ?? null, parent_queue_id: parentQueue?.queue_id ?? null,
        root_execution_id: parentRow ? parentRow.root_execution_id : null,
      });
      const id = row.execution_id;
      await lock(client, id);
      if (parentId) {
        await lock(client, parentId); // child → parent
        const p = await execStore.get(client, parentId);
        if (!p || isTerminal(p.status)) throw gone('finished', `parent execution ${parentId} is ${p?.status ?? 'gone'}`);
        if (parentQueue && !(await queueStore.holdForChild(client, parentQueue.queue_id, id))) {
          throw gone('finished', `the parent's command (queue entry ${parentQueue.queue_id}) is already finished`);
        }
      }
      this.playbooks.set(entry.catalog_id, entry.playbook);
      const now = this.now();
      const externalVars = await this.hooks.loadVars(client, id);
      const decision = this.engine.start(entry.playbook, {
        execution_id: id, path: entry.path, version: entry.version, catalog_id: entry.catalog_id, payload,
        parent_execution_id: parentId, root_execution_id: row.root_execution_id,
      }, this.input(now, externalVars));
      metrics.executions.inc({ status: 'started' });
      const applied = await this.persist(client, ctx, { row, state: undefined, seq: 0, snapSeq: 0, playbook: entry.playbook }, decision, now, externalVars);
      return { execution_id: id, status: 'started' as const, path: entry.path, version: entry.version, commands: applied.inserted.length };
    }, { retryUniqueChild: true });
  }

  // ----------------------------------------------------------------------------------- reads

  async get(executionId: string): Promise<ExecutionRecord | null> {
    const id = parseId(executionId);
    if (!id) throw badRequest(`execution_id '${executionId}' is not an id`);
    const row = await execStore.get(this.db.pool, id);
    return row ? execStore.toRecord(row) : null;
  }

  async list(opts: { status?: ExecutionStatus; path?: string; limit?: number; offset?: number } = {}): Promise<ExecutionRecord[]> {
    if (opts.status && !['started', 'running', 'completed', 'failed', 'cancelled'].includes(opts.status)) throw badRequest(`unknown status '${opts.status}'`);
    const rows = await execStore.list(this.db.pool, {
      status: opts.status, path: opts.path, limit: clampInt(opts.limit, 100, 1, 1000), offset: clampInt(opts.offset, 0, 0, Number.MAX_SAFE_INTEGER),
    });
    return rows.map(execStore.toRecord);
  }

  async events(executionId: string, opts: { after?: number; limit?: number } = {}): Promise<{ events: StoredEvent[]; next_after: number | null }> {
    const id = parseId(executionId);
    if (!id) throw badRequest(`execution_id '${executionId}' is not an id`);
    if (!(await execStore.get(this.db.pool, id))) throw notFound(`execution ${id} not found`);
    const limit = clampInt(opts.limit, 1000, 1, 10_000);
    const after = clampInt(opts.after, 0, 0, 2 ** 31 - 1);
    const events = await eventStore.list(this.db.pool, id, after, limit);
    return { events, next_after: events.length === limit ? events[events.length - 1].seq : null };
  }

  // ---------------------------------------------------------------------------------- events

  async handleEvents(events: WorkerEvent[], opts: { claimNext?: ClaimNextRequest } = {}): Promise<EventsAck> {
    if (!Array.isArray(events) || events.length === 0) throw badRequest('no events given');
    const eager = opts.claimNext ? this.eagerClaim(opts.claimNext) : undefined;
    const prepared = events.map((e, i) => {
      const where = events.length > 1 ? ` (events[${i}])` : '';
      if (!isObject(e)) throw badRequest(`an event must be an object${where}`);
      const executionId = parseId(e.execution_id);
      if (!executionId) throw badRequest(`execution_id is missing or not an id${where}`);
      if (typeof e.name !== 'string' || e.name.length === 0 || e.name.length > 200) throw badRequest(`name must be a non-empty string${where}`);
      if (SERVER_EVENT_NAMES.has(e.name)) throw badRequest(`event '${e.name}' is recorded by the server and cannot be sent${where}`);
      if (e.payload !== undefined && e.payload !== null && !isObject(e.payload)) throw badRequest(`payload must be an object${where}`);
      if (e.step !== undefined && e.step !== null && typeof e.step !== 'string') throw badRequest(`step must be a string or null${where}`);
      let queueId: string | null = null;
      if (e.queue_id !== undefined && e.queue_id !== null) {
        queueId = parseId(e.queue_id);
        if (!queueId) throw badRequest(`queue_id is not an id${where}`);
      }
      return { executionId, queueId, name: e.name, step: e.step ?? null, payload: (e.payload ?? {}) as JsonObject, workerId: e.worker_id };
    });

    // Existence checks before anything is applied; executions and queue rows this process knows
    // (they are never deleted while running) skip the query.
    const execIds = [...new Set(prepared.map((p) => p.executionId))].filter((id) => !this.stateCache.has(id));
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
    for (const p of prepared) {
      const q = p.queueId ? qmap.get(p.queueId) : undefined;
      if (q && q.execution_id !== p.executionId) throw badRequest(`queue entry ${p.queueId} belongs to execution ${q.execution_id}, not ${p.executionId}`);
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
      const applied = await this.enqueue<EventOutcome>(p.executionId, { kind: 'event', event, claimNext });
      end();
      if (applied.recorded) ack.accepted++;
      else ack.duplicates++;
      ack.commands += applied.commands;
      if (applied.claimed) ack.claimed!.push(...applied.claimed);
    }
    return ack;
  }

  // ----------------------------------------------------------------------------- claim/lease

  async claim(queueIdRaw: string, req: ClaimRequest): Promise<ClaimedCommand> {
    const queueId = parseId(queueIdRaw);
    if (!queueId) throw badRequest(`queue_id '${queueIdRaw}' is not an id`);
    const workerId = this.workerId(req);
    const lease = this.leaseSeconds(req?.lease_seconds);
    let ref = this.queueRows.get(queueId);
    if (!ref) {
      const row0 = await queueStore.get(this.db.pool, queueId);
      if (!row0) throw notFound(`queue entry ${queueId} not found`);
      // Fast refusal without the execution lock (duplicate notifications are common). A row only
      // leaves a finished status never; a stale 'leased' may have been queued again meanwhile, and
      // that re-queue published a fresh notification, so refusing this one loses nothing.
      if (row0.status !== 'queued') throw claimRefusal(row0, workerId);
      ref = { execution_id: row0.execution_id, command_id: row0.command_id, step: row0.step };
      this.queueRows.set(queueId, ref);
    }
    // A row this process issued is claimed without that look-up: the group commit refuses it under
    // the lock if it is no longer queued. The lease and its `action_started` are written by the
    // execution's next group commit (see enqueue), with whatever else arrived for it meanwhile.
    return this.enqueue<ClaimedCommand>(ref.execution_id, { kind: 'claim', queueId, commandId: ref.command_id, workerId, lease });
  }

  async heartbeat(queueIdRaw: string, req: HeartbeatRequest): Promise<HeartbeatResponse> {
    const queueId = parseId(queueIdRaw);
    if (!queueId) throw badRequest(`queue_id '${queueIdRaw}' is not an id`);
    const workerId = this.workerId(req);
    const until = await queueStore.heartbeat(this.db.pool, queueId, workerId, this.leaseSeconds(req?.lease_seconds));
    if (until) return { lease_until: until.toISOString() };
    const row = await queueStore.get(this.db.pool, queueId);
    if (!row) throw notFound(`queue entry ${queueId} not found`);
    if (row.status === 'done' || row.status === 'failed' || row.status === 'cancelled') throw gone('finished', `queue entry ${queueId} is ${row.status}`, { status: row.status });
    throw conflict('not_owner', `queue entry ${queueId} is not leased by worker '${workerId}'`, { status: row.status, worker_id: row.worker_id });
  }

  // ---------------------------------------------------------------------------------- cancel

  async cancel(executionIdRaw: string): Promise<ExecutionRecord> {
    const id = parseId(executionIdRaw);
    if (!id) throw badRequest(`execution_id '${executionIdRaw}' is not an id`);
    const row = await this.run(async (client, ctx) => {
      const loaded = await this.lockAndLoad(client, id);
      if (!loaded) throw notFound(`execution ${id} not found`);
      if (isTerminal(loaded.row.status)) return loaded.row;
      const applied = await this.applyLoaded(client, ctx, loaded, { name: 'execution.cancel', step: null, payload: { reason: 'cancelled by request' } });
      return applied.row;
    });
    return execStore.toRecord(row);
  }

  // --------------------------------------------------------------------- sweeper operations

  /**
   * An expired lease, re-checked under the execution lock: back to queued while attempts remain,
   * else a failed `call.done` {error: {code: 'lease_expired'}} so the execution never hangs.
   */
  async reclaimLease(queueId: string, executionId: string): Promise<'requeued' | 'failed' | 'skipped'> {
    return this.run(async (client, ctx) => {
      const loaded = await this.lockAndLoad(client, executionId);
      if (!loaded) return 'skipped';
      const { rows } = await client.query<QueueRow>(
        `SELECT * FROM queue WHERE queue_id = $1 AND status = 'leased' AND lease_until < now() FOR UPDATE`, [queueId]);
      const r = rows[0];
      if (!r) return 'skipped';
      if (r.attempts < r.max_deliveries) {
        await queueStore.requeue(client, queueId);
        ctx.toPublish.push({ queue_id: queueId, execution_id: executionId, step: r.step });
        this.log.info({ queue_id: queueId, execution_id: executionId, attempts: r.attempts, worker_id: r.worker_id }, 'lease expired; command queued again');
        return 'requeued';
      }
      const error = { message: `lease expired after ${r.attempts} attempts`, code: 'lease_expired' };
      await this.applyLoaded(client, ctx, loaded, {
        name: 'call.done', step: r.step, command_id: r.command_id,
        payload: { error, meta: { queue_id: queueId, attempts: r.attempts, worker_id: r.worker_id } },
      });
      await queueStore.finish(client, executionId, r.command_id, 'failed'); // even if the engine had it already
      metrics.commandsFinished.inc({ outcome: 'expired' });
      this.log.warn({ queue_id: queueId, execution_id: executionId, attempts: r.attempts }, 'lease expired after the last attempt; step call failed');
      return 'failed';
    });
  }

  /** Cancels executions whose parent already ended (normally done right after the parent's commit). */
  async cancelOrphans(limit = 100): Promise<number> {
    const ids = await execStore.orphanedChildren(this.db.pool, limit);
    for (const id of ids) await this.cancel(id).catch((err) => this.log.warn({ execution_id: id, err: String(err) }, 'cancelling an orphaned child failed'));
    return ids.length;
  }

  /** Drops cached state (snapshot rows and this process's cache; all, or one execution's): the next mutation folds the log. */
  async dropSnapshots(executionId?: string): Promise<void> {
    await eventStore.dropSnapshot(this.db.pool, executionId);
    if (executionId === undefined) this.stateCache.clear();
    else this.stateCache.delete(executionId);
  }

  private remember(id: string, entry: CachedState) {
    if (isTerminal(entry.state.status)) this.stateCache.delete(id); // nothing more will happen to it (normally)
    else this.stateCache.set(id, entry);
  }

  /** Current state the way a mutation loads it (process cache, snapshot + newer events, or the log). */
  async loadState(executionId: string): Promise<ExecutionStateView | undefined> {
    return this.db.tx(async (client) => (await this.lockAndLoad(client, executionId))?.state);
  }

  /** State rebuilt from the event log alone (no snapshot), for checks and diagnostics. */
  async foldState(executionId: string, uptoSeq?: number): Promise<ExecutionStateView> {
    const events = (await eventStore.list(this.db.pool, executionId, 0)).filter((e) => uptoSeq === undefined || e.seq <= uptoSeq);
    return this.engine.fold(events.map(eventStore.toEngineEvent));
  }

  // -------------------------------------------------------------------------------- internals

  private workerId(req: { worker_id?: unknown } | undefined): string {
    const w = req?.worker_id;
    if (typeof w !== 'string' || w.trim() === '' || w.length > 200) throw badRequest('worker_id is required');
    if (w.startsWith('execution:')) throw badRequest(`worker_id may not start with 'execution:'`);
    return w;
  }

  private eagerClaim(req: ClaimNextRequest): EagerClaim {
    if (req === null || typeof req !== 'object' || Array.isArray(req)) throw badRequest('claim_next must be an object');
    const max = req.max ?? 1;
    if (!Number.isInteger(max) || max < 1 || max > 16) throw badRequest('claim_next.max must be an integer from 1 to 16');
    return { workerId: this.workerId(req), lease: this.leaseSeconds(req.lease_seconds), max };
  }

  private leaseSeconds(v: unknown): number {
    if (v === undefined || v === null) return this.defaultLease;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw badRequest('lease_seconds must be a positive number');
    return Math.min(this.maxLease, Math.max(1, v));
  }

  private input(now: number, externalVars: JsonObject): EngineInput {
    const input: EngineInput = { now, random: this.random, externalVars };
    if (this.maxInFlight !== undefined) input.maxInFlight = this.maxInFlight;
    return input;
  }

  /** One transaction; after commit: outbox publish, then cancel the children of ended executions. */
  private async run<T>(fn: (client: pg.PoolClient, ctx: TxCtx) => Promise<T>, opts: { retryUniqueChild?: boolean } = {}): Promise<T> {
    const { value, ctx } = await this.runTx(fn, opts);
    await this.afterCommit(ctx);
    return value;
  }

  /** After commit (never throws): outbox publish, then cancel the children of ended executions. */
  private async afterCommit(ctx: TxCtx): Promise<void> {
    if (ctx.toPublish.length) await this.outbox.publish(ctx.toPublish);
    for (const id of ctx.terminated) await this.cancelChildren(id);
  }

  /** The transaction with its retries; the process cache is updated right after the commit. */
  private async runTx<T>(fn: (client: pg.PoolClient, ctx: TxCtx, begun: pg.QueryResult[]) => Promise<T>, opts: { retryUniqueChild?: boolean; begin?: string } = {}): Promise<{ value: T; ctx: TxCtx }> {
    for (let attempt = 1; ; attempt++) {
      const ctx: TxCtx = { toPublish: [], queueRows: [], terminated: [], cache: new Map() };
      let value: T;
      try {
        value = await this.db.tx((client, begun) => fn(client, ctx, begun), { begin: opts.begin });
      } catch (err) {
        const code = (err as { code?: string }).code;
        const retry = attempt < 4 && (RETRYABLE.has(code ?? '') ||
          (opts.retryUniqueChild && code === '23505' && (err as { constraint?: string }).constraint === 'execution_parent_command'));
        if (!retry) throw err;
        continue;
      }
      for (const [id, entry] of ctx.cache) this.remember(id, entry);
      for (const r of ctx.queueRows) this.queueRows.set(r.queue_id, { execution_id: r.execution_id, command_id: r.command_id, step: r.step });
      return { value, ctx };
    }
  }

  private async cancelChildren(parentId: string): Promise<void> {
    let ids: string[];
    try {
      ids = await execStore.openChildren(this.db.pool, parentId);
    } catch (err) {
      this.log.warn({ execution_id: parentId, err: String(err) }, 'listing children failed; the sweeper will cancel them');
      return;
    }
    for (const id of ids) {
      await this.cancel(id).catch((err) => this.log.warn({ execution_id: id, err: String(err) }, 'cancelling a child failed; the sweeper will retry'));
    }
  }

  /**
   * Sent with a group commit's BEGIN: the lock, the log's last seq, the API vars when the hooks can
   * give their query, and `reserve` queue ids for eager claims (an action_started names its
   * queue_id before the row is written; ids unused are gaps, as a rolled-back insert leaves).
   */
  private prelude(executionId: string, reserve: number): { sql: string; read: (results: pg.QueryResult[]) => Peek } {
    const parts = [lockPrelude(executionId)];
    const vars = this.hooks.loadVarsSql?.(executionId);
    if (vars) parts.push(vars);
    if (reserve > 0) parts.push(`SELECT nextval(pg_get_serial_sequence('queue', 'queue_id'))::text AS id FROM generate_series(1, ${Math.floor(reserve)})`);
    return {
      sql: parts.join('; '),
      // results: [lock, last seq, vars?, ids?]
      read: (r) => ({
        lastSeq: Number(r[1]?.rows[0]?.last_seq ?? 0),
        vars: vars ? apiVarsObject(r[2].rows as ApiVarRow[]) : undefined,
        queueIds: reserve > 0 ? r[vars ? 3 : 2].rows.map((x: { id: string }) => x.id) : [],
      }),
    };
  }

  private async playbookFor(client: pg.PoolClient, catalogId: string): Promise<Playbook> {
    const hit = this.playbooks.get(catalogId);
    if (hit) return hit;
    const entry = await catalogStore.getById(client, catalogId, { includeDeleted: true });
    if (!entry) throw new Error(`catalog entry ${catalogId} of an execution is missing`);
    if (this.playbooks.size >= 500) this.playbooks.delete(this.playbooks.keys().next().value!);
    this.playbooks.set(catalogId, entry.playbook);
    return entry.playbook;
  }

  /**
   * Takes the execution's lock and rebuilds its state: the process cache when it is as new as the
   * log, else the snapshot + newer events, else the whole log. `peek` is the lock and the log's last
   * seq already taken with BEGIN (lockPrelude) by the caller.
   */
  private async lockAndLoad(client: pg.PoolClient, executionId: string, peek?: Peek): Promise<Loaded | null> {
    let lastSeq: number;
    if (peek) {
      lastSeq = peek.lastSeq;
    } else {
      await lock(client, executionId);
      lastSeq = await eventStore.lastSeq(client, executionId);
    }
    const cached = this.stateCache.get(executionId);
    if (cached && cached.seq === lastSeq && lastSeq > 0) {
      const playbook = await this.playbookFor(client, cached.row.catalog_id);
      return { row: cached.row, state: cached.state, seq: cached.seq, snapSeq: cached.snapSeq, playbook };
    }
    const row = await execStore.get(client, executionId);
    if (!row) return null;
    const playbook = await this.playbookFor(client, row.catalog_id);
    let state: ExecutionStateView | undefined;
    let seq = 0;
    let snapSeq = 0;
    const snap = this.snapshots ? await eventStore.loadSnapshot<ExecutionStateView>(client, executionId) : null;
    if (snap) {
      state = snap.state;
      seq = snap.seq;
      snapSeq = snap.seq;
      for (const e of await eventStore.list(client, executionId, seq)) {
        state = this.engine.reduce(state, eventStore.toEngineEvent(e));
        seq = e.seq;
      }
    } else {
      const all = await eventStore.list(client, executionId, 0);
      if (all.length) {
        state = this.engine.fold(all.map(eventStore.toEngineEvent));
        seq = all[all.length - 1].seq;
      }
    }
    return { row, state, seq, snapSeq, playbook };
  }

  private async applyLoaded(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, event: EngineEvent): Promise<Applied> {
    if (!loaded.state) throw new Error(`execution ${loaded.row.execution_id} has no events`);
    const now = this.now();
    const externalVars = await this.hooks.loadVars(client, loaded.row.execution_id);
    const decision = this.engine.handle(loaded.state, loaded.playbook, event, this.input(now, externalVars));
    return this.persist(client, ctx, loaded, decision, now, externalVars);
  }

  private async persist(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, decision: Decision, now: number, externalVars: JsonObject): Promise<Applied> {
    const id = loaded.row.execution_id;
    if (decision.events.length === 0 && decision.commands.length === 0) {
      return { decision, recorded: false, inserted: [], row: loaded.row, externalVars };
    }
    const closes = new Map<number, CloseStatus>();
    await this.sideEffects(client, id, decision, closes);
    const wasTerminal = isTerminal(loaded.row.status);
    const { row, inserted } = await this.write(client, ctx, loaded, decision.state, decision.events, decision.commands, closes, now);
    if (isTerminal(row.status) && !wasTerminal) await this.ended(client, ctx, row);
    return { decision, recorded: decision.events.length > 0, inserted, row, externalVars };
  }

  /**
   * What a decision's events do besides being appended: `vars_set` persists through the hooks; a
   * recorded `call.done` closes its queue row (done, or failed when it carries an error); commands
   * the decision made obsolete (loop items after an early break, the open calls of a failed or
   * skipped step) are cancelled, so no worker starts them and a running one is told 410 on its next
   * heartbeat. The first close of a row wins, as one by one. Returns whether vars were written.
   */
  private async sideEffects(client: pg.PoolClient, id: string, decision: Decision, closes: Map<number, CloseStatus>): Promise<boolean> {
    let varsWritten = false;
    for (const ev of decision.events) {
      if (ev.name === 'vars_set') {
        const variables = isObject(ev.payload?.variables) ? ev.payload.variables : {};
        await this.hooks.onVarsSet(client, id, variables, ev.step ?? '');
        varsWritten = true;
      } else if (ev.name === 'call.done' && ev.command_id !== undefined && ev.command_id !== null) {
        const failed = ev.payload?.error !== undefined && ev.payload?.error !== null;
        if (!closes.has(ev.command_id)) closes.set(ev.command_id, failed ? 'failed' : 'done');
        metrics.commandsFinished.inc({ outcome: failed ? 'error' : 'ok' });
      }
    }
    for (const c of decision.cancelled_commands ?? []) if (!closes.has(c)) closes.set(c, 'cancelled');
    return varsWritten;
  }

  /**
   * Writes a decision's (or a batch's) events, new queue rows, closes, the execution row and, when
   * due, the snapshot in one statement. Notifications, the cache entry and the queue rows' ids
   * wait in ctx for the commit.
   */
  private async write(
    client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, state: ExecutionStateView, events: EngineEvent[], commands: Command[],
    closes: Map<number, CloseStatus>, now: number, leases?: Map<number, EagerLease>,
  ): Promise<{ row: ExecutionRow; inserted: queueStore.InsertedCommand[] }> {
    const id = loaded.row.execution_id;
    const seq = loaded.seq + events.length;
    const terminal = isTerminal(state.status);
    const spacing = Math.max(this.snapshotEvery, Math.floor(loaded.snapSeq * this.snapshotGrowth));
    const snapshot = this.snapshots && (terminal || seq - loaded.snapSeq >= spacing) ? { seq, state } : undefined;
    const execution = { status: state.status, result: (state.result ?? null) as Json | null, error: (state.error ?? null) as Json | null, steps: state.steps ?? {}, terminal };
    const written = await writeDecision(client, {
      executionId: id, firstSeq: loaded.seq + 1, events, commands, nowMs: now,
      closes: [...closes].map(([command_id, status]) => ({ command_id, status })), execution, snapshot, leases,
    });
    if (written.inserted.length) metrics.commandsIssued.inc(written.inserted.length);
    if (written.cancelled) metrics.commandsFinished.inc({ outcome: 'cancelled' }, written.cancelled);
    for (const c of written.inserted) {
      if (c.due) ctx.toPublish.push({ queue_id: c.queue_id, execution_id: id, step: c.step });
      ctx.queueRows.push(c);
    }
    const row: ExecutionRow = {
      ...loaded.row, status: execution.status, result: execution.result, error: execution.error, steps: execution.steps,
      updated_at: written.updated_at, finished_at: written.finished_at,
    };
    if (snapshot) loaded.snapSeq = seq;
    loaded.row = row;
    loaded.state = state;
    loaded.seq = seq;
    ctx.cache.set(id, { seq, state, snapSeq: loaded.snapSeq, row });
    return { row, inserted: written.inserted };
  }

  /** The execution became terminal in this transaction: close its queue, hook, tell the parent. */
  private async ended(client: pg.PoolClient, ctx: TxCtx, row: ExecutionRow): Promise<void> {
    const id = row.execution_id;
    const cancelled = await queueStore.cancelOpen(client, id);
    if (cancelled) metrics.commandsFinished.inc({ outcome: 'cancelled' }, cancelled);
    await this.hooks.onExecutionTerminal(client, { execution_id: id, root_execution_id: row.root_execution_id, catalog_id: row.catalog_id });
    metrics.executions.inc({ status: row.status });
    ctx.terminated.push(id);
    if (row.parent_execution_id && row.parent_command_id !== null) await this.notifyParent(client, ctx, row);
  }

  // ------------------------------------------------------------------------- group commit

  /**
   * Group commit: requests (worker events, claims) for one execution that arrive while a
   * transaction of that execution runs in this process wait and are then applied together — one
   * lock, one load, the engine on each in arrival order, one multi-row append, bulk queue writes,
   * one execution-row update, one commit, one outbox publish. Each caller gets its own outcome.
   * Across replicas the advisory lock still serialises the transactions.
   */
  private enqueue<T>(executionId: string, req: BatchRequest): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const item = { ...req, resolve, reject } as BatchItem;
      const queue = this.waiting.get(executionId);
      if (queue) {
        queue.push(item);
        return;
      }
      const fresh = [item];
      this.waiting.set(executionId, fresh);
      void this.drain(executionId, fresh);
    });
  }

  private async drain(executionId: string, queue: BatchItem[]): Promise<void> {
    try {
      while (queue.length) await this.commitBatch(executionId, queue.splice(0, MAX_BATCH));
    } finally {
      this.waiting.delete(executionId); // no await since the queue emptied: nothing was added in between
    }
  }

  /** Never throws: every item is settled. A failed batch of several is retried one by one. */
  private async commitBatch(executionId: string, batch: BatchItem[]): Promise<void> {
    let outcomes: ItemOutcome[];
    let ctx: TxCtx;
    const t0 = performance.now();
    try {
      const reserve = batch.reduce((n, it) => n + (it.kind === 'event' && it.claimNext ? it.claimNext.max : 0), 0);
      const prelude = this.prelude(executionId, reserve);
      ({ value: outcomes, ctx } = await this.runTx((client, c, begun) => this.applyBatch(client, c, executionId, batch, prelude.read(begun)), { begin: prelude.sql }));
    } catch (err) {
      if (batch.length === 1) {
        batch[0].reject(err);
        return;
      }
      this.groupCommits.fallbacks++;
      this.log.warn({ execution_id: executionId, requests: batch.length, err: String(err) }, 'group commit failed; applying its requests one by one');
      for (const item of batch) await this.commitBatch(executionId, [item]);
      return;
    }
    this.groupCommits.ms += performance.now() - t0;
    this.groupCommits.transactions++;
    this.groupCommits.items += batch.length;
    // The next batch of this execution need not wait for this one's notifications: publishing
    // (one broker round trip per command) overlaps its transaction. Callers are answered after it.
    void this.afterCommit(ctx).finally(() => batch.forEach((item, i) => {
      const o = outcomes[i];
      if (o.ok) item.resolve(o.value);
      else item.reject(o.err);
    }));
  }

  /**
   * One transaction for a batch. Per-request refusals (a claim of a row no longer queued) are
   * outcomes; anything else throws and fails the whole batch (the caller then retries one by one,
   * so one bad request cannot fail the others). Queue rows closed earlier in the batch are known
   * in memory, so a later claim of one is refused exactly as if each request had its own
   * transaction.
   */
  private async applyBatch(client: pg.PoolClient, ctx: TxCtx, id: string, batch: BatchItem[], peek: Peek): Promise<ItemOutcome[]> {
    const loaded = await this.lockAndLoad(client, id, peek);
    if (!loaded) return batch.map(() => ({ ok: false, err: notFound(`execution ${id} not found`) }));
    if (!loaded.state) throw new Error(`execution ${id} has no events`);
    const now = this.now();
    let externalVars = peek.vars ?? await this.hooks.loadVars(client, id);
    let varsChanged = false;
    let state = loaded.state;
    const wasTerminal = isTerminal(loaded.row.status);
    const events: EngineEvent[] = [];
    const commands: Command[] = [];
    const issuedBy = new Map<number, EventOutcome>();
    /** Queue rows this batch closes, first decision wins (like one-by-one: only open rows change). */
    const closes = new Map<number, CloseStatus>();
    let changed = false;
    const outcomes: ItemOutcome[] = [];
    /** Commands leased at insertion (eager claims), with the ids reserved for them in the prelude. */
    const leases = new Map<number, EagerLease>();
    const reserved = [...peek.queueIds];

    /** Leases taken for a run of consecutive claims (one UPDATE), by batch index. */
    const leased = new Map<number, QueueRow | null>();
    for (const [index, item] of batch.entries()) {
      let event: EngineEvent;
      let claimed: QueueRow | null = null;
      if (item.kind === 'claim') {
        const closed = isTerminal(state.status) ? 'cancelled' : closes.get(item.commandId);
        if (closed) {
          outcomes.push({ ok: false, err: gone('finished', `queue entry ${item.queueId} is ${closed}`, { status: closed }) });
          continue;
        }
        if (!leased.has(index)) await this.claimRun(client, batch, index, closes, leased);
        claimed = leased.get(index) ?? null;
        if (!claimed) {
          const row = await queueStore.get(client, item.queueId);
          outcomes.push({ ok: false, err: row ? claimRefusal(row, item.workerId) : notFound(`queue entry ${item.queueId} not found`) });
          continue;
        }
        metrics.commandsClaimed.inc();
        event = {
          name: 'action_started', step: claimed.step, command_id: claimed.command_id,
          payload: { queue_id: item.queueId, worker_id: item.workerId, delivery: claimed.attempts, lease_until: claimed.lease_until!.toISOString() },
        };
      } else {
        event = item.event;
      }
      if (varsChanged) {
        externalVars = await this.hooks.loadVars(client, id);
        varsChanged = false;
      }
      const decision = this.engine.handle(state, loaded.playbook, event, this.input(now, externalVars));
      if (await this.sideEffects(client, id, decision, closes)) varsChanged = true;
      events.push(...decision.events);
      const outcome: EventOutcome = { recorded: decision.events.length > 0, commands: 0 };
      for (const c of decision.commands) {
        commands.push(c);
        issuedBy.set(c.command_id, outcome);
      }
      if (decision.events.length || decision.commands.length) changed = true;
      state = decision.state;
      if (item.kind === 'event' && item.claimNext) {
        outcome.claimed = [];
        for (const c of decision.commands) {
          if (outcome.claimed.length >= item.claimNext.max || reserved.length === 0 || isTerminal(state.status)) break;
          if ((c.available_at ?? now) > now) continue;
          const lease: EagerLease = { queue_id: reserved.shift()!, worker_id: item.claimNext.workerId, lease_until: new Date(now + item.claimNext.lease * 1000) };
          const started = this.engine.handle(state, loaded.playbook, {
            name: 'action_started', step: c.step, command_id: c.command_id,
            payload: { queue_id: lease.queue_id, worker_id: lease.worker_id, delivery: 1, lease_until: lease.lease_until.toISOString() },
          }, this.input(now, externalVars));
          if (started.events.length === 0) continue;
          events.push(...started.events);
          state = started.state;
          leases.set(c.command_id, lease);
          metrics.commandsClaimed.inc();
          const row: QueueRow = {
            queue_id: lease.queue_id, execution_id: id, command_id: c.command_id, step: c.step, command: c, status: 'leased', attempts: 1,
            max_deliveries: c.max_deliveries ?? 3, available_at: new Date(now), lease_until: lease.lease_until, worker_id: lease.worker_id,
            heartbeat_at: new Date(now), published_at: null, created_at: new Date(now), finished_at: null,
          };
          outcome.claimed.push(claimedCommand(loaded.playbook, loaded.row, row, { ...(state.vars ?? {}), ...externalVars }));
        }
      }
      outcomes.push({
        ok: true,
        value: claimed ? claimedCommand(loaded.playbook, loaded.row, claimed, { ...(state.vars ?? {}), ...externalVars }) : outcome,
      });
    }
    if (!changed) return outcomes;

    const { row, inserted } = await this.write(client, ctx, loaded, state, events, commands, closes, now, leases);
    for (const c of inserted) {
      const o = issuedBy.get(c.command_id);
      if (o) o.commands++;
    }
    if (leases.size) {
      // an eager claim holds only if its row went in leased: not skipped as a duplicate command,
      // not closed by a later event of this batch
      const ok = new Set(inserted.filter((c) => !closes.has(c.command_id)).map((c) => c.queue_id));
      for (const o of outcomes) {
        if (o.ok && 'claimed' in o.value && o.value.claimed) o.value.claimed = o.value.claimed.filter((c) => ok.has(String(c.queue_id)));
      }
    }
    if (isTerminal(row.status) && !wasTerminal) await this.ended(client, ctx, row);
    return outcomes;
  }

  /**
   * Leases the claims from `start` up to the next non-claim in one UPDATE (an action_started does
   * not close rows, so nothing in between could refuse them). A queue id asked twice goes to the
   * first asker; the others find the row leased (409), as one by one.
   */
  private async claimRun(client: pg.PoolClient, batch: BatchItem[], start: number, closes: Map<number, string>, leased: Map<number, QueueRow | null>): Promise<void> {
    const first = new Map<string, number>();
    for (let i = start; i < batch.length; i++) {
      const it = batch[i];
      if (it.kind !== 'claim') break;
      leased.set(i, null);
      if (!closes.has(it.commandId) && !first.has(it.queueId)) first.set(it.queueId, i);
    }
    const rows = await queueStore.claimMany(client, [...first].map(([queueId, i]) => {
      const it = batch[i] as Extract<BatchItem, { kind: 'claim' }>;
      return { queue_id: queueId, worker_id: it.workerId, lease_seconds: it.lease };
    }));
    for (const r of rows) leased.set(first.get(String(r.queue_id))!, r);
  }

  /** A child ended: its parent's command gets `call.done` (same transaction, child → parent). */
  private async notifyParent(client: pg.PoolClient, ctx: TxCtx, child: ExecutionRow): Promise<void> {
    const parentId = child.parent_execution_id!;
    const loaded = await this.lockAndLoad(client, parentId);
    if (!loaded || isTerminal(loaded.row.status)) return; // nobody waits for this result any more
    const q = await queueStore.getByCommand(client, parentId, child.parent_command_id!);
    const meta = { child_execution_id: child.execution_id, child_status: child.status, ...(q ? { queue_id: q.queue_id } : {}) };
    let payload: JsonObject;
    if (child.status === 'completed') {
      payload = { response: child.result ?? null, meta };
    } else {
      const base: JsonObject = isObject(child.error) ? { ...child.error } : child.error != null ? { message: String(typeof child.error === 'string' ? child.error : JSON.stringify(child.error)) } : {};
      if (typeof base.message !== 'string') base.message = `child execution ${child.execution_id} ${child.status}`;
      base.code ??= child.status === 'cancelled' ? 'child_cancelled' : 'child_failed';
      base.child_execution_id = child.execution_id;
      payload = { error: base, meta };
    }
    await this.applyLoaded(client, ctx, loaded, { name: 'call.done', step: q?.step ?? null, command_id: child.parent_command_id!, payload });
  }
}

/** The execution lock and the log's last seq, sent with BEGIN in one round trip (lockAndLoad). */
function lockPrelude(executionId: string): string {
  const id = idLiteral(executionId);
  return `SELECT pg_advisory_xact_lock(${id}); SELECT max(seq) AS last_seq FROM event WHERE execution_id = ${id}`;
}

async function lock(client: pg.PoolClient, executionId: string): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [executionId]);
}
