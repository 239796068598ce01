/**
 * Work-queue rate limiters in the manner of client-go's `workqueue.DefaultControllerRateLimiter`:
 * the delay of a failed key is the larger of its own exponential backoff and the wait for a token
 * of one bucket shared by every key. The per-key backoff keeps one broken object from hot-looping;
 * the bucket caps the retry rate of all of them together, so an outage of the Playflow server with
 * 10,000 resources failing does not turn into 10,000 retries a second when it comes back.
 */
export interface RateLimiter {
  /** Delay before the key may be retried; counts a failure. */
  when(key: string): number;
  /** Resets the key's failures (after a success). */
  forget(key: string): void;
  numRequeues(key: string): number;
}

/** `base · 2^failures`, capped. */
export class ItemExponentialRateLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();

  constructor(private readonly baseMs: number, private readonly maxMs: number) {}

  when(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    return Math.min(this.maxMs, this.baseMs * 2 ** Math.min(n, 40));
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/**
 * A token bucket (golang.org/x/time/rate's `Reserve().Delay()`): `burst` tokens, refilled at `qps`;
 * each call takes one, and when none is left returns how long until its token exists.
 */
export class BucketRateLimiter implements RateLimiter {
  private tokens: number;
  private last: number;

  constructor(private readonly qps: number, private readonly burst: number, private readonly now: () => number = Date.now) {
    this.tokens = burst;
    this.last = now();
  }

  when(): number {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.qps);
    this.last = t;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.qps) * 1000);
  }

  forget(): void {}

  numRequeues(): number {
    return 0;
  }
}

/** The largest delay of several limiters; requeues are counted by the first. */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    return Math.max(...this.limiters.map((l) => l.when(key)));
  }

  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }

  numRequeues(key: string): number {
    return this.limiters[0]?.numRequeues(key) ?? 0;
  }
}

export interface DefaultRateLimiterOptions {
  /** First retry delay after a failure. Default 500 ms. */
  baseDelayMs?: number;
  /** Retry delay cap. Default 5 min. */
  maxDelayMs?: number;
  /** Retries per second over all keys (the shared bucket). Default 10, like client-go. */
  qps?: number;
  /** Retries allowed at once before the bucket paces them. Default 100, like client-go. */
  burst?: number;
}

export function defaultControllerRateLimiter(opts: DefaultRateLimiterOptions = {}): RateLimiter {
  return new MaxOfRateLimiter(
    new ItemExponentialRateLimiter(opts.baseDelayMs ?? 500, opts.maxDelayMs ?? 5 * 60_000),
    new BucketRateLimiter(opts.qps ?? 10, opts.burst ?? 100),
  );
}
