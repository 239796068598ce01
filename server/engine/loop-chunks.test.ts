/**
 * Loop results and finished flags are stored in chunks (issue 20: recording an item copied the
 * whole loop's lists, O(items) per item). Results stay in item order across chunk boundaries, and
 * a state written before chunking (flat lists, no `chunk`) still runs to the same end.
 */
import { describe, expect, it } from 'vitest';
import { parsePlaybook } from '../../playbook/index.js';
import type { Playbook } from '../../playbook/types.js';
import type { Command, EngineInput } from './contract.js';
import { engine, type EngineState } from './index.js';
import { LOOP_CHUNK, type LoopState } from './state.js';

const ITEMS = LOOP_CHUNK * 2 + 300;
const r = parsePlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: t}
workflow:
  - step: each
    loop: {in: "{{ range(${ITEMS}) | list }}", iterator: i, mode: async, max_in_flight: 7}
    tool: {kind: http, url: "http://x/{{ i }}"}
`);
const pb = r.playbook as Playbook;
const at = (now: number): EngineInput => ({ now, random: () => 0.5 });

/** Answers commands in a scrambled order (item i answers 3 * i); `convert` may rewrite the state once, mid-way. */
function run(convert?: (s: EngineState) => EngineState): { state: EngineState; result: unknown } {
  const d = engine.start(pb, { execution_id: '1', path: 'p', version: 1, catalog_id: '1', payload: {} }, at(1));
  let state = d.state;
  const queue: Command[] = [...d.commands];
  let n = 0;
  while (queue.length) {
    const cmd = queue.splice(n % queue.length, 1)[0];
    const item = cmd.iteration as number;
    const next = engine.handle(state, pb, { name: 'call.done', step: cmd.step, command_id: cmd.command_id, payload: { response: { v: item * 3 } } }, at(10 + n));
    state = next.state;
    queue.push(...next.commands);
    if (++n === LOOP_CHUNK + 5 && convert) state = convert(state);
  }
  return { state, result: state.result };
}

describe('chunked loop state', () => {
  it('keeps results in item order across chunks', () => {
    const { state, result } = run();
    expect(state.status).toBe('completed');
    expect(result).toEqual(Array.from({ length: ITEMS }, (_, i) => ({ v: i * 3 })));
  });

  it('a state with flat lists (written before chunking) runs to the same end', () => {
    let converted = false;
    const { state, result } = run((s) => {
      const copy = structuredClone(s);
      const loop = copy.runs.each.loop as LoopState;
      expect(loop.chunk).toBe(LOOP_CHUNK);
      loop.results = (loop.results as unknown[][]).flat(1) as never;
      loop.finished = (loop.finished as boolean[][]).flat(1);
      delete loop.chunk;
      converted = true;
      return copy;
    });
    expect(converted).toBe(true);
    expect(state.status).toBe('completed');
    expect(result).toEqual(Array.from({ length: ITEMS }, (_, i) => ({ v: i * 3 })));
  });
});
