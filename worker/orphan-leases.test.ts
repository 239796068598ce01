import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { OrphanLeases, type OrphanLeasesOptions, type ReleaseOutcome } from './orphan-leases.js';
import { silentLogger } from '../common/logger.js';

class Unreachable extends Error {}

function make(over: Partial<OrphanLeasesOptions> & Pick<OrphanLeasesOptions, 'release'>) {
  const outcomes: ReleaseOutcome[] = [];
  const orphans = new OrphanLeases({
    busy: () => false,
    transient: (err) => err instanceof Unreachable,
    maxAgeMs: 20_000,
    log: silentLogger,
    onOutcome: (o) => outcomes.push(o),
    ...over,
  });
  return { orphans, outcomes };
}

describe('OrphanLeases', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('asks at once; while the server is not reached, again with backoff until it answers', async () => {
    const calls: number[] = [];
    let up = false;
    const { orphans, outcomes } = make({
      release: async () => {
        calls.push(Date.now());
        if (!up) throw new Unreachable('ECONNREFUSED');
        return 1;
      },
    });
    const t0 = Date.now();
    orphans.add('7');
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.map((t) => t - t0)).toEqual([0]);
    await vi.advanceTimersByTimeAsync(250 + 500 + 1000);
    expect(calls.map((t) => t - t0)).toEqual([0, 250, 750, 1750]);
    up = true;
    await vi.advanceTimersByTimeAsync(2000);
    expect(calls).toHaveLength(5);
    expect(outcomes).toEqual(['released']);
    expect(orphans.has('7')).toBe(false);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(5);
  });

  it('gives up once the lease would have run out by itself, or on an answer that is not transient', async () => {
    let n = 0;
    const { orphans, outcomes } = make({ maxAgeMs: 3000, release: async () => { n++; throw new Unreachable('down'); } });
    orphans.add('1');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(outcomes).toEqual(['failed']);
    expect(n).toBe(4); // at 0, 250, 750 and 1750 ms; the next (3750) is past the lease

    const refused = make({ release: async () => { throw new Error('404 queue entry 2 not found'); } });
    refused.orphans.add('2');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(refused.outcomes).toEqual(['failed']);
  });

  it('a command this worker claims or runs again is not released; a new claim of it cancels the pending release', async () => {
    const released: string[] = [];
    const busy = new Set(['3']);
    const { orphans, outcomes } = make({ busy: (q) => busy.has(q), release: async (q) => { released.push(q); return 1; } });
    orphans.add('3');
    await vi.advanceTimersByTimeAsync(0);
    expect(released).toEqual([]);
    expect(outcomes).toEqual(['dropped']);

    let down = true;
    const retried = make({ release: async (q) => { if (down) throw new Unreachable('down'); released.push(q); return 1; } });
    retried.orphans.add('4');
    await vi.advanceTimersByTimeAsync(0);
    retried.orphans.forget('4'); // a redelivery's claim of 4 starts
    down = false;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(released).toEqual([]);
    expect(retried.orphans.has('4')).toBe(false);
  });

  it('stop cancels every pending release', async () => {
    let n = 0;
    const { orphans } = make({ release: async () => { n++; throw new Unreachable('down'); } });
    orphans.add('5');
    orphans.add('5'); // once per command
    await vi.advanceTimersByTimeAsync(0);
    expect(n).toBe(1);
    orphans.stop();
    orphans.add('6');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(n).toBe(1);
  });
});
