/**
 * The base context a decision ends with is carried to the next decision on its state (issue 20:
 * linear time for long playbooks). It must give exactly what a context built afresh gives: a
 * state without a carried base (a structured clone) decides the same, a decision thrown away and
 * taken again decides the same, and external vars that changed are seen.
 */
import { describe, expect, it } from 'vitest';
import { parsePlaybook } from '../../playbook/index.js';
import type { Playbook } from '../../playbook/types.js';
import type { Command, EngineEvent, EngineInput } from './contract.js';
import { engine, type EngineState } from './index.js';

function pb(body: string): Playbook {
  const r = parsePlaybook(`apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\n${body}`);
  if (!r.playbook) throw new Error(JSON.stringify(r.errors));
  return r.playbook;
}

const N = 12;
const chain = pb(`workload: {base: w}
workflow:
${Array.from({ length: N }, (_, i) => `  - step: s${i}
    tool: {kind: http, url: "{{ workload.base }}/${i === 0 ? 'none' : `{{ s${i - 1}.n }}`}/{{ vars.last | default('-') }}/{{ ext | default('-') }}"}
${i < 6 ? `\n    vars: {last: "{{ result.n }}"}` : ''}${i < N - 1 ? `\n    next: s${i + 1}` : ''}`).join('\n')}
`);

const at = (now: number, externalVars?: Record<string, string>): EngineInput => ({ now, random: () => 0.5, ...(externalVars ? { externalVars } : {}) });
const done = (cmd: Command, n: number): EngineEvent => ({ name: 'call.done', step: cmd.step, command_id: cmd.command_id, payload: { response: { n } } });

describe('carried base context', () => {
  it('decides exactly as a context built afresh, also after a decision thrown away and with changed external vars', () => {
    const d = engine.start(chain, { execution_id: '1', path: 'p', version: 1, catalog_id: '1', payload: {} }, at(1));
    let state: EngineState = d.state;
    let cmd = d.commands[0];
    const urls: string[] = [String(cmd.tool.endpoint ?? cmd.tool.url)];
    for (let i = 0; i < N; i++) {
      const ext = i >= 6 ? { ext: `e${i}` } : undefined;
      const ev = done(cmd, i * 10);
      const fresh = engine.handle(structuredClone(state), chain, ev, at(100 + i, ext));
      if (i % 3 === 1) {
        // thrown away (a failed commit): the next handle() on the same state must not see its effects
        const discarded = engine.handle(state, chain, ev, at(100 + i, ext));
        expect(discarded.events).toEqual(fresh.events);
      }
      const next = engine.handle(state, chain, ev, at(100 + i, ext));
      expect(next.events).toEqual(fresh.events);
      expect(next.commands).toEqual(fresh.commands);
      state = next.state;
      if (!next.commands.length) break;
      cmd = next.commands[0];
      urls.push(String(cmd.tool.endpoint ?? cmd.tool.url));
    }
    expect(state.status).toBe('completed');
    expect(urls.slice(0, 3)).toEqual(['w/none/-/-', 'w/0/0/-', 'w/10/10/-']);
    // external vars appear from the decision that has them
    // (steps from s6 on set no vars, so nothing in their decisions re-reads the vars)
    expect(urls[7]).toBe('w/60/50/e6');
    expect(urls[N - 1]).toBe(`w/${(N - 2) * 10}/50/e${N - 2}`);
  });
});
