import { describe, expect, it } from 'vitest';
import { Stabilizer, desiredFromDepth } from './scaling.js';

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
});
