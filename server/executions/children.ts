/**
 * Child executions: a retried parent resumes its failed child instead of starting a new one, an
 * ended child hands its outcome to the parent's command as `call.done` (same transaction, lock
 * order child → parent), and an ended parent cancels its running children after commit.
 */
import type pg from 'pg';
import type { RunResponse } from '../../common/protocol.js';
import type { JsonObject } from '../../playbook/types.js';
import type { EngineEvent } from '../engine/contract.js';
import { gone } from '../errors.js';
import type { Db } from '../services.js';
import * as execStore from '../store/executions.js';
import type { ExecutionRow } from '../store/executions.js';
import * as queueStore from '../store/queue.js';
import type { QueueRow } from '../store/queue.js';
import type { Logger } from '../../common/logger.js';
import { isObject, isTerminal, lock } from './helpers.js';
import type { Applied, Loaded, TxCtx } from './tx-types.js';

/** What children need of the service: its pool and log, and its load/apply/cancel under the lock. */
export interface ChildrenDeps {
  db: Db;
  log: Logger;
  lockAndLoad(client: pg.PoolClient, executionId: string): Promise<Loaded | null>;
  applyLoaded(client: pg.PoolClient, ctx: TxCtx, loaded: Loaded, event: EngineEvent): Promise<Applied>;
  cancel(executionId: string): Promise<unknown>;
}

export class Children {
  constructor(private readonly s: ChildrenDeps) {}

  /**
   * The parent was retried and this playbook command re-runs a step (and loop item) whose child
   * failed: that child resumes in place and answers the new command. Lock order child → parent.
   * `parentQueue` is the row as the start checked it (service childMayHold): held by that holder.
   */
  async resumeChild(client: pg.PoolClient, ctx: TxCtx, parentId: string, parentQueue: QueueRow): Promise<RunResponse | null> {
    const iteration = (parentQueue.command as { iteration?: number }).iteration ?? null;
    const child = await execStore.findChildToRetry(client, parentId, parentQueue.step, iteration);
    if (!child) return null;
    const loaded = await this.s.lockAndLoad(client, child.execution_id);
    const resume = (loaded?.state as { resume?: object } | undefined)?.resume;
    if (!loaded?.state || !loaded.row.retry_with_parent || !resume || Object.keys(resume).length === 0) return null;
    await lock(client, parentId);
    const p = await execStore.get(client, parentId);
    if (!p || isTerminal(p.status)) throw gone('finished', `parent execution ${parentId} is ${p?.status ?? 'gone'}`);
    if (!(await queueStore.holdForChild(client, parentQueue, child.execution_id))) {
      throw gone('finished', `the parent's command (queue entry ${parentQueue.queue_id}) is already finished`);
    }
    await execStore.relinkChild(client, child.execution_id, parentQueue.command_id, parentQueue.queue_id);
    loaded.row = { ...loaded.row, parent_command_id: parentQueue.command_id, parent_queue_id: parentQueue.queue_id };
    const applied = await this.s.applyLoaded(client, ctx, loaded, { name: 'execution.retry', step: null, payload: { reason: 'retried with its parent', parent_execution_id: parentId } });
    await client.query('UPDATE execution SET retries = retries + 1, retry_with_parent = false WHERE execution_id = $1', [child.execution_id]);
    ctx.cache.delete(child.execution_id); // the row changed beside the write; the next load reads it
    this.s.log.info({ execution_id: child.execution_id, parent_execution_id: parentId }, 'child execution resumed with its parent');
    return { execution_id: child.execution_id, status: 'started', path: child.path, version: child.version, commands: applied.inserted.length };
  }

  /** A child ended: its parent's command gets `call.done` (same transaction, child → parent). */
  async notifyParent(client: pg.PoolClient, ctx: TxCtx, child: ExecutionRow): Promise<void> {
    const parentId = child.parent_execution_id!;
    const loaded = await this.s.lockAndLoad(client, parentId);
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
    await this.s.applyLoaded(client, ctx, loaded, { name: 'call.done', step: q?.step ?? null, command_id: child.parent_command_id!, payload });
  }

  /** The children an ended parent left running (read by the transaction that ended it). */
  async cancel(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      await this.s.cancel(id).catch((err) => this.s.log.warn({ execution_id: id, err: String(err) }, 'cancelling a child failed; the sweeper will retry'));
    }
  }
}
