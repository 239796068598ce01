/**
 * A controller: a work queue of `namespace/name` keys and a level-triggered reconcile function,
 * run by a few async workers while this instance leads. A reconcile that throws is retried with
 * the key's exponential backoff; one that returns `requeueAfterMs` is looked at again then (polls,
 * stabilisation windows); otherwise the key waits for the next change or resync.
 */
import { WorkQueue, type WorkQueueOptions } from './workqueue.js';
import { yieldIfBusy } from './yield.js';
import type { Logger } from './log.js';
import type { OperatorMetrics } from './metrics.js';

export interface ReconcileResult {
  requeueAfterMs?: number;
}

export type Reconciler = (key: string) => Promise<ReconcileResult | void>;

export interface ControllerOptions extends WorkQueueOptions {
  workers?: number;
}

export class Controller {
  private queue?: WorkQueue;
  private runners: Promise<void>[] = [];

  constructor(
    readonly name: string,
    private readonly reconcile: Reconciler,
    private readonly metrics: OperatorMetrics,
    private readonly log: Logger,
    private readonly opts: ControllerOptions = {},
  ) {}

  get running(): boolean {
    return this.queue !== undefined;
  }

  enqueue(key: string): void {
    this.queue?.add(key);
    if (this.queue) this.metrics.queueDepth.set({ controller: this.name }, this.queue.length);
  }

  enqueueAfter(key: string, ms: number): void {
    this.queue?.addAfter(key, ms);
  }

  start(): void {
    if (this.queue) return;
    const queue = new WorkQueue(this.name, this.opts);
    this.queue = queue;
    const n = this.opts.workers ?? 2;
    this.runners = Array.from({ length: n }, () => this.worker(queue));
  }

  async stop(): Promise<void> {
    const q = this.queue;
    if (!q) return;
    this.queue = undefined;
    q.shutdown();
    await Promise.all(this.runners);
    this.runners = [];
  }

  private async worker(queue: WorkQueue): Promise<void> {
    while (true) {
      const key = await queue.get();
      if (key === undefined) return;
      this.metrics.queueDepth.set({ controller: this.name }, queue.length);
      const end = this.metrics.reconcileDuration.startTimer({ controller: this.name });
      try {
        const result = await this.reconcile(key);
        queue.forget(key);
        if (result?.requeueAfterMs !== undefined) {
          queue.addAfter(key, result.requeueAfterMs);
          this.metrics.reconciles.inc({ controller: this.name, result: 'requeue' });
        } else this.metrics.reconciles.inc({ controller: this.name, result: 'success' });
      } catch (err) {
        const delay = queue.addRateLimited(key);
        this.metrics.reconciles.inc({ controller: this.name, result: 'error' });
        this.metrics.retries.inc({ controller: this.name });
        this.log.warn({ controller: this.name, key, err: err instanceof Error ? err.message : String(err), retryInMs: delay }, 'reconcile failed');
      } finally {
        end();
        queue.done(key);
      }
      await yieldIfBusy();
    }
  }
}
