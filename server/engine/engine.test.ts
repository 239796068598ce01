import { describe, expect, it } from 'vitest';
import { parsePlaybook } from '../../playbook/index.js';
import type { Playbook } from '../../playbook/types.js';
import type { EngineEvent, EngineInput } from './contract.js';
import { caseEventsOf, engine, mergeTool } from './index.js';

const input: EngineInput = { now: 1000, random: () => 0.5 };
const init = { execution_id: '9', path: 'p', version: 1, catalog_id: '1', payload: { a: 1 } };

function pb(body: string): Playbook {
  const r = parsePlaybook(`apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\n${body}`);
  if (!r.playbook) throw new Error(JSON.stringify(r.errors));
  return r.playbook;
}

const two = pb(`
workflow:
  - step: a
    tool: {kind: python, code: "x"}
    next: [b]
  - step: b
    tool: {kind: python, code: "x"}
`);

describe('case entry → event rule', () => {
  it.each([
    ["{{ event.name == 'call.done' }}", ['call.done']],
    ["{{ event.name in ['step.enter', 'step.exit'] }}", ['step.enter', 'step.exit']],
    ["event.name == 'step.exit' and result.ok", ['step.exit']],
    ['{{ event.name != other }}', ['step.enter', 'call.done', 'step.exit', 'worker.done']],
    ['{{ error.status in [500, 502, 503] }}', ['call.done']],
    ['{{ response.data.has_more }}', ['call.done']],
    ['{{ result.count > 0 }}', ['call.done']],
    ['{{ page.next }}', ['call.done']],
    ['{{ _retry.index < 3 }}', ['call.done']],
    ['{{ event.payload.error.status == 503 }}', ['call.done']],
    ["{{ event.payload.response.data.state == 'done' }}", ['call.done']],
    ["{{ event.name != 'step.enter' and error is defined }}", ['step.enter', 'call.done', 'step.exit', 'worker.done']],
    ["{{ event.name not in ['step.enter'] }}", ['step.enter', 'call.done', 'step.exit', 'worker.done']],
    ['{{ loop_index == 2 }}', ['call.done']],
    ["{{ ctx.state == 'error' }}", ['step.exit']],
    ['{{ vars.flag }}', ['step.exit']],
    ['{{ workload.response_mode }}', ['step.exit']],
  ])('%s → %j', (when, expected) => {
    expect([...caseEventsOf(when)].sort()).toEqual([...expected].sort());
  });

  it("the step's loop iterator is bound at call.done only, so an entry reading it applies there", () => {
    expect([...caseEventsOf('{{ it == 2 }}', 'it')]).toEqual(['call.done']);
    expect([...caseEventsOf('{{ it == 2 }}')]).toEqual(['step.exit']);
    expect([...caseEventsOf("{{ workload.it == 'it' }}", 'it')]).toEqual(['step.exit']);
  });
});

