/**
 * Writing what the engine decided, inside the execution's transaction: the side effects of its
 * events (vars through the hooks, queue rows it closes), the one-statement write of events, queue
 * rows, closes, execution row and snapshot (store/decision.ts), and, when the execution ended, its
 * queue closed, the terminal hook and the parent told. The one-by-one path (persist) and the group
 * commit (decision-batch.ts) share it.
 */
import type pg from 'pg';
import type { Json, JsonObject } from '../../playbook/types.js';
import type { Command, Decision, EngineEvent, ExecutionStateView, StepSummary } from '../engine/contract.js';
import type { Logger } from '../../common/logger.js';
import { metrics } from '../metrics.js';
import type { ExecutionHooks, TerminalExecution } from '../services.js';
import type { BoundStatement } from '../pipeline.js';
import * as execStore from '../store/executions.js';
import type { ExecutionRow } from '../store/executions.js';
import * as queueStore from '../store/queue.js';
import { idLiteral } from '../store/sql.js';
import { canCommitWith } from '../db.js';
import type { EndPipelining } from './lazy-tx.js';
import { writeDecision, type ClaimLease, type CloseStatus, type EagerLease } from '../store/decision.js';
import type { Children } from './children.js';
import { isObject, isTerminal } from './helpers.js';
import { changedSteps, touchedSteps } from './steps-diff.js';
import type { Applied, Loaded, TxCtx } from './tx-types.js';

/** What the write needs of the service: its hooks, the parent's `call.done`, and the snapshot settings. */
export interface DecisionWriterDeps {
  hooks: ExecutionHooks;
  log: Logger;
  children: Pick<Children, 'notifyParent'>;
  snapshots: boolean;
  snapshotEvery: number;
  snapshotGrowth: number;
  /** Whether the write may store large values beside their documents (values-gate.ts). */
  valuesGate: { beside(): Promise<boolean> };
}

/** One write: the state after the decisions, what they appended and issued, and the rows they close. */
export interface DecisionChanges {
  state: ExecutionStateView;
  events: EngineEvent[];
  commands: Command[];
  closes: Map<number, CloseStatus>;
  now: number;
  /** Commands leased at insertion (eager claims). */
  leases?: Map<number, EagerLease>;
  /** The step names the decisions changed, from the steps map they started with. */
  touched?: { from: Record<string, StepSummary>; names: Iterable<string> };
  /** Fresh rows a speculation's claims lease (store/decision.ts DecisionWrite.claims). */
  claims?: ClaimLease[];
  /** The decisions end the execution (it was not terminal before them): `ended` follows the write. */
  ends?: boolean;
}

/** Nothing was written: the loaded state goes back to the cache at commit (see handOver in service.ts). */
export function keepUnchanged(ctx: TxCtx, loaded: Loaded): void {
  if (loaded.state) ctx.cache.set(loaded.row.execution_id, { seq: loaded.seq, state: loaded.state, snapSeq: loaded.snapSeq, row: loaded.row });
}

export class DecisionWriter {
  constructor(private readonly s: DecisionWriterDeps) {}

  /** One decision on its own (start, an event one by one): its side effects, the write, the end. */
  async persist(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, decision: Decision, now: number, externalVars: JsonObject): Promise<Applied> {
    const id = loaded.row.execution_id;
    if (decision.events.length === 0 && decision.commands.length === 0) {
      keepUnchanged(ctx, loaded);
      return { decision, recorded: false, inserted: [], row: loaded.row, externalVars, varsWritten: false };
    }
    const closes = new Map<number, CloseStatus>();
    const varsWritten = await this.sideEffects(client, ctx, id, decision, closes);
    const wasTerminal = isTerminal(loaded.row.status) && !decision.events.some((e) => e.name === 'execution_retried');
    const { row, inserted } = await this.write(client, ctx, loaded, {
      state: decision.state, events: decision.events, commands: decision.commands, closes, now,
      touched: loaded.state && decision.changed_steps ? { from: loaded.state.steps, names: decision.changed_steps } : undefined,
      ends: isTerminal(decision.state.status) && !wasTerminal,
    });
    if (isTerminal(row.status) && !wasTerminal) await this.ended(client, ctx, row);
    return { decision, recorded: decision.events.length > 0, inserted, row, externalVars, varsWritten };
  }

