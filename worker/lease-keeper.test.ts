import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LeaseKeeper } from './lease-keeper.js';

describe('LeaseKeeper', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('beats each held key every interval from when it was taken, until it is released', () => {
    const beats: string[] = [];
    const keeper = new LeaseKeeper<string>(1000, (k) => beats.push(k));
    keeper.hold('a');
    vi.advanceTimersByTime(500);
    keeper.hold('b');
    vi.advanceTimersByTime(600); // a at 1000 (checked at 1000), b not yet (due 1500)
    expect(beats).toEqual(['a']);
    vi.advanceTimersByTime(500); // b at 1500
    expect(beats).toEqual(['a', 'b']);
    keeper.release('a');
    vi.advanceTimersByTime(1000);
    expect(beats).toEqual(['a', 'b', 'b']);
    keeper.close();
  });

  it('holding a key again restarts its interval (the next command of the same slot)', () => {
    const beats: number[] = [];
    const keeper = new LeaseKeeper<string>(1000, () => beats.push(Date.now()));
    const t0 = Date.now();
    keeper.hold('slot');
    vi.advanceTimersByTime(900);
    keeper.hold('slot');
    vi.advanceTimersByTime(900);
    expect(beats).toEqual([]);
    vi.advanceTimersByTime(250);
    // due at 1900, found by the check of 2000 (a quarter interval apart, from the first hold)
    expect(beats.map((t) => t - t0)).toEqual([2000]);
    keeper.close();
  });

  it('stops its timer once nothing is held, and starts it again with the next hold', () => {
    const beats: string[] = [];
    const keeper = new LeaseKeeper<string>(100, (k) => beats.push(k));
    keeper.hold('a');
    keeper.release('a');
    vi.advanceTimersByTime(25);
    expect(vi.getTimerCount()).toBe(0);
    keeper.hold('b');
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(100);
    expect(beats).toEqual(['b']);
    keeper.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('tries a failed beat again a quarter interval later, backing off to the interval, until one goes through', () => {
    const beats: number[] = [];
    const keeper = new LeaseKeeper<string>(1000, () => beats.push(Date.now()));
    const t0 = Date.now();
    keeper.hold('a');
    vi.advanceTimersByTime(1000);
    keeper.failed('a'); // the beat of 1000 failed: again at 1250
    vi.advanceTimersByTime(250);
    keeper.failed('a'); // again at 1750
    vi.advanceTimersByTime(500);
    keeper.failed('a'); // again at 2750 (a full interval at most)
    vi.advanceTimersByTime(1000);
    keeper.beaten('a'); // through: the next a full interval later
    vi.advanceTimersByTime(1000);
    expect(beats.map((t) => t - t0)).toEqual([1000, 1250, 1750, 2750, 3750]);
    keeper.failed('a');
    vi.advanceTimersByTime(250); // counted from one again
    expect(beats.map((t) => t - t0)).toEqual([1000, 1250, 1750, 2750, 3750, 4000]);
    keeper.close();
  });

  it('a failure reported for a key released meanwhile does not hold it again', () => {
    const beats: string[] = [];
    const keeper = new LeaseKeeper<string>(100, (k) => beats.push(k));
    keeper.hold('a');
    vi.advanceTimersByTime(100);
    keeper.release('a');
    keeper.failed('a');
    vi.advanceTimersByTime(500);
    expect(beats).toEqual(['a']);
    expect(keeper.size).toBe(0);
    keeper.close();
  });
});
