/**
 * Starting an execution: a top-level start in one round trip when this process started the
 * playbook before (start-ahead.ts), else in two (the live catalog row inserted with BEGIN); a
 * child's start, which answers its parent's command; an Idempotency-Key's replay; a start held by
 * a concurrency limit and its admission later (limits.ts). The service (service.ts) owns the
 * transactions and their context (TxCtx); this is what happens inside them.
 */
import { isDeepStrictEqual } from 'node:util';
import type pg from 'pg';
import type { RunRequest, RunResponse } from '../../common/protocol.js';
import type { JsonObject, Playbook } from '../../playbook/types.js';
import type { Engine, EngineInput, ExecutionStateView } from '../engine/contract.js';
import { badRequest, conflict, gone, notFound } from '../errors.js';
import { metrics } from '../metrics.js';
import type { SessionSql } from '../db.js';
import type { Db, ExecutionHooks } from '../services.js';
import * as catalogStore from '../store/catalog.js';
import * as execStore from '../store/executions.js';
import type { ExecutionRow } from '../store/executions.js';
import * as queueStore from '../store/queue.js';
import type { QueueRow } from '../store/queue.js';
import { StaleDecision } from '../store/decision.js';
import type { Children } from './children.js';
import type { DecisionWriter } from './decision-write.js';
import { isTerminal, lock, newCtx } from './helpers.js';
import { LazyTransaction } from './lazy-tx.js';
import * as limits from './limits.js';
import type { ExecutionLoader } from './loader.js';
import { StartAhead } from './start-ahead.js';
import type { RunOptions, TxCtx, TxLifecycle } from './tx-types.js';

/** What starts need of the service: its pool, hooks, engine, caches, writer, and its transactions with their context. */
export interface StartsDeps extends TxLifecycle {
  db: Db;
  hooks: ExecutionHooks;
  engine: Engine<ExecutionStateView>;
  loader: ExecutionLoader;
  children: Children;
  writer: DecisionWriter;
  /** One-round-trip top-level starts (speculative writes, with API vars in the vars table). */
  aheadOn: boolean;
  now(): number;
  input(now: number, externalVars: JsonObject): EngineInput;
  run<T>(fn: (client: pg.PoolClient, ctx: TxCtx, begun: pg.QueryResult[]) => Promise<T>, opts?: RunOptions): Promise<T>;
  /** A start was held by a concurrency limit: the admitter may have a slot for it. */
  onWaiting(): void;
}

/** The row a top-level start's insert makes (execStore.insertAtBound), for the engine to decide on before it is sent. */
function expectedRow(id: string, path: string, live: { catalog_id: string; version: number }, payload: JsonObject,
  origin: execStore.ExecutionOrigin, now: Date): ExecutionRow {
  return {
    execution_id: id, catalog_id: live.catalog_id, path, version: live.version, payload, status: 'started', result: null, error: null, steps: {},
    parent_execution_id: null, parent_command_id: null, parent_queue_id: null, root_execution_id: id, retries: 0, retry_with_parent: false,
    rerun_of: origin.rerun_of ?? null, schedule_id: origin.schedule_id ?? null, schedule_tick: origin.schedule_tick ?? null, hook_id: origin.hook_id ?? null,
    created_at: now, updated_at: now, finished_at: null,
  };
}

/** A run request's answer for an execution that now exists. */
const started = (x: Pick<ExecutionRow, 'execution_id' | 'path' | 'version'>, commands: number): RunResponse =>
  ({ execution_id: x.execution_id, status: 'started', path: x.path, version: x.version, commands });

const notFoundMessage = (req: RunRequest) => req.version ? `playbook '${req.path}' version ${req.version} not found` : `playbook '${req.path}' not found`;

export class Starts {
  /** Top-level starts (tests, diagnostics): in one pipeline, or the guess of the catalog row was stale (then two round trips). */
  readonly counters = { pipelined: 0, stale: 0 };
  /** Catalog rows and execution ids for one-round-trip starts (start-ahead.ts). */
  private readonly ahead: StartAhead;
  private startsInFlight = 0;

  constructor(private readonly s: StartsDeps) {
    this.ahead = new StartAhead((count) => execStore.takeExecutionIds(s.db.pool, count));
  }

  /** `req` is valid (common/contract RunBody, checked at the HTTP edge; internal callers are typed). */
  async start(req: RunRequest, origin: execStore.ExecutionOrigin = {}): Promise<RunResponse> {
    this.startsInFlight++;
    try {
      return await this.startOnce(req, origin);
    } finally {
      this.startsInFlight--;
    }
  }

