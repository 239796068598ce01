import { describe, expect, it } from 'vitest';
import { worthReconciling } from './predicates.js';

describe('worthReconciling', () => {
  const base = { metadata: { generation: 2, annotations: { a: '1' }, finalizers: ['playflow.io/x'] }, status: { message: 'one' } };

  it('ignores a status-only change (the controller\'s own write coming back)', () => {
    expect(worthReconciling({ ...base, status: { message: 'two' } }, base)).toBe(false);
  });

  it('counts a resync, a first sight, a spec change, a deletion, an annotation and a finalizer change', () => {
    expect(worthReconciling(base, base)).toBe(true);
    expect(worthReconciling(base, undefined)).toBe(true);
    expect(worthReconciling({ ...base, metadata: { ...base.metadata, generation: 3 } }, base)).toBe(true);
    expect(worthReconciling({ ...base, metadata: { ...base.metadata, deletionTimestamp: '2026-11-26T00:00:00Z' } }, base)).toBe(true);
    expect(worthReconciling({ ...base, metadata: { ...base.metadata, annotations: { a: '1', 'playflow.io/force-delete': 'true' } } }, base)).toBe(true);
    expect(worthReconciling({ ...base, metadata: { ...base.metadata, annotations: { a: '2' } } }, base)).toBe(true);
    expect(worthReconciling({ ...base, metadata: { ...base.metadata, finalizers: [] } }, base)).toBe(true);
  });
});
