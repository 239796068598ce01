import { describe, expect, it } from 'vitest';
import { StartAhead } from './start-ahead.js';

/** A StartAhead on a hand-driven clock whose sequence answers with the ids given, or fails. */
function startAhead(answers: Array<string[] | Error>) {
  let t = 0;
  const asked: number[] = [];
  const ahead = new StartAhead(async (count) => {
    asked.push(count);
    const a = answers.shift() ?? [];
    if (a instanceof Error) throw a;
    return a;
  }, { maxAgeMs: 1000, now: () => t });
  return { ahead, asked, advance: (ms: number) => { t += ms; } };
}

const settled = () => new Promise((r) => setTimeout(r, 0));

describe('StartAhead', () => {
  it('hands ids out in the order taken; with none held it takes as many as asked, in the background, once at a time', async () => {
    const { ahead, asked } = startAhead([['11', '12', '13']]);
    expect(ahead.takeId(3)).toBeUndefined();
    expect(ahead.takeId(5)).toBeUndefined(); // the first refill is still out: no second one
    await settled();
    expect(asked).toEqual([3]);
    expect([ahead.takeId(1), ahead.takeId(1), ahead.takeId(1)]).toEqual(['11', '12', '13']);
    ahead.keep(['14']);
    expect(ahead.takeId(1)).toBe('14');
  });

  it('drops ids held longer than maxAgeMs (a listing by id would put their executions behind newer ones)', async () => {
    const { ahead, advance, asked } = startAhead([['21']]);
    ahead.keep(['1', '2']);
    advance(600);
    ahead.keep(['3']);
    advance(500);
    expect(ahead.takeId(1)).toBe('3');
    expect(ahead.takeId(2)).toBeUndefined();
    await settled();
    expect(asked).toEqual([2]);
    expect(ahead.takeId(1)).toBe('21');
  });

  it('a failed refill leaves nothing held and lets the next start try again', async () => {
    const { ahead, asked } = startAhead([new Error('connection lost'), ['31']]);
    expect(ahead.takeId(1)).toBeUndefined();
    await settled();
    await settled();
    expect(ahead.takeId(1)).toBeUndefined();
    await settled();
    await settled();
    expect(asked).toEqual([1, 1]);
    expect(ahead.takeId(1)).toBe('31');
  });

  it('remembers the live catalog row per path and version asked, until told it is stale', () => {
    const { ahead } = startAhead([]);
    ahead.found('a/b', undefined, { catalog_id: '7', version: 3 });
    ahead.found('a/b', 2, { catalog_id: '5', version: 2 });
    expect(ahead.catalogRow('a/b', undefined)).toEqual({ catalog_id: '7', version: 3 });
    expect(ahead.catalogRow('a/b', 2)).toEqual({ catalog_id: '5', version: 2 });
    expect(ahead.catalogRow('a/b', 3)).toBeUndefined();
    ahead.stale('a/b', undefined);
    expect(ahead.catalogRow('a/b', undefined)).toBeUndefined();
    expect(ahead.catalogRow('a/b', 2)).toEqual({ catalog_id: '5', version: 2 });
  });
});