  private async startOnce(req: RunRequest, origin: execStore.ExecutionOrigin): Promise<RunResponse> {
    const payload = req.payload ?? {};
    const key = req.idempotency_key;
    if (key) {
      const first = await execStore.findByIdempotencyKey(this.s.db.pool, key);
      if (first) return this.replayed(first, req);
    }
    const topLevel = (req.parent_execution_id ?? null) === null && (req.parent_queue_id ?? null) === null;
    if (topLevel) {
      const ahead = await this.startAhead(req, payload, origin).catch((err: unknown) => this.startFailed(err, req));
      if (ahead) return ahead;
      const insert = execStore.insertLiveSql({ path: req.path, version: req.version ?? undefined, payload, idempotency_key: key ?? null, ...origin });
      if (insert !== null) return this.startTopLevel(req, insert);
    }
    const entry = await catalogStore.getLive(this.s.db.pool, req.path, req.version ?? undefined);
    if (!entry) throw notFound(notFoundMessage(req));

    let parentId: string | null = null;
    let parentQueue: QueueRow | null = null;
    if (req.parent_execution_id !== undefined && req.parent_execution_id !== null) parentId = String(req.parent_execution_id);
    if (req.parent_queue_id !== undefined && req.parent_queue_id !== null) {
      const qid = String(req.parent_queue_id);
      parentQueue = await queueStore.get(this.s.db.pool, qid);
      if (!parentQueue) throw notFound(`queue entry ${qid} not found`);
      if (parentId && parentQueue.execution_id !== parentId) throw badRequest(`queue entry ${qid} belongs to execution ${parentQueue.execution_id}, not ${parentId}`);
      parentId = parentQueue.execution_id;
    }
    let parentRow: ExecutionRow | null = null;
    let held = false;
    if (parentId) {
      parentRow = await execStore.get(this.s.db.pool, parentId);
      if (!parentRow) throw notFound(`parent execution ${parentId} not found`);
    }

    return this.s.run(async (client, ctx): Promise<RunResponse> => {
      if (parentId && parentQueue) {
        const existing = await execStore.findChild(client, parentId, parentQueue.command_id);
        if (existing) return started(existing, 0);
        parentQueue = await this.childMayHold(client, parentQueue, req);
        const resumed = await this.s.children.resumeChild(client, ctx, parentId, parentQueue);
        if (resumed) return resumed;
      }
      const row = await execStore.insert(client, {
        catalog_id: entry.catalog_id, path: entry.path, version: entry.version, payload,
        parent_execution_id: parentId, parent_command_id: parentQueue?.command_id ?? null, parent_queue_id: parentQueue?.queue_id ?? null,
        root_execution_id: parentRow ? parentRow.root_execution_id : null, ...origin, idempotency_key: key ?? null,
      });
      const id = row.execution_id;
      await lock(client, id);
      if (parentId) {
        await lock(client, parentId); // child → parent
        const p = await execStore.get(client, parentId);
        if (!p || isTerminal(p.status)) throw gone('finished', `parent execution ${parentId} is ${p?.status ?? 'gone'}`);
        if (parentQueue && !(await queueStore.holdForChild(client, parentQueue, id))) {
          await this.childMayHold(client, parentQueue, req); // says why: finished, or leased to another holder
          throw conflict('not_lease_holder', `parent_queue_id ${parentQueue.queue_id} changed hands during the start; retry`, { queue_id: parentQueue.queue_id });
        }
      }
      this.s.loader.playbooks.set(entry.catalog_id, entry.playbook);
      const commands = await this.beginUnlessHeld(client, ctx, row, entry.playbook);
      held = commands === null;
      return started(row, commands ?? 0);
    }, { retryUniqueChild: true }).then((res) => this.afterStart(res, held), (err: unknown) => this.startFailed(err, req));
  }

  /**
   * A child answers its parent's command only when that command runs a `playbook` tool and the
   * request comes from the command's lease holder (the worker_id and lease_token of its claim, as
   * a call.done must present), or the row is already held by an execution (a resumed child). The
   * row as read now; its holder is what holdForChild expects. A row no longer held (finished, or
   * re-leased since) refuses.
   */
  private async childMayHold(client: pg.PoolClient, parentQueue: QueueRow, req: RunRequest): Promise<QueueRow> {
    const qid = parentQueue.queue_id;
    const row = await queueStore.get(client, qid);
    if (!row || queueStore.isClosed(row.status)) throw gone('finished', `the parent's command (queue entry ${qid}) is already finished`);
    const kind = (row.command as { tool?: { kind?: unknown } }).tool?.kind;
    if (kind !== 'playbook') {
      throw conflict('not_playbook_command', `parent_queue_id ${qid} is a '${String(kind)}' command: only the command of a playbook step is answered by a child execution`, { queue_id: qid });
    }
    if (row.status !== 'leased') {
      throw conflict('not_lease_holder', `parent_queue_id ${qid} is not leased (${row.status}): a child is started by the worker holding the command's lease`, { queue_id: qid });
    }
    const byExecution = row.worker_id?.startsWith('execution:') ?? false;
    if (!byExecution && (row.worker_id === null || row.lease_token === null || row.worker_id !== req.worker_id || row.lease_token !== req.lease_token)) {
      throw conflict('not_lease_holder', `parent_queue_id ${qid} is not leased to this worker_id and lease_token; a child is started only by the command's lease holder`, { queue_id: qid });
    }
    return row;
  }