describe('engine API', () => {
  it('start: execution_started carries what the fold needs; the entry step is entered', () => {
    const d = engine.start(two, init, input);
    expect(d.events.map((e) => e.name)).toEqual(['execution_started', 'step.enter', 'command_issued']);
    expect(d.events[0].payload).toMatchObject({ execution_id: '9', path: 'p', version: 1, catalog_id: '1', payload: { a: 1 }, root_execution_id: '9' });
    expect(d.commands.map((c) => c.step)).toEqual(['a']);
    expect(engine.fold(d.events)).toEqual(d.state);
    expect(d.state).toMatchObject({ status: 'started', open_commands: [1], payload: { a: 1 } });
  });

  it('reduce from undefined equals fold', () => {
    const d = engine.start(two, init, input);
    let s = engine.reduce(undefined, d.events[0]);
    for (const e of d.events.slice(1)) s = engine.reduce(s, e);
    expect(s).toEqual(d.state);
  });

  it('handle does not change the state it is given', () => {
    const d = engine.start(two, init, input);
    const snapshot = JSON.parse(JSON.stringify(d.state));
    const d2 = engine.handle(d.state, two, { name: 'call.done', command_id: 1, payload: { response: 1 } }, input);
    expect(d2.state).not.toBe(d.state);
    expect(d.state).toEqual(snapshot);
    expect(d2.state.steps.a.status).toBe('completed');
  });

  it('action_started marks the command running once; a second claim is a duplicate', () => {
    const d = engine.start(two, init, input);
    const claim: EngineEvent = { name: 'action_started', command_id: 1, payload: { worker_id: 'w' } };
    const d1 = engine.handle(d.state, two, claim, input);
    expect(d1.events.map((e) => e.name)).toEqual(['action_started']);
    expect(d1.state.status).toBe('running');
    expect(d1.state.commands[1].status).toBe('running');
    const d2 = engine.handle(d1.state, two, claim, input);
    expect(d2.events).toEqual([]);
    expect(d2.state).toBe(d1.state);
  });

  it('call.done without command_id is matched to the only open call of its step', () => {
    const d = engine.start(two, init, input);
    const d1 = engine.handle(d.state, two, { name: 'call.done', step: 'a', payload: { response: 5 } }, input);
    expect(d1.events[0]).toMatchObject({ name: 'call.done', step: 'a', command_id: 1 });
    expect(d1.commands.map((c) => c.step)).toEqual(['b']);
  });

  it('a terminal execution ignores every event', () => {
    let d = engine.start(two, init, input);
    d = engine.handle(d.state, two, { name: 'execution.cancel', payload: {} }, input);
    expect(d.state.status).toBe('cancelled');
    expect(d.cancelled_commands).toEqual([1]);
    const after = engine.handle(d.state, two, { name: 'call.done', command_id: 1, payload: { response: 1 } }, input);
    expect(after.events).toEqual([]);
    expect(engine.handle(d.state, two, { name: 'execution.cancel', payload: {} }, input).events).toEqual([]);
  });

  it('an ended execution ends its unfinished steps as cancelled (a queued loop too), in the fold as incrementally; a retry runs them again', () => {
    const loopy = pb(`
workflow:
  - step: a
    tool: {kind: python, code: "x"}
    next: [b]
  - step: b
    loop: {in: "{{ [1, 2, 3] }}", iterator: it}
    tool: {kind: python, code: "x"}
`);
    const log: EngineEvent[] = [];
    let d = engine.start(loopy, init, input);
    log.push(...d.events);
    d = engine.handle(d.state, loopy, { name: 'call.done', command_id: 1, payload: { response: 1 } }, input);
    log.push(...d.events);
    expect(d.state.steps.b.status).toBe('running');
    d = engine.handle(d.state, loopy, { name: 'execution.cancel', payload: {} }, input);
    log.push(...d.events);
    expect([d.state.status, d.state.steps.a.status, d.state.steps.b.status]).toEqual(['cancelled', 'completed', 'cancelled']);
    expect(d.changed_steps ?? ['b']).toContain('b');
    expect(engine.fold(log)).toEqual(d.state);
    d = engine.handle(d.state, loopy, { name: 'execution.retry', payload: {} }, input);
    log.push(...d.events);
    expect([d.state.status, d.state.steps.b.status]).toEqual(['running', 'running']);
    expect(engine.fold(log)).toEqual(d.state);
  });

  it('mergeTool: url is endpoint, objects merge one level, other values replace', () => {
    expect(
      mergeTool({ kind: 'http', endpoint: 'a', params: { page: 1, size: 5 }, headers: { x: '1' } }, { url: 'b', params: { page: 2 }, headers: null }),
    ).toEqual({ kind: 'http', endpoint: 'b', params: { page: 2, size: 5 }, headers: null });
  });
});

describe('state size', () => {
  it('stays bounded as the history grows (handling an event never depends on the history)', () => {
    const cycle = pb(`
workflow:
  - step: a
    tool: {kind: python, code: "x", args: {prev: "{{ c.n if c is defined else 0 }}"}}
    vars: {last: "{{ result.n }}"}
    next: [b]
  - step: b
    loop: {in: [1, 2, 3], iterator: i, mode: async}
    tool: {kind: python, code: "x"}
    next: [c]
  - step: c
    tool: {kind: python, code: "x"}
    next: [a]
`);
    let d = engine.start(cycle, init, input);
    let queue = [...d.commands];
    let events = d.events.length;
    const sizes: Record<number, number> = {};
    for (let n = 1; n <= 600; n++) {
      const cmd = queue.shift()!;
      d = engine.handle(d.state, cycle, { name: 'call.done', command_id: cmd.command_id, payload: { response: { n: n % 7 } } }, input);
      queue = [...queue, ...d.commands];
      events += d.events.length;
      if (n === 60 || n === 600) sizes[n] = JSON.stringify(d.state).length;
    }
    expect(events).toBeGreaterThan(3000);
    // only counters (runs, command ids) grow by a digit or so
    expect(Math.abs(sizes[600] - sizes[60])).toBeLessThan(40);
  });
});
