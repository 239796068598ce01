/**
 * An execution's life on request: cancel (a waiting one is dropped, a running one gets
 * `execution.cancel`), retry of a failed or cancelled one (its unfinished steps run again, failed
 * children resume with it), rerun (a new execution of the same playbook and payload), and the
 * sweeper's cancel of orphaned children.
 */
import type pg from 'pg';
import type { RerunRequest, RetryRequest, RunRequest, RunResponse } from '../../common/protocol.js';
import type { JsonObject } from '../../playbook/types.js';
import type { EngineEvent } from '../engine/contract.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { metrics } from '../metrics.js';
import type { Db, ExecutionRecord } from '../services.js';
import * as execStore from '../store/executions.js';
import type { ExecutionRow } from '../store/executions.js';
import { parseId } from '../store/sql.js';
import type { Logger } from '../../common/logger.js';
import * as limits from './limits.js';
import { isTerminal, lock } from './helpers.js';
import type { Applied, Loaded, TxCtx } from './tx-types.js';

/** What the lifecycle needs of the service: its pool, log, transactions, load/apply under the lock, and start. */
export interface LifecycleDeps {
  db: Db;
  log: Logger;
  run<T>(fn: (client: pg.PoolClient, ctx: TxCtx) => Promise<T>): Promise<T>;
  lockAndLoad(client: pg.PoolClient, executionId: string): Promise<Loaded | null>;
  applyLoaded(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, event: EngineEvent): Promise<Applied>;
  start(req: RunRequest, origin: execStore.ExecutionOrigin): Promise<RunResponse>;
}

export class Lifecycle {
  constructor(private readonly s: LifecycleDeps) {}

    async cancel(executionIdRaw: string): Promise<ExecutionRecord> {
    const id = parseId(executionIdRaw);
    if (!id) throw notFound(`execution ${executionIdRaw} not found`);
    const row = await this.s.run(async (client, ctx) => {
      await lock(client, id);
      const waiting = await limits.cancelWaiting(client, id); // never started: nothing to fold
      if (waiting) return waiting;
      const loaded = await this.s.lockAndLoad(client, id);
      if (!loaded) throw notFound(`execution ${id} not found`);
      if (isTerminal(loaded.row.status)) return loaded.row;
      const applied = await this.s.applyLoaded(client, ctx, loaded, { name: 'execution.cancel', step: null, payload: { reason: 'cancelled by request' } });
      return applied.row;
    });
    return execStore.toOrderedRecord(row);
  }

  /**
   * Resumes a failed or cancelled execution in place (engine `execution.retry`): completed steps
   * keep their results, the unfinished runs start again. `args[step]` overrides a retried step's
   * args; `payload` is merged over the execution payload. 409 `not_retryable` for a running or
   * completed execution, one with nothing left to run, or a child whose parent has ended (a child
   * is retried with its parent: the parent's re-issued command resumes it).
   */
  async retry(executionIdRaw: string, body: RetryRequest = {}): Promise<ExecutionRecord> {
    const id = parseId(executionIdRaw);
    if (!id) throw notFound(`execution ${executionIdRaw} not found`);
    const row = await this.s.run(async (client, ctx) => {
      const loaded = await this.s.lockAndLoad(client, id);
      if (loaded && !loaded.state) throw conflict('not_retryable', `execution ${id} never started (cancelled while waiting for a concurrency slot); run it again with rerun`);
      if (!loaded?.state) throw notFound(`execution ${id} not found`);
      const status = loaded.row.status;
      if (status !== 'failed' && status !== 'cancelled') {
        throw conflict('not_retryable', `execution ${id} is ${status}; only a failed or cancelled execution can be retried`, { status });
      }
      if (loaded.row.parent_execution_id && !loaded.row.retry_with_parent) {
        throw conflict('not_retryable', `execution ${id} is a child of execution ${loaded.row.parent_execution_id}; retry the parent`, { parent_execution_id: loaded.row.parent_execution_id });
      }
      const resumable = Object.keys((loaded.state as { resume?: object }).resume ?? {});
      for (const step of Object.keys(body.args ?? {})) {
        if (!resumable.includes(step)) throw badRequest(`args.${step}: step '${step}' is not retried (retried: ${resumable.join(', ') || 'none'})`);
      }
      const payload: JsonObject = { reason: 'retried by request' };
      if (body.args) payload.args = body.args;
      if (body.payload) payload.payload = { ...loaded.row.payload, ...body.payload };
      const applied = await this.s.applyLoaded(client, ctx, loaded, { name: 'execution.retry', step: null, payload });
      if (!applied.decision.events.length) throw conflict('not_retryable', `execution ${id} has no unfinished step to run again`, { status });
      const { rows } = await client.query<Pick<ExecutionRow, 'retries' | 'retry_with_parent' | 'payload' | 'updated_at'>>(
        // not RETURNING *: the row's own (legacy) `steps` column would replace the state's summaries
        `UPDATE execution SET retries = retries + 1, retry_with_parent = false, payload = COALESCE($2::jsonb, payload) WHERE execution_id = $1
         RETURNING retries, retry_with_parent, payload, updated_at`,
        [id, payload.payload ? JSON.stringify(payload.payload) : null]);
      // children that failed in the steps run again are resumed by the re-issued playbook commands
      const steps = ((applied.decision.events.find((e) => e.name === 'execution_retried')?.payload.steps ?? []) as Array<{ step: string }>).map((r) => r.step);
      await execStore.markChildrenForRetry(client, id, steps);
      const fresh = { ...applied.row, ...rows[0] };
      ctx.cache.set(id, { seq: loaded.seq, state: loaded.state!, snapSeq: loaded.snapSeq, row: fresh });
      return fresh;
    });
    metrics.executions.inc({ status: 'retried' });
    return execStore.toOrderedRecord(row);
  }

  /**
   * Run again: a new execution of the same playbook version (even if a newer one was registered
   * since) with the same payload, or `payload` instead, linked by `rerun_of`. Any status.
   */
  async rerun(executionIdRaw: string, body: RerunRequest = {}): Promise<RunResponse> {
    const id = parseId(executionIdRaw);
    if (!id) throw notFound(`execution ${executionIdRaw} not found`);
    const row = await execStore.get(this.s.db.pool, id);
    if (!row) throw notFound(`execution ${id} not found`);
    if (row.parent_execution_id) throw conflict('not_rerunnable', `execution ${id} is a child of execution ${row.parent_execution_id}; run the parent again`);
    return this.s.start({ path: row.path, version: row.version, payload: body.payload ?? row.payload }, { rerun_of: id });
  }

  /** Cancels executions whose parent already ended (normally done right after the parent's commit). */
  async cancelOrphans(limit = 100): Promise<number> {
    const ids = await execStore.orphanedChildren(this.s.db.pool, limit);
    for (const id of ids) await this.cancel(id).catch((err) => this.s.log.warn({ execution_id: id, err: String(err) }, 'cancelling an orphaned child failed'));
    return ids.length;
  }
}
