import { describe, expect, it } from 'vitest';
import { RateLimiter, Stabilizer, desiredFromDepth, desiredWithTolerance, owningPool } from './scaling.js';

describe('WorkerPool scaling', () => {
  it('desired = clamp(ceil(depth / target), min, max)', () => {
    expect(desiredFromDepth(200, 20, 1, 10)).toBe(10);
    expect(desiredFromDepth(200, 20, 1, 8)).toBe(8);
    expect(desiredFromDepth(201, 20, 1, 20)).toBe(11);
    expect(desiredFromDepth(0, 20, 1, 10)).toBe(1);
    expect(desiredFromDepth(0, 20, 0, 10)).toBe(0);
    expect(desiredFromDepth(5, 0, 1, 10)).toBe(5); // a zero target counts as 1
  });

  it('scales up at once and down only after the window', () => {
    const s = new Stabilizer();
    const W = 60_000;
    // first sight: no history yet, so no scale-down below the current count
    expect(s.recommend('p', 0, 3, 1, 0, W)).toBe(3);
    expect(s.recommend('p', 1_000, 3, 10, 0, W)).toBe(10); // up at once
    expect(s.recommend('p', 2_000, 10, 1, 0, W)).toBe(10); // held by the recent 10
    expect(s.recommend('p', 60_500, 10, 1, 0, W)).toBe(10); // the 10 of t=1000 is still inside the window
    expect(s.recommend('p', 61_500, 10, 1, 0, W)).toBe(1); // window passed
  });

  it('scales down to the highest recommendation inside the window, and up to the lowest inside an up window', () => {
    const s = new Stabilizer();
    s.recommend('p', 0, 10, 10, 0, 1000);
    s.recommend('p', 1500, 10, 6, 0, 1000);
    expect(s.recommend('p', 2000, 10, 2, 0, 1000)).toBe(6);
    const u = new Stabilizer();
    expect(u.recommend('q', 0, 1, 5, 1000, 0)).toBe(5);
    expect(u.recommend('q', 100, 5, 9, 1000, 0)).toBe(5); // 5 was recommended within the up window
    expect(u.recommend('q', 1200, 5, 9, 1000, 0)).toBe(9);
  });

  it('an outage (hold) restarts the scale-down window', () => {
    const s = new Stabilizer();
    s.recommend('p', 0, 1, 10, 0, 1000);
    s.hold('p', 900, 10);
    expect(s.recommend('p', 1500, 10, 1, 0, 1000)).toBe(10);
    expect(s.recommend('p', 1950, 10, 1, 0, 1000)).toBe(1);
  });

  it('keeps the count within the tolerance of what the replicas are sized for (the HPA\'s 0.1)', () => {
    // 4 replicas × 20 = 80: 75 and 86 are within 10 %, 70 and 90 are not.
    expect(desiredWithTolerance(75, 20, 1, 10, 4, 0.1)).toBe(4);
    expect(desiredWithTolerance(86, 20, 1, 10, 4, 0.1)).toBe(4);
    expect(desiredWithTolerance(70, 20, 1, 10, 4, 0.1)).toBe(4); // ceil(70 / 20) = 4 anyway
    expect(desiredWithTolerance(61, 20, 1, 10, 4, 0.1)).toBe(4);
    expect(desiredWithTolerance(59, 20, 1, 10, 4, 0.1)).toBe(3);
    expect(desiredWithTolerance(90, 20, 1, 10, 4, 0.1)).toBe(5);
    // Without tolerance, one command over the boundary adds a replica.
    expect(desiredWithTolerance(81, 20, 1, 10, 4, 0)).toBe(5);
    expect(desiredWithTolerance(81, 20, 1, 10, 4, 0.1)).toBe(4);
    // From zero replicas, or out of [min, max], tolerance never holds the count.
    expect(desiredWithTolerance(5, 20, 0, 10, 0, 0.1)).toBe(1);
    expect(desiredWithTolerance(80, 20, 1, 3, 4, 0.1)).toBe(3);
  });

  it('bounds each change by the rate policies over their periods, like the HPA', () => {
    const r = new RateLimiter();
    const up = { policies: [{ type: 'Pods' as const, value: 4, periodSeconds: 60 }, { type: 'Percent' as const, value: 100, periodSeconds: 60 }] };
    // Max of +4 pods and +100 %: from 2, 6 (4 > 2); from 10, 20.
    expect(r.limit('p', 0, 2, 50, up)).toBe(6);
    r.record('p', 0, 2, 6);
    // Within the period the start is still 2: nothing more until it passes.
    expect(r.limit('p', 30_000, 6, 50, up)).toBe(6);
    expect(r.limit('p', 61_000, 6, 50, up)).toBe(12);
    r.record('p', 61_000, 6, 12);
    expect(r.limit('p', 122_000, 12, 50, up)).toBe(24);
    // Min picks the smallest change.
    expect(r.limit('q', 0, 10, 50, { ...up, selectPolicy: 'Min' })).toBe(14);
    // Disabled: never that way; other way unaffected.
    expect(r.limit('q', 0, 10, 50, { selectPolicy: 'Disabled' })).toBe(10);
    expect(r.limit('q', 0, 10, 2, { selectPolicy: 'Disabled' })).toBe(2);
    // No policies: no limit; the desired count within the limit is kept as is.
    expect(r.limit('q', 0, 10, 50)).toBe(50);
    expect(r.limit('q', 0, 10, 11, up)).toBe(11);

    const down = { policies: [{ type: 'Percent' as const, value: 50, periodSeconds: 60 }] };
    const d = new RateLimiter();
    expect(d.limit('p', 0, 10, 1, undefined, down)).toBe(5);
    d.record('p', 0, 10, 5);
    expect(d.limit('p', 10_000, 5, 1, undefined, down)).toBe(5);
    expect(d.limit('p', 61_000, 5, 1, undefined, down)).toBe(2); // floor(5 × 0.5)
    expect(d.limit('r', 0, 10, 1, undefined, { policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }, { type: 'Pods', value: 3, periodSeconds: 60 }] })).toBe(7);
    expect(d.limit('r', 0, 10, 1, undefined, { selectPolicy: 'Min', policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }, { type: 'Pods', value: 3, periodSeconds: 60 }] })).toBe(9);
    // A limit never reverses the direction: after a big scale-down, a scale-up still goes up.
    const x = new RateLimiter();
    x.record('p', 0, 2, 10);
    expect(x.limit('p', 1000, 10, 12, { policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }] })).toBe(10);
  });

  it('gives a StatefulSet targeted by several pools to the oldest, then by name; pools being deleted do not compete', () => {
    const pool = (name: string, created: string, deleting = false) => ({ metadata: { name, creationTimestamp: created, ...(deleting ? { deletionTimestamp: created } : {}) } });
    const a = pool('a', '2026-01-02T00:00:00Z');
    const b = pool('b', '2026-01-01T00:00:00Z');
    const c = pool('c', '2026-01-01T00:00:00Z');
    expect(owningPool([a, b, c])!.metadata.name).toBe('b');
    expect(owningPool([c, a, b])!.metadata.name).toBe('b');
    expect(owningPool([a, { ...b, metadata: { ...b.metadata, deletionTimestamp: 'x' } }, c])!.metadata.name).toBe('c');
    expect(owningPool([pool('z', '2026-01-01T00:00:00Z', true)])).toBeUndefined();
  });
});
