import { describe, expect, it } from 'vitest';
import { WorkQueue } from './workqueue.js';

describe('WorkQueue', () => {
  it('deduplicates waiting keys and never hands out a key twice concurrently', async () => {
    const q = new WorkQueue('t');
    q.add('a');
    q.add('a');
    q.add('b');
    expect(q.length).toBe(2);
    const k1 = await q.get();
    expect(k1).toBe('a');
    q.add('a'); // while processing: remembered, not handed out
    const k2 = await q.get();
    expect(k2).toBe('b');
    let got: string | undefined = 'none';
    void q.get().then((k) => { got = k; });
    await new Promise((r) => setTimeout(r, 10));
    expect(got).toBe('none');
    q.done('a'); // re-added after processing
    await new Promise((r) => setTimeout(r, 0));
    expect(got).toBe('a');
    q.shutdown();
    expect(await q.get()).toBeUndefined();
  });

  it('backs off exponentially per key and forgets on success', () => {
    const q = new WorkQueue('t', { baseDelayMs: 10, maxDelayMs: 100 });
    expect([q.addRateLimited('k'), q.addRateLimited('k'), q.addRateLimited('k'), q.addRateLimited('k'), q.addRateLimited('k')]).toEqual([10, 20, 40, 80, 100]);
    expect(q.addRateLimited('other')).toBe(10);
    expect(q.numRequeues('k')).toBe(5);
    q.forget('k');
    expect(q.addRateLimited('k')).toBe(10);
    q.shutdown();
  });

  it('addAfter delivers later, and the earliest schedule wins', async () => {
    const q = new WorkQueue('t');
    q.addAfter('x', 200);
    q.addAfter('x', 20);
    q.addAfter('x', 500);
    const t0 = Date.now();
    expect(await q.get()).toBe('x');
    expect(Date.now() - t0).toBeLessThan(150);
    q.shutdown();
  });
});

describe('rate limiters', () => {
  it('the shared bucket paces retries of many keys once its burst is spent (client-go default: 10 qps, burst 100)', async () => {
    const { BucketRateLimiter, defaultControllerRateLimiter } = await import('./ratelimiter.js');
    let t = 0;
    const bucket = new BucketRateLimiter(10, 3, () => t);
    expect([bucket.when(), bucket.when(), bucket.when(), bucket.when(), bucket.when()]).toEqual([0, 0, 0, 100, 200]);
    t = 1000; // 10 tokens refilled, capped at the burst
    expect([bucket.when(), bucket.when(), bucket.when(), bucket.when()]).toEqual([0, 0, 0, 100]);

    // 200 different keys failing at once: each key's own backoff is the base delay, but the
    // bucket spreads them out, the last one by ~(200 - 100) / 10 qps = 10 s.
    const q = new WorkQueue('t', { rateLimiter: defaultControllerRateLimiter({ baseDelayMs: 5, maxDelayMs: 1000 }) });
    const delays = Array.from({ length: 200 }, (_, i) => q.addRateLimited(`k${i}`));
    expect(delays.slice(0, 100).every((d) => d === 5)).toBe(true);
    expect(delays[199]).toBeGreaterThan(9000);
    expect(delays[199]).toBeLessThanOrEqual(10_000);
    q.shutdown();
  });
});
