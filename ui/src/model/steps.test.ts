import { describe, expect, it } from 'vitest';
import type { EventView, Execution } from '../types.js';
import { foldEvents, summaryFromCounts } from './steps.js';

let seq = 0;
const ev = (name: string, step: string | null, payload: Record<string, unknown> = {}, command_id: number | null = null): EventView =>
  ({ seq: ++seq, name, step, command_id, payload, created_at: new Date(1_700_000_000_000 + seq * 10).toISOString() });

describe('foldEvents', () => {
  it('follows a loop step: queued, running, n/m items, completed; one call per item with its duration', () => {
    const items = ['a', 'b', 'c'];
    const log = [
      ev('execution_started', null),
      ev('step.enter', 'fetch', { run: 1, args: {}, loop: { items, mode: 'async' } }),
      ...items.map((x, i) => ev('command_issued', 'fetch', { item: i, command: { attempt: 1, tool: { kind: 'http', args: { x } } } }, i + 1)),
    ];
    let s = foldEvents(log).steps.get('fetch')!;
    expect(s.state).toBe('queued');
    expect(s.loop).toEqual({ done: 0, total: 3 });
    log.push(ev('action_started', 'fetch', { worker_id: 'w1' }, 1));
    log.push(ev('call.done', 'fetch', { response: { ok: 1 }, meta: { duration_ms: 42, attempt: 1 } }, 1));
    log.push(ev('action_completed', 'fetch', { effects: { done: { item: 0 } }, outcome: 'ok' }, 1));
    s = foldEvents(log).steps.get('fetch')!;
    expect(s.state).toBe('running');
    expect(s.loop).toEqual({ done: 1, total: 3 });
    expect(s.calls.map((c) => [c.command_id, c.item, c.duration_ms, c.worker_id])).toEqual([[1, 0, 42, 'w1'], [2, 1, undefined, undefined], [3, 2, undefined, undefined]]);
    expect(s.calls[0].args).toEqual({ x: 'a' });
    log.push(ev('step_completed', 'fetch', { result: [1, 2, 3] }));
    s = foldEvents(log).steps.get('fetch')!;
    expect(s.state).toBe('completed');
    expect(s.loop).toEqual({ done: 3, total: 3 });
  });

  it('keeps a failed call’s error and the step’s failure; retries are separate calls with their attempt', () => {
    const log = [
      ev('step.enter', 'get', { run: 1, args: { id: 7 } }),
      ev('command_issued', 'get', { item: null, command: { attempt: 1, tool: { kind: 'http' } } }, 1),
      ev('call.done', 'get', { error: { status: 503, message: 'busy' }, meta: { attempt: 1 } }, 1),
      ev('command_issued', 'get', { item: null, command: { attempt: 2, tool: { kind: 'http' } } }, 2),
      ev('call.done', 'get', { error: { status: 500, message: 'boom' }, meta: { attempt: 2 } }, 2),
      ev('step_failed', 'get', { error: { message: 'boom' } }),
    ];
    const s = foldEvents(log).steps.get('get')!;
    expect(s.state).toBe('failed');
    expect(s.error).toEqual({ message: 'boom' });
    expect(s.calls.map((c) => [c.attempt, (c.error as { status: number }).status])).toEqual([[1, 503], [2, 500]]);
    expect(s.args).toEqual({ id: 7 });
  });

  it('marks unfinished steps cancelled when the execution was cancelled, and takes vars from vars_set', () => {
    const log = [
      // the engine's vars_set payload (server/engine/engine.ts processVars)
      ev('vars_set', 'a', { variables: { token_count: 3 }, source_step: 'a', var_type: 'step_result' }),
      ev('step.enter', 'slow', { run: 1 }),
      ev('command_issued', 'slow', { command: { attempt: 1, tool: { kind: 'python' } } }, 1),
      ev('action_started', 'slow', {}, 1),
    ];
    const ex = { execution_id: '1', path: 'p', status: 'cancelled', created_at: '' } as Execution;
    const f = foldEvents(log, ex);
    expect(f.steps.get('slow')!.state).toBe('cancelled');
    expect(f.vars).toEqual({ token_count: 3 });
  });

  it('takes a cancelled step status from a failed execution (a parallel step still running when it failed)', () => {
    const log = [
      ev('step.enter', 'slow', { run: 1 }),
      ev('command_issued', 'slow', { command: { attempt: 1, tool: { kind: 'python' } } }, 1),
      ev('action_started', 'slow', {}, 1),
    ];
    const ex = { execution_id: '1', path: 'p', status: 'failed', created_at: '', steps: { slow: { status: 'cancelled' } } } as unknown as Execution;
    expect(foldEvents(log, ex).steps.get('slow')!.state).toBe('cancelled');
    const counts = summaryFromCounts([{ step: 'slow', calls: 1, started: 1, done: 0, errors: 0, loop_total: null, loop_done: 0 }], ex);
    expect(counts.steps.get('slow')!.state).toBe('cancelled');
  });
});

describe('summaryFromCounts', () => {
  it('takes states from the record, queued for a running step nothing claimed yet, loop n/m from the counts', () => {
    const ex = {
      execution_id: '1', path: 'p', status: 'running', created_at: '',
      steps: { a: { status: 'completed' }, b: { status: 'running' }, c: { status: 'running' } },
    } as Execution;
    const f = summaryFromCounts([
      { step: 'a', calls: 3, started: 3, done: 3, errors: 0, loop_total: 3, loop_done: 2 },
      { step: 'b', calls: 10, started: 4, done: 2, errors: 0, loop_total: 10, loop_done: 2 },
      { step: 'c', calls: 1, started: 0, done: 0, errors: 0, loop_total: null, loop_done: 0 },
    ], ex);
    expect([...f.steps.values()].map((s) => [s.name, s.state, s.loop])).toEqual([
      ['a', 'completed', { done: 3, total: 3 }],
      ['b', 'running', { done: 2, total: 10 }],
      ['c', 'queued', undefined],
    ]);
  });
});
