import { describe, expect, it } from 'vitest';
import { setCondition } from './conditions.js';

describe('setCondition', () => {
  it('keeps lastTransitionTime while the status is unchanged', () => {
    const t1 = new Date('2026-01-01T00:00:00Z');
    const t2 = new Date('2026-01-01T00:05:00Z');
    const a = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'X', message: 'm' }, 1, t1);
    const b = setCondition(a, { type: 'Ready', status: 'False', reason: 'Y', message: 'n' }, 2, t2);
    expect(b).toEqual([{ type: 'Ready', status: 'False', reason: 'Y', message: 'n', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 2 }]);
    const c = setCondition(b, { type: 'Ready', status: 'True', reason: 'Z' }, 2, t2);
    expect(c[0]!.lastTransitionTime).toBe('2026-01-01T00:05:00Z');
    const d = setCondition(c, { type: 'Valid', status: 'True', reason: 'V' }, 2, t2);
    expect(d.map((x) => x.type)).toEqual(['Ready', 'Valid']);
  });
});
