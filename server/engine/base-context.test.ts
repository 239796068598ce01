/**
 * The template base context is handed from one decision to the next (context.ts keepBase/takeBase)
 * instead of rebuilt from every step's result. Each decision here is also made on a deep copy of
 * the same state, which can only build a fresh base: both must decide exactly the same events,
 * through step results, vars, external vars that change, a result overriding a workload key and
 * a re-run that replaces a result.
 */
import { describe, expect, it } from 'vitest';
import { parsePlaybook } from '../../playbook/index.js';
import type { Json, JsonObject, Playbook } from '../../playbook/types.js';
import type { EngineEvent, EngineInput } from './contract.js';
import { engine, type EngineState } from './index.js';

function pb(body: string): Playbook {
  const r = parsePlaybook(`apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\n${body}`);
  if (!r.playbook) throw new Error(JSON.stringify(r.errors));
  return r.playbook;
}

const playbook = pb(`
workload: { limit: 3, a: workload-a }
workflow:
  - step: a
    tool: { kind: http, endpoint: "http://x/a", params: { n: "{{ workload.limit }}" } }
    vars: { first: "{{ result.n }}" }
    next: [b]
  - step: b
    tool: { kind: http, endpoint: "http://x/b/{{ a.n }}", params: { v: "{{ vars.first }}", ext: "{{ token | default('none') }}", aa: "{{ a }}" } }
    next: [c]
  - step: c
    tool: { kind: http, endpoint: "http://x/c", params: { sum: "{{ a.n + b.n }}", r: "{{ results.b.n }}", first: "{{ first }}" } }
    case:
      - when: "{{ event.name == 'call.done' and result.n < 4 }}"
        then: { next: [{ step: c }] }
    next: [d]
  - step: d
    tool: { kind: http, endpoint: "http://x/d", params: { c: "{{ c.n }}", token: "{{ token | default('none') }}" } }
`);

describe('base context handed between decisions', () => {
  it('decides as a fresh base would, decision after decision', () => {
    const init = { execution_id: '7', path: 'p', version: 1, catalog_id: '1', payload: {} };
    const ext: Array<JsonObject | undefined> = [undefined, { token: 't1' }, { token: 't1' }, { token: 't2' }, { token: 't2' }, {}, { token: 't3' }, { token: 't3' }];
    let input: EngineInput = { now: 1000, random: () => 0.5 };
    let d = engine.start(playbook, init, input);
    let state: EngineState = d.state;
    const rendered: Json[] = [];
    for (let i = 0; state.open_commands.length && i < 20; i++) {
      const id = state.open_commands[0];
      const cmd = state.commands[id];
      rendered.push(cmd.tool as unknown as Json);
      input = { now: 1000 + i, random: () => 0.5, externalVars: ext[i % ext.length] };
      const started: EngineEvent = { name: 'action_started', step: cmd.step, command_id: id, payload: { queue_id: String(id) } };
      const fresh0 = engine.handle(structuredClone(state), playbook, started, input);
      d = engine.handle(state, playbook, started, input);
      expect(d.events).toEqual(fresh0.events);
      state = d.state;
      const done: EngineEvent = { name: 'call.done', step: cmd.step, command_id: id, payload: { response: { n: i + 1 } } };
      const fresh = engine.handle(structuredClone(state), playbook, done, input);
      d = engine.handle(state, playbook, done, input);
      expect(d.events).toEqual(fresh.events);
      expect(d.state).toEqual(fresh.state);
      state = d.state;
    }
    expect(state.status).toBe('completed');
    // the renders did see the earlier results, vars and external vars
    expect(JSON.stringify(rendered)).toContain('http://x/b/1');
    expect(JSON.stringify(rendered)).toContain('"token":"t');
    expect(rendered.length).toBeGreaterThanOrEqual(5);
  });
});
