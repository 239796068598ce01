/**
 * A rate-limited work queue in the manner of client-go's: keys (`namespace/name`) are
 * deduplicated — a key added many times while it waits is processed once, and a key added while
 * it is being processed is processed again afterwards (never concurrently with itself). Failures
 * requeue after the rate limiter's delay (ratelimiter.ts: per-key exponential backoff, at most the
 * shared bucket's rate over all keys), which `forget` resets after a success. `addAfter` schedules
 * a key (periodic polls, leases, stabilisation windows).
 */
import { defaultControllerRateLimiter, type DefaultRateLimiterOptions, type RateLimiter } from './ratelimiter.js';

export interface WorkQueueOptions extends DefaultRateLimiterOptions {
  /** Replaces the default limiter built from the other options. */
  rateLimiter?: RateLimiter;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  /** Keys waiting (in `queue`) or to be requeued after their current processing. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private waiters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;
  private readonly limiter: RateLimiter;

  constructor(readonly name: string, opts: WorkQueueOptions = {}) {
    this.limiter = opts.rateLimiter ?? defaultControllerRateLimiter(opts);
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return; // re-added by done()
    const waiter = this.waiters.shift();
    if (waiter) {
      this.dirty.delete(key);
      this.processing.add(key);
      waiter(key);
    } else this.queue.push(key);
  }

  /** Adds the key after `ms`; an earlier pending schedule for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref?.();
    this.timers.set(key, { at, timer });
  }

  /** Requeues after the key's backoff and counts a failure. Returns the delay used. */
  addRateLimited(key: string): number {
    const delay = this.limiter.when(key);
    this.addAfter(key, delay);
    return delay;
  }

  /** Clears the key's failure count (after a success). */
  forget(key: string): void {
    this.limiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.limiter.numRequeues(key);
  }

  /** Next key to process, or undefined once shut down. Call `done(key)` when finished. */
  get(): Promise<string | undefined> {
    if (this.shuttingDown) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  get length(): number {
    return this.queue.length;
  }

  /** Drops everything and wakes every waiting `get` with undefined. */
  shutdown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.queue.length = 0;
    this.dirty.clear();
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
  }
}