  /**
   * What a decision's events do besides being appended: `vars_set` persists through the hooks; a
   * recorded `call.done` closes its queue row (done, or failed when it carries an error); commands
   * the decision made obsolete (loop items after an early break, the open calls of a failed or
   * skipped step) are cancelled, so no worker starts them and a running one is told 410 on its next
   * heartbeat. The first close of a row wins, as one by one. Returns whether vars were written.
   */
  async sideEffects(client: pg.PoolClient, ctx: TxCtx, id: string, decision: Decision, closes: Map<number, CloseStatus>): Promise<boolean> {
    let varsWritten = false;
    for (const ev of decision.events) {
      if (ev.name === 'vars_set') {
        const variables = isObject(ev.payload?.variables) ? ev.payload.variables : {};
        // the spec: a vars template that fails to render is logged and that variable skipped
        for (const e of Array.isArray(ev.payload?.errors) ? ev.payload.errors : []) {
          if (isObject(e)) this.s.log.warn({ execution_id: id, step: ev.step, var_name: e.name }, String(e.message));
        }
        await this.s.hooks.onVarsSet(client, id, variables, ev.step ?? '');
        varsWritten = true;
      } else if (ev.name === 'call.done' && ev.command_id !== undefined && ev.command_id !== null) {
        const failed = ev.payload?.error !== undefined && ev.payload?.error !== null;
        if (!closes.has(ev.command_id)) closes.set(ev.command_id, failed ? 'failed' : 'done');
        ctx.counts.push({ counter: metrics.commandsFinished, labels: { outcome: failed ? 'error' : 'ok' } });
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
  async write(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, c: DecisionChanges): Promise<{ row: ExecutionRow; inserted: queueStore.InsertedCommand[] }> {
    const { state, events } = c;
    const id = loaded.row.execution_id;
    const seq = loaded.seq + events.length;
    const terminal = isTerminal(state.status);
    const spacing = Math.max(this.s.snapshotEvery, Math.floor(loaded.snapSeq * this.s.snapshotGrowth));
    const snapshot = this.s.snapshots && (terminal || seq - loaded.snapSeq >= spacing) ? { seq, state } : undefined;
    const execution = { status: state.status, result: (state.result ?? null) as Json | null, error: (state.error ?? null) as Json | null, steps: state.steps ?? {}, terminal };
    const valuesBeside = await this.s.valuesGate.beside();
    if (c.ends) this.planEnd(client, ctx, { ...loaded.row, status: execution.status });
    const written = await writeDecision(client, {
      executionId: id, firstSeq: loaded.seq + 1, events, commands: c.commands, nowMs: c.now,
      closes: [...c.closes].map(([command_id, status]) => ({ command_id, status })), execution, snapshot, leases: c.leases, claims: c.claims, valuesBeside,
      // the same map before and after (REUSE_STEPS): only the engine's names tell what changed
      stepsChanged: touchedSteps(loaded.row.steps, execution.steps, c.touched) ??
        (loaded.row.steps === execution.steps ? undefined : changedSteps(loaded.row.steps, execution.steps)),
    });
    if (written.inserted.length) ctx.counts.push({ counter: metrics.commandsIssued, n: written.inserted.length });
    if (written.cancelled) ctx.counts.push({ counter: metrics.commandsFinished, labels: { outcome: 'cancelled' }, n: written.cancelled });
    for (const q of written.inserted) {
      if (!q.due) {
        ctx.queueRows.push(q);
        continue;
      }
      ctx.toPublish.push({ queue_id: q.queue_id, execution_id: id, step: q.step, pool: q.pool });
      // the command of a row to be claimed: its first claim may be speculated (QueueRef.fresh)
      ctx.queueRows.push({ ...q, command: c.commands.find((x) => x.command_id === q.command_id) });
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

  /**
   * The end's statements as `ended` sends them, bound, handed to a client that sends them with the
   * write when that is its transaction's first statement (lazy-tx.ts EndPipelining): one round trip
   * for the step that ends an execution. Not for a child (its parent is told in the same
   * transaction, after the end) nor without the hooks' statements. The end is listed now, before
   * the write's commit, so that commit is announced (service.ts `ending`).
   */
  private planEnd(client: pg.PoolClient, ctx: TxCtx, row: ExecutionRow): void {
    const pipelining = client as Partial<EndPipelining>;
    if (!pipelining.planEnd || hasParent(row)) return;
    const hook = this.s.hooks.onExecutionTerminalStatements?.(terminalOf(row));
    if (!hook) return;
    pipelining.planEnd(endStatements(row.execution_id, hook));
    if (!ctx.terminated.some((t) => t.id === row.execution_id)) ctx.terminated.push({ id: row.execution_id, openChildren: [] });
  }

  /**
   * The execution became terminal in this transaction: close its queue, the hooks' cleanup, the
   * NOTIFY that wakes long polls (executions/waiters.ts) on every replica at commit — in one round
   * trip when the hooks give their cleanup as SQL, with the COMMIT too when the transaction's client
   * can send it and nothing follows (no parent to tell), or already sent with the write (planEnd) —
   * then tell the parent.
   */
  async ended(client: pg.PoolClient, ctx: TxCtx, row: ExecutionRow): Promise<void> {
    const id = row.execution_id;
    // listed before the query: a COMMIT sent with it is announced (service.ts `ending`) and, if it fails, withdrawn
    let ending = ctx.terminated.find((t) => t.id === id);
    if (!ending) ctx.terminated.push((ending = { id, openChildren: [] }));
    const pipelined = (client as Partial<EndPipelining>).takeEndResults?.();
    if (pipelined) return this.endedWith(ctx, pipelined, ending, row);
    const terminal = terminalOf(row);
    const hookSql = this.s.hooks.onExecutionTerminalSql?.(terminal);
    if (hookSql === undefined) await this.s.hooks.onExecutionTerminal(client, terminal);
    const parent = hasParent(row);
    const commitNow = !parent && canCommitWith(client);
    const sql = endQuery(id, hookSql, commitNow);
    const results = commitNow
      ? await client.queryAndCommit(sql, END_PREPARED)
      : (await client.query(sql)) as unknown as pg.QueryResult[];
    this.endedWith(ctx, results, ending, row);
    if (parent) await this.s.children.notifyParent(client, ctx, row);
  }

  /** The end's results (the queue's UPDATE first, the open children last): metrics, and the children to cancel after the commit. */
  private endedWith(ctx: TxCtx, results: ReadonlyArray<{ rowCount: number | null; rows: unknown[] }>, ending: TxCtx['terminated'][number], row: ExecutionRow): void {
    const cancelled = results[0]!.rowCount ?? 0;
    if (cancelled) ctx.counts.push({ counter: metrics.commandsFinished, labels: { outcome: 'cancelled' }, n: cancelled });
    ctx.counts.push({ counter: metrics.executions, labels: { status: row.status } });
    ending.openChildren = (results[results.length - 1]!.rows as Array<{ execution_id: string }>).map((r) => r.execution_id);
  }
}

/*
 * An execution's end, in the two forms `ended` sends it; each statement answers in order, the
 * queue's UPDATE first and the open children last (what endedWith reads).
 */

/**
 * As one simple query, the id inlined. `prepared`: our two statements are EXECUTEd (END_PREPARED,
 * prepared once per connection, not planned at every end), for a query that can carry their
 * PREPAREs; otherwise they go whole.
 */
export function endQuery(id: string, hookSql: string | undefined, prepared: boolean): string {
  const lit = idLiteral(id);
  return [
    prepared ? queueStore.CANCEL_OPEN_STATEMENT.execute(lit) : queueStore.cancelOpenSql(lit),
    hookSql,
    execStore.notifyEndedSql(id),
    prepared ? execStore.OPEN_CHILDREN_STATEMENT.execute(lit) : execStore.openChildrenSql(lit),
  ].filter(Boolean).join('; ');
}

/** The session statements endQuery EXECUTEs when `prepared`. */
export const END_PREPARED = [queueStore.CANCEL_OPEN_STATEMENT, execStore.OPEN_CHILDREN_STATEMENT];

/** As bound statements, for a pipeline after the write that ends the execution (planEnd). */
export function endStatements(id: string, hook: BoundStatement[]): BoundStatement[] {
  return [queueStore.cancelOpenBound(id), ...hook, execStore.notifyEndedBound(id), execStore.openChildrenBound(id)];
}

/** What the hooks are told of an execution that ended. */
function terminalOf(row: ExecutionRow): TerminalExecution {
  return { execution_id: row.execution_id, root_execution_id: row.root_execution_id, catalog_id: row.catalog_id, status: row.status };
}

/** A child execution: its parent is told of its end (children.ts notifyParent). */
function hasParent(row: ExecutionRow): boolean {
  return Boolean(row.parent_execution_id) && row.parent_command_id !== null;
}