  /**
   * A top-level start in two round trips: BEGIN with the insert of the catalog's live row and the
   * lock (execStore.insertLiveSql), then the first decision's write with COMMIT. A new execution
   * has no API vars yet when the hooks keep them in the vars table (loadVarsSql): its id comes
   * from a sequence, and the vars API refuses an execution it cannot see, as this one is until
   * the commit.
   */
  private async startTopLevel(req: RunRequest, insert: SessionSql): Promise<RunResponse> {
    let held = false;
    let found: ExecutionRow | undefined;
    return this.s.run(async (client, ctx, begun): Promise<RunResponse> => {
      const row = begun[0]?.rows[0] as ExecutionRow | undefined;
      if (!row) throw notFound(notFoundMessage(req));
      const playbook = await this.s.loader.playbookFor(client, row.catalog_id);
      const commands = await this.beginUnlessHeld(client, ctx, row, playbook, this.s.hooks.loadVarsSql ? {} : undefined);
      held = commands === null;
      found = row;
      return started(row, commands ?? 0);
    }, { begin: insert.sql, prepare: insert.prepare, lastCommits: true }).then((res) => {
      // committed: the next start of this path may go in one round trip (startAhead)
      if (found) this.ahead.found(req.path, req.version ?? undefined, found);
      return this.afterStart(res, held);
    }, (err: unknown) => this.startFailed(err, req));
  }

  /**
   * A top-level start in ONE round trip, when this process has started the playbook before and
   * holds an execution id taken ahead (start-ahead.ts): the engine decides the first step on the
   * row the insert will make, and the insert, the first write and the id of a later start go in one
   * pipeline (lazy-tx.ts Surround). Null, with nothing written, when it cannot be made (no guess,
   * no id, a playbook under a concurrency limit, whose start may be held) or the guessed catalog
   * row is no longer live; the two-round-trip start then runs. What it counted in the metrics goes
   * with its transaction's context, so a start redone that way counts once (TxCtx.counts).
   */
  private async startAhead(req: RunRequest, payload: JsonObject, origin: execStore.ExecutionOrigin): Promise<RunResponse | null> {
    if (!this.s.aheadOn) return null;
    const version = req.version ?? undefined;
    const live = this.ahead.catalogRow(req.path, version);
    const playbook = live && this.s.loader.playbooks.get(live.catalog_id);
    if (!live || !playbook || limits.limitOf(playbook)) return null;
    const id = this.ahead.takeId(this.startsInFlight);
    if (!id) return null;
    const ctx = newCtx();
    const lead = execStore.insertAtBound({ execution_id: id, catalog_id: live.catalog_id, latest: version === undefined, payload, idempotency_key: req.idempotency_key ?? null, ...origin });
    const tx = new LazyTransaction(this.s.db.pool, id, null, 0, () => this.s.ending(ctx), { lead, tail: [execStore.nextExecutionIdBound(id)] });
    const expected = expectedRow(id, req.path, live, payload, origin, new Date(this.s.now()));
    let commands: number;
    try {
      commands = await this.begin(tx.client, ctx, expected, playbook, {});
      await tx.finish(ctx.terminated.length > 0);
    } catch (err) {
      this.s.abandoned(ctx);
      await tx.abort();
      if (err instanceof StaleDecision) return this.staleGuess(req.path, version);
      // nothing was sent (no connection, say): the other way, with its retries; else PostgreSQL
      // refused it (a twin's Idempotency-Key: startFailed), or the outcome of a lost commit is unknown
      if (!tx.commitSent) return null;
      throw err;
    }
    const inserted = tx.leadRows?.[0] as ExecutionRow | undefined;
    // nothing reached PostgreSQL (the lead's stale answer throws above): the other way decides
    if (!inserted) {
      this.s.abandoned(ctx);
      return this.staleGuess(req.path, version);
    }
    this.ahead.keep((tx.tailResults[0]?.rows ?? []).map((r) => String(r.id)));
    const entry = ctx.cache.get(id);
    if (entry) {
      const { status, result, error, steps, updated_at, finished_at } = entry.row;
      entry.row = { ...inserted, status, result, error, steps, updated_at, finished_at };
    }
    this.counters.pipelined++;
    this.s.committed(ctx);
    await this.s.afterCommit(ctx);
    return started(inserted, commands);
  }

