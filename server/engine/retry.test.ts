/**
 * `execution.retry`: a failed or cancelled execution resumes in place. The runner (testkit.ts)
 * checks after every decision, the retry included, that fold(events) equals the incremental state
 * and that a JSON snapshot decides the same.
 */
import { describe, expect, it } from 'vitest';
import { parsePlaybook } from '../../playbook/index.js';
import type { Json, Playbook } from '../../playbook/types.js';
import { handle } from './engine.js';
import { T0, runScenario, type FakeWorker, type WorkerReply } from './testkit.js';
import type { Command } from './contract.js';

const HEADER = 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: retry, path: tests/retry}\n';
function yaml(text: string): Playbook {
  const r = parsePlaybook(HEADER + text);
  if (!r.playbook) throw new Error(JSON.stringify(r.errors));
  return r.playbook;
}
const ok = (data: Json): WorkerReply => ({ response: { id: 'r', status: 200, data } });
const fail500: WorkerReply = { error: { status: 500, message: 'upstream error' } };
const label = (c: Command) => (c.iteration !== undefined ? `${c.step}#${c.iteration}` : c.step);

const chain5 = yaml(`
workflow:
  - step: s1
    tool: {kind: http, method: GET, url: "http://api/1"}
    next: s2
  - step: s2
    tool: {kind: http, method: GET, url: "http://api/2"}
    next: s3
  - step: s3
    tool: {kind: http, method: GET, url: "http://api/3", params: {x: "{{ args.x | default(0) }}", who: "{{ workload.who | default('nobody') }}"}}
    args: {x: 1}
    next: s4
  - step: s4
    tool: {kind: http, method: GET, url: "http://api/4"}
    next: s5
  - step: s5
    tool: {kind: http, method: GET, url: "http://api/5"}
`);

describe('engine: execution.retry', () => {
  it('a 5-step chain failing at s3 resumes at s3; s1 and s2 are not run again and keep their results', () => {
    const worker: FakeWorker = ({ cmd, retried }) => (cmd.step === 's3' && retried === 0 ? fail500 : ok({ step: cmd.step }));
    const r = runScenario(chain5, worker, { retries: [{}] });
    expect(r.state.status).toBe('completed');
    expect(r.answered.map(label)).toEqual(['s1', 's2', 's3', 's3', 's4', 's5']);
    expect(r.state.steps.s1).toMatchObject({ status: 'completed', runs: 1 });
    expect(r.state.steps.s3).toMatchObject({ status: 'completed', runs: 2 });
    expect(r.state.error).toBeUndefined();
    expect(r.state.resume).toBeUndefined();
    const names = r.events.map((e) => e.name);
    const at = names.indexOf('execution_retried');
    expect(names.slice(at - 2, at + 2)).toEqual(['execution_failed', 'execution.retry', 'execution_retried', 'step.enter']);
    expect(r.events[at].payload.steps).toEqual([{ step: 's3', args: { x: 1 }, resume: false }]);
  });

  it('the retry body overrides the failed step args and the payload', () => {
    const seen: Command[] = [];
    const worker: FakeWorker = ({ cmd, retried }) => {
      if (cmd.step === 's3') seen.push(cmd);
      return cmd.step === 's3' && retried === 0 ? fail500 : ok({});
    };
    const r = runScenario(chain5, worker, { retries: [{ args: { s3: { x: 7 } }, payload: { who: 'ops' } }], payload: { who: 'dev' } });
    expect(r.state.status).toBe('completed');
    expect(seen.map((c) => c.tool.params)).toEqual([{ x: 1, who: 'dev' }, { x: 7, who: 'ops' }]);
    expect(seen[1].args).toEqual({ x: 7 });
    expect(r.state.payload).toEqual({ who: 'ops' });
  });

  it('a failed loop retries only the items that did not finish', () => {
    const pb = yaml(`
workflow:
  - step: items
    loop: {in: "{{ range(6) | list }}", iterator: i, mode: async}
    tool: {kind: http, method: GET, url: "http://api/{{ i }}"}
    next: after
  - step: after
    tool: {kind: http, method: GET, url: "http://api/after"}
`);
    const worker: FakeWorker = ({ cmd, retried }) => (cmd.iteration === 2 && retried === 0 ? fail500 : ok({ i: cmd.iteration ?? null }));
    const r = runScenario(pb, worker, { retries: [{}] });
    expect(r.state.status).toBe('completed');
    // 0, 1 finished; 2 failed; 3-5 were cancelled by the fail-fast and run on the retry
    expect(r.answered.map(label)).toEqual(['items#0', 'items#1', 'items#2', 'items#2', 'items#3', 'items#4', 'items#5', 'after']);
    expect((r.state.steps.items.result as Array<{ data: Json }>).map((e) => e.data)).toEqual([0, 1, 2, 3, 4, 5].map((i) => ({ i })));
    expect(r.state.steps.items.runs).toBe(1);
  });

  it('a sequential loop failing twice needs two retries; finished items never rerun', () => {
    const pb = yaml(`
workflow:
  - step: items
    loop: {in: [a, b, c, d], iterator: i, mode: sequential}
    tool: {kind: http, method: GET, url: "http://api/{{ i }}"}
`);
    const worker: FakeWorker = ({ cmd, retried }) => ((cmd.iteration === 1 && retried === 0) || (cmd.iteration === 3 && retried === 1) ? fail500 : ok(cmd.iteration ?? null));
    const r = runScenario(pb, worker, { retries: [{}, {}] });
    expect(r.state.status).toBe('completed');
    expect(r.answered.map(label)).toEqual(['items#0', 'items#1', 'items#1', 'items#2', 'items#3', 'items#3']);
    expect((r.state.result as Array<{ data: Json }>).map((e) => e.data)).toEqual([0, 1, 2, 3]);
  });

  it('a cancelled execution resumes the runs that were open', () => {
    const worker: FakeWorker = ({ cmd }) => ok({ step: cmd.step });
    const r = runScenario(chain5, worker, { cancelAfter: 2, retries: [{}] });
    expect(r.state.status).toBe('completed');
    expect(r.answered.map(label)).toEqual(['s1', 's2', 's3', 's4', 's5']);
    expect(r.events.filter((e) => e.name === 'execution_cancelled')).toHaveLength(1);
  });

  it('a completed or running execution ignores execution.retry', () => {
    const done = runScenario(chain5, ({ cmd }) => ok({ step: cmd.step }));
    const retry = { name: 'execution.retry', step: null, payload: {} };
    const input = { now: T0, random: () => 0.5 };
    expect(handle(done.state, chain5, retry, input).events).toEqual([]);
    const running = runScenario(chain5, ({ cmd }) => ok({ step: cmd.step }), { maxCalls: 2 });
    expect(running.state.status).toBe('running');
    expect(handle(running.state, chain5, retry, input).events).toEqual([]);
  });

  it('a step failing through its own case rule reruns and may now pass', () => {
    const pb = yaml(`
workflow:
  - step: check
    tool: {kind: http, method: GET, url: "http://api/check"}
    case:
      - when: "{{ response.ready == false }}"
        then: [{fail: "not ready"}]
    next: end
  - step: end
`);
    const worker: FakeWorker = ({ retried }) => ok({ ready: retried > 0 });
    const r = runScenario(pb, worker, { retries: [{}] });
    expect(r.state.status).toBe('completed');
    expect(r.state.steps.check).toMatchObject({ status: 'completed', runs: 2 });
  });
});