  private staleGuess(path: string, version: number | undefined): null {
    this.ahead.stale(path, version);
    this.counters.stale++;
    return null;
  }

  private afterStart(res: RunResponse, held: boolean): RunResponse {
    if (held) this.s.onWaiting();
    return res;
  }

  /** The same Idempotency-Key sent twice at once: the second insert met the first one's row, which answers. */
  private async startFailed(err: unknown, req: RunRequest): Promise<RunResponse> {
    const e = err as { code?: string; constraint?: string };
    const key = req.idempotency_key;
    if (key && e.code === '23505' && e.constraint === 'execution_idempotency_key') {
      const first = await execStore.findByIdempotencyKey(this.s.db.pool, key);
      if (first) return this.replayed(first, req);
    }
    throw err;
  }

  /**
   * The first decision of a new execution, unless a concurrency limit holds it (one whose playbook
   * has `concurrency.limit`: the admitter starts it when a slot is free, server/executions/limits.ts).
   * Only a child holding its parent's command (parent_queue_id) is exempt — the parent waits for it;
   * a start naming just parent_execution_id is limited like a top-level one. The number of
   * commands it queued, or null when held.
   */
  private async beginUnlessHeld(client: pg.PoolClient, ctx: TxCtx, row: ExecutionRow, playbook: Playbook, vars?: JsonObject): Promise<number | null> {
    if (!row.parent_queue_id && limits.limitOf(playbook)) {
      await limits.hold(client, row.execution_id);
      return null;
    }
    return this.begin(client, ctx, row, playbook, vars);
  }

  /** The engine's start of a new (or admitted) execution row; the number of commands it queued. */
  private async begin(client: pg.PoolClient, ctx: TxCtx, row: ExecutionRow, playbook: Playbook, vars?: JsonObject): Promise<number> {
    const now = this.s.now();
    const externalVars = vars ?? await this.s.hooks.loadVars(client, row.execution_id);
    const decision = this.s.engine.start(playbook, {
      execution_id: row.execution_id, path: row.path, version: row.version, catalog_id: row.catalog_id, payload: row.payload,
      parent_execution_id: row.parent_execution_id, root_execution_id: row.root_execution_id,
    }, this.s.input(now, externalVars));
    ctx.counts.push({ counter: metrics.executions, labels: { status: 'started' } });
    // a new (or admitted) execution has no step summaries yet; its row was read without them
    const applied = await this.s.writer.persist(client, ctx, { row: { ...row, steps: {} }, state: undefined, seq: 0, snapSeq: 0, playbook }, decision, now, externalVars);
    // the vars it saw go with its cached state, so its first claim can be speculated
    const entry = ctx.cache.get(row.execution_id);
    if (entry && !applied.varsWritten) entry.vars = externalVars;
    return applied.inserted.length;
  }

  /** Starts an execution that waited for a concurrency slot (the admitter decided there is one); false when it no longer waits. */
  async admit(executionId: string): Promise<boolean> {
    return this.s.run(async (client, ctx) => {
      await lock(client, executionId);
      const row = await limits.release(client, executionId);
      if (!row) return false;
      await this.begin(client, ctx, row, await this.s.loader.playbookFor(client, row.catalog_id));
      return true;
    });
  }

  /** The limit of a catalog version's playbook (the admitter's question). */
  async concurrencyLimit(catalogId: string): Promise<number | null> {
    const client = await this.s.db.pool.connect();
    try {
      return limits.limitOf(await this.s.loader.playbookFor(client, catalogId));
    } finally {
      client.release();
    }
  }

  /**
   * The answer to a retried run request: the first request's execution, as it is now. A key sent
   * again with another playbook, version or payload is a client's mistake, not a retry: answering
   * with the first execution would drop the new request without a word.
   */
  private replayed(first: ExecutionRow, req: RunRequest): RunResponse & { replayed: true } {
    const other = (what: string) => conflict('idempotency_key_reused',
      `Idempotency-Key was used for ${what} (execution ${first.execution_id}); a retry must repeat the request`, { execution_id: first.execution_id });
    if (first.path !== req.path) throw other(`a run of '${first.path}', not '${req.path}'`);
    if (req.version !== undefined && req.version !== null && req.version !== first.version) throw other(`a run of version ${first.version}, not ${req.version}`);
    if (!isDeepStrictEqual(first.payload ?? {}, req.payload ?? {})) throw other('a run with another payload');
    // an execution under way is `started` to a run request, as on its first answer; an ended one says how it ended
    const status = isTerminal(first.status) ? first.status as RunResponse['status'] : 'started';
    return { execution_id: first.execution_id, status, path: first.path, version: first.version, commands: 0, replayed: true };
  }
}
