/**
 * Table-driven engine scenarios: a playbook (YAML through parsePlaybook), a fake worker that
 * answers each command as a function of (step, tool config, iteration, attempt), and the expected
 * commands, events and final status. The runner (testkit.ts) checks after every decision that
 * the decision state equals its events reduced, and at the end that fold(all events) — also
 * after a JSON round trip — equals the incrementally maintained state.
 */
import { describe, expect, it } from 'vitest';
import { parsePlaybook } from '../../playbook/index.js';
import type { Json, JsonObject, Playbook } from '../../playbook/types.js';
import type { Command, ExecutionStatus } from './contract.js';
import { T0, runScenario, type FakeWorker, type ScenarioOptions, type ScenarioResult, type WorkerCall, type WorkerReply } from './testkit.js';

const HEADER = 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: scenario, path: tests/scenario}\n';

function yaml(text: string): Playbook {
  const r = parsePlaybook(HEADER + text);
  if (!r.playbook) throw new Error(`scenario playbook invalid: ${JSON.stringify(r.errors)}`);
  return r.playbook;
}

/** An http envelope as the worker reports it. */
const env = (data: Json, status = 200): Json => ({ id: 'r1', status, data });
const ok = (data: Json): WorkerReply => ({ response: env(data) });
const httpError = (status: number, message = 'upstream error'): WorkerReply => ({ error: { status, message } });
const echo: FakeWorker = ({ cmd }) => ok({ step: cmd.step, iteration: cmd.iteration ?? null });
const byStep =
  (map: Record<string, (c: WorkerCall) => WorkerReply>, fallback: FakeWorker = echo): FakeWorker =>
  (c) =>
    (map[c.cmd.step] ?? fallback)(c);

export function label(c: Command): string {
  let s = c.step;
  if (c.iteration !== undefined) s += `#${c.iteration}`;
  if (c.attempt > 1) s += `@${c.attempt}`;
  if (c.tool.kind === 'postgres') s += '>pg';
  return s;
}

interface Scenario {
  name: string;
  yaml: string;
  worker?: FakeWorker;
  opts?: ScenarioOptions;
  status: ExecutionStatus;
  result?: Json;
  steps?: Record<string, string>;
  /** Labels of the commands the worker answered, in order (see `label`). */
  calls?: string[];
  /** Ordered subsequence of `step:event` (or `event` for execution-level events). */
  events?: string[];
  check?: (r: ScenarioResult) => void;
  /** Edits the parsed playbook (for shapes the parser rightly refuses). */
  edit?: (p: Playbook) => void;
}

function evLabel(e: { name: string; step?: string | null }): string {
  return e.step ? `${e.step}:${e.name}` : e.name;
}

function expectSubsequence(actual: string[], expected: string[]): void {
  let i = 0;
  for (const a of actual) if (i < expected.length && a === expected[i]) i++;
  if (i < expected.length) {
    throw new Error(`event '${expected[i]}' (#${i}) not found in order in:\n  ${actual.join('\n  ')}`);
  }
}

const cmds = (r: ScenarioResult, step: string) => r.commands.filter((c) => c.step === step && c.tool.kind !== 'postgres');
const evs = (r: ScenarioResult, name: string, step?: string) => r.events.filter((e) => e.name === name && (step === undefined || e.step === step));

const scenarios: Scenario[] = [
  // ------------------------------------------------------------------ basics
  {
    name: 'single http step: event order, command fields, execution result',
    yaml: `
workload: {base: "http://api"}
workflow:
  - step: fetch
    tool: {kind: http, method: GET, url: "{{ workload.base }}/users"}
`,
    status: 'completed',
    result: env({ step: 'fetch', iteration: null }),
    calls: ['fetch'],
    events: [
      'execution_started', 'fetch:step.enter', 'fetch:command_issued', 'fetch:call.done', 'fetch:action_completed',
      'fetch:step.exit', 'fetch:step_completed', 'fetch:transition', 'execution_completed',
    ],
    check: (r) => {
      const c = r.commands[0];
      expect(c).toMatchObject({ command_id: 1, step: 'fetch', attempt: 1, max_deliveries: 3, available_at: T0, args: {} });
      expect(c.tool).toEqual({ kind: 'http', method: 'GET', endpoint: 'http://api/users' });
      expect(c.iteration).toBeUndefined();
      expect(r.state.steps.fetch).toMatchObject({ status: 'completed', runs: 1 });
      expect(r.state.open_commands).toEqual([]);
    },
  },
  {
    name: 'entry step is `start` when present, else the first step',
    yaml: `
workflow:
  - step: other
    tool: {kind: python, code: "result = 0"}
  - step: start
    next: [b]
  - step: b
    tool: {kind: python, code: "result = 1"}
`,
    status: 'completed',
    calls: ['b'],
    steps: { start: 'completed', b: 'completed' },
    check: (r) => expect(r.state.steps.other).toBeUndefined(),
  },
  {
    name: 'routing steps (no tool) complete right after step.enter',
    yaml: `
workflow:
  - step: start
    next: [work]
  - step: work
    tool: {kind: python, code: "result = 1"}
    next: [end]
  - step: end
`,
    status: 'completed',
    calls: ['work'],
    result: null,
    events: ['start:step.enter', 'start:step.exit', 'start:step_completed', 'work:step.enter', 'work:call.done', 'end:step.enter', 'end:step_completed', 'execution_completed'],
    check: (r) => {
      const first = r.decisions[0].events.map(evLabel);
      expect(first).toEqual(['execution_started', 'start:step.enter', 'start:step.exit', 'start:step_completed', 'start:transition', 'work:step.enter', 'work:command_issued']);
      expect(r.state.result).toBeNull();
    },
  },
  {
    name: 'a playbook of routing steps only completes inside start()',
    yaml: `
workflow:
  - step: start
    next: [end]
  - step: end
`,
    status: 'completed',
    calls: [],
    check: (r) => expect(r.decisions).toHaveLength(1),
  },
  {
    name: 'structural next with static args: target command carries them; step args defaults rendered',
    yaml: `
workload: {region: eu}
workflow:
  - step: start
    next:
      - step: work
        args: {id: 7, region: "{{ workload.region }}"}
  - step: work
    args: {limit: 10, region: us}
    tool: {kind: python, code: "result = args", args: {id: "{{ args.id }}"}}
`,
    status: 'completed',
    check: (r) => {
      const c = cmds(r, 'work')[0];
      expect(c.args).toEqual({ limit: 10, region: 'eu', id: 7 });
      expect(c.tool.args).toEqual({ id: 7 });
    },
  },
  {
    name: 'templates see workload, payload, previous step results (envelope data extracted) and execution_id',
    yaml: `
workload: {base: "http://api"}
workflow:
  - step: login
    tool: {kind: http, method: POST, url: "{{ workload.base }}/login", json: {user: "{{ payload.user }}"}}
    next: [profile]
  - step: profile
    tool:
      kind: http
      method: GET
      url: "{{ workload.base }}/users/{{ login.user_id }}"
      params: {same: "{{ login.data.user_id }}", via_results: "{{ results.login.user_id }}", exe: "{{ execution_id }}"}
`,
    opts: { payload: { user: 'ann' } },
    worker: byStep({ login: () => ok({ user_id: 42 }) }),
    status: 'completed',
    check: (r) => {
      expect(cmds(r, 'login')[0].tool.json).toEqual({ user: 'ann' });
      const p = cmds(r, 'profile')[0].tool;
      expect(p.endpoint).toBe('http://api/users/42');
      expect(p.params).toEqual({ same: 42, via_results: 42, exe: '1001' });
    },
  },
  {
    name: 'the start payload is deep-merged over the workload (payload wins) and stays readable as payload',
    yaml: `
workload: {city: Oslo, api: {base: "http://api", version: 1}}
workflow:
  - step: s
    tool: {kind: python, code: "x", args: {city: "{{ workload.city }}", api: "{{ workload.api }}", bare: "{{ city }}", raw: "{{ payload.city }}"}}
`,
    opts: { payload: { city: 'Paris', api: { version: 2 } } },
    status: 'completed',
    check: (r) => expect(r.commands[0].tool.args).toEqual({ city: 'Paris', api: { base: 'http://api', version: 2 }, bare: 'Paris', raw: 'Paris' }),
  },
  {
    name: 'secret references (keychain.*) are left for the worker',
    yaml: `
keychain:
  - {name: tok, kind: oauth2, scope: local, endpoint: "http://auth/token"}
workflow:
  - step: call
    tool:
      kind: http
      method: GET
      url: "http://api/x"
      headers: {Authorization: "Bearer {{ keychain.tok.access_token }}", X-Exe: "{{ execution_id }}"}
`,
    status: 'completed',
    check: (r) => expect(r.commands[0].tool.headers).toEqual({ Authorization: 'Bearer {{ keychain.tok.access_token }}', 'X-Exe': '1001' }),
  },
  {
    name: 'a tool-config render error fails the step with an error naming the field',
    yaml: `
workflow:
  - step: start
    next: [bad]
  - step: bad
    tool: {kind: http, method: GET, url: "http://api/{{ missing_thing.id }}"}
`,
    status: 'failed',
    calls: [],
    steps: { start: 'completed', bad: 'failed' },
    events: ['bad:step.enter', 'bad:step_failed', 'execution_failed'],
    check: (r) => {
      const err = r.state.steps.bad.error as JsonObject;
      expect(err.field).toBe('tool.endpoint');
      expect(String(err.message)).toContain('tool.endpoint');
      expect((r.state.error as JsonObject).step).toBe('bad');
    },
  },
  {
    name: 'an unhandled call error fails the step and the execution',
    yaml: `
workflow:
  - step: call
    tool: {kind: http, method: GET, url: "http://api/x"}
    next: [after]
  - step: after
    tool: {kind: python, code: "result = 1"}
`,
    worker: () => httpError(404, 'not found'),
    status: 'failed',
    calls: ['call'],
    steps: { call: 'failed' },
    check: (r) => {
      expect(r.state.steps.after).toBeUndefined();
      expect((r.state.error as JsonObject).error).toEqual({ status: 404, message: 'not found' });
    },
  },

  // ------------------------------------------------------------------ case: retry, call, collect, sink, set, result, next, fail, skip
  {
    name: 'case retry on error.status in [500, 502, 503]: attempts and exponential backoff',
    yaml: `
workflow:
  - step: call
    tool: {kind: http, method: GET, url: "http://api/flaky"}
    case:
      - when: "{{ error.status in [500, 502, 503] }}"
        then:
          retry: {max_attempts: 4, initial_delay: 2, backoff_multiplier: 3}
`,
    worker: ({ n }) => (n < 2 ? httpError(n === 0 ? 503 : 502) : ok({ fine: true })),
    status: 'completed',
    calls: ['call', 'call@2', 'call@3'],
    result: env({ fine: true }),
    check: (r) => {
      const [c1, c2, c3] = r.commands;
      // random() = 0.5 → no jitter: 2 s × 3^(attempt−1)
      const done1 = r.events.find((e) => e.name === 'call.done' && e.command_id === c1.command_id)!;
      expect(done1).toBeTruthy();
      const issued2 = r.decisions.find((d) => d.commands.includes(c2))!;
      const issued3 = r.decisions.find((d) => d.commands.includes(c3))!;
      expect(issued2 && issued3).toBeTruthy();
      const t2 = c2.available_at - (T0 + 10);
      expect(t2).toBe(2000);
      expect(c3.available_at - (c2.available_at + 10)).toBe(6000);
      expect(c2.tool).toEqual(c1.tool);
    },
  },
  {
    name: 'case retry beyond max_attempts fails the step',
    yaml: `
workflow:
  - step: call
    tool: {kind: http, method: GET, url: "http://api/down"}
    case:
      - when: "{{ error.status in [500, 502, 503] }}"
        then:
          retry: {max_attempts: 2, initial_delay: 1}
`,
    worker: () => httpError(500),
    status: 'failed',
    calls: ['call', 'call@2'],
    check: (r) => expect(String((r.state.steps.call.error as JsonObject).message)).toContain('Retry attempts exhausted (2)'),
  },
  {
    name: 'case retry does not match a 404: the error is unhandled',
    yaml: `
workflow:
  - step: call
    tool: {kind: http, method: GET, url: "http://api/x"}
    case:
      - when: "{{ error.status in [500, 502, 503] }}"
        then: {retry: {max_attempts: 3}}
`,
    worker: () => httpError(404),
    status: 'failed',
    calls: ['call'],
  },
  {
    name: 'retry jitter comes from input.random (±20 % by default)',
    yaml: `
workflow:
  - step: call
    tool: {kind: http, method: GET, url: "http://api/x"}
    case:
      - when: "{{ error }}"
        then: {retry: {max_attempts: 2, initial_delay: 10, backoff_multiplier: 2}}
`,
    opts: { random: () => 1 },
    worker: ({ n }) => (n === 0 ? httpError(500) : ok({})),
    status: 'completed',
    check: (r) => expect(r.commands[1].available_at - (T0 + 10)).toBe(12000),
  },
  {
    name: 'jitter: false (or a fraction) on a retry policy controls the random spread',
    yaml: `
workflow:
  - step: exact
    tool: {kind: http, method: GET, url: "http://api/x"}
    retry:
      - when: "{{ error }}"
        then: {max_attempts: 2, initial_delay: 10}
    next: [spread]
  - step: spread
    tool: {kind: http, method: GET, url: "http://api/y"}
    retry:
      - when: "{{ error }}"
        then: {max_attempts: 2, initial_delay: 10}
`,
    // the parser does not carry jitter yet: set it on the normalised policies
    edit: (p) => {
      (p.workflow[0].retry![0].then as { jitter?: unknown }).jitter = false;
      (p.workflow[1].retry![0].then as { jitter?: unknown }).jitter = 0.5;
    },
    opts: { random: () => 0 },
    worker: ({ cmd }) => (cmd.attempt === 1 ? httpError(500) : ok(1)),
    status: 'completed',
    check: (r) => {
      const [e1, e2, s1, s2] = r.commands;
      expect([e1.step, e2.step, s1.step, s2.step]).toEqual(['exact', 'exact', 'spread', 'spread']);
      expect(e2.available_at - (T0 + 10)).toBe(10_000);
      expect(s2.available_at - (e2.available_at + 20)).toBe(5_000);
    },
  },
  {
    name: 'case call re-invokes the tool with overrides merged into the last config',
    yaml: `
workflow:
  - step: list
    tool: {kind: http, method: GET, url: "http://api/items", params: {page: 1, size: 2}}
    case:
      - when: "{{ event.name == 'call.done' and response.next_page }}"
        then:
          call: {params: {page: "{{ response.next_page }}"}}
`,
    worker: ({ cmd }) => {
      const page = (cmd.tool.params as JsonObject).page as number;
      return ok({ page, next_page: page < 3 ? page + 1 : null });
    },
    status: 'completed',
    calls: ['list', 'list', 'list'],
    result: env({ page: 3, next_page: null }),
    check: (r) => expect(r.commands.map((c) => c.tool.params)).toEqual([{ page: 1, size: 2 }, { page: 2, size: 2 }, { page: 3, size: 2 }]),
  },
  {
    name: 'case set + result: step-local ctx, not written to vars',
    yaml: `
workflow:
  - step: compute
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - set: {ctx: {doubled: "{{ response.value * 2 }}"}}
          - result: {from: {answer: "{{ ctx.doubled }}"}}
    next: [show]
  - step: show
    tool: {kind: python, code: "x", args: {a: "{{ compute.answer }}"}}
`,
    worker: byStep({ compute: () => ({ response: { value: 21 } }) }),
    status: 'completed',
    check: (r) => {
      expect(r.state.steps.compute.result).toEqual({ answer: 42 });
      expect(cmds(r, 'show')[0].tool.args).toEqual({ a: 42 });
      expect(r.state.vars).toEqual({});
    },
  },
  {
    name: 'case collect modes: append keeps lists as items, extend flattens them',
    yaml: `
workflow:
  - step: each
    loop: {in: [1, 2, 3], iterator: n, mode: sequential}
    tool: {kind: python, code: "result = [n, n]", args: {n: "{{ n }}"}}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - collect: {from: "{{ response }}", into: appended, mode: append}
          - collect: {from: "{{ response }}", into: extended, mode: extend}
      - when: "{{ event.name == 'step.exit' }}"
        then:
          result: {from: {appended: "{{ appended }}", extended: "{{ extended }}"}}
`,
    worker: ({ cmd }) => {
      const n = (cmd.tool.args as JsonObject).n;
      return { response: [n, n] };
    },
    status: 'completed',
    result: { appended: [[1, 1], [2, 2], [3, 3]], extended: [1, 1, 2, 2, 3, 3] },
  },
  {
    name: 'case sink: a command of the sink kind; its call.done does not re-trigger the rules',
    yaml: `
workflow:
  - step: fetch
    tool: {kind: http, method: GET, url: "http://api/rows"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - sink: {kind: postgres, auth: pg, command: "insert into t values ({{ response.id }})"}
          - set: {ctx: {seen: 1}}
`,
    worker: byStep({ fetch: () => ok({ id: 9 }) }, () => ({ response: { rows: 1 } })),
    status: 'completed',
    calls: ['fetch', 'fetch>pg'],
    check: (r) => {
      const sink = r.commands[1];
      expect(sink.tool).toEqual({ kind: 'postgres', auth: 'pg', command: 'insert into t values (9)' });
      expect(sink.sink).toBe(true);
      expect(r.commands[0].sink).toBeUndefined();
      expect(evs(r, 'action_completed').filter((e) => e.payload.entry !== undefined)).toHaveLength(1);
      expect(evs(r, 'action_completed').filter((e) => e.payload.kind === 'sink')).toHaveLength(1);
    },
  },
  {
    name: 'a failed sink fails the execution',
    yaml: `
workflow:
  - step: fetch
    tool: {kind: http, method: GET, url: "http://api/rows"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink: {kind: postgres, command: "insert"}
    next: [later]
  - step: later
    tool: {kind: python, code: "result = 1"}
`,
    worker: ({ cmd }) => (cmd.tool.kind === 'postgres' ? { error: { message: 'duplicate key' } } : ok({})),
    status: 'failed',
    check: (r) => expect(String((r.state.error as JsonObject).message)).toContain('Sink'),
  },
  {
    name: 'case next on call.done replaces the structural next and passes rendered args',
    yaml: `
workflow:
  - step: check
    tool: {kind: http, method: GET, url: "http://api/status"}
    case:
      - when: "{{ response.state == 'bad' }}"
        then:
          next:
            - step: alert
              args: {reason: "{{ response.reason }}"}
    next: [normal]
  - step: alert
    tool: {kind: python, code: "x"}
  - step: normal
    tool: {kind: python, code: "x"}
`,
    worker: byStep({ check: () => ok({ state: 'bad', reason: 'disk' }) }),
    status: 'completed',
    calls: ['check', 'alert'],
    check: (r) => {
      expect(cmds(r, 'alert')[0].args).toEqual({ reason: 'disk' });
      expect(r.state.steps.normal).toBeUndefined();
    },
  },
  {
    name: 'case next on step.exit with args from the step result',
    yaml: `
workflow:
  - step: count
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'step.exit' and result.n > 5 }}"
        then:
          next: [{step: big, args: {n: "{{ result.n }}"}}]
    next: [small]
  - step: big
  - step: small
`,
    worker: () => ({ response: { n: 9 } }),
    status: 'completed',
    steps: { count: 'completed', big: 'completed' },
    check: (r) => {
      expect(r.state.steps.small).toBeUndefined();
      const enter = evs(r, 'step.enter', 'big')[0];
      expect(enter.payload.args).toEqual({ n: 9 });
      expect(r.state.terminal_step).toBe('big');
    },
  },
  {
    name: 'a step.exit rule sees the vars its step sets and its result by name (step_completed, vars, then transitions)',
    yaml: `
workflow:
  - step: fetch
    tool: {kind: python, code: "x"}
    vars:
      total: "{{ result.count }}"
      doubled: "{{ fetch.count * 2 }}"
    case:
      - when: "{{ event.name == 'step.exit' and vars.total > 2 }}"
        then:
          next: [{step: report, args: {total: "{{ vars.total }}", bare: "{{ doubled }}", own: "{{ fetch.count }}", listed: "{{ results.fetch.count }}"}}]
    next: [small]
  - step: report
  - step: small
`,
    worker: () => ({ response: { count: 3 } }),
    status: 'completed',
    steps: { fetch: 'completed', report: 'completed' },
    check: (r) => {
      expect(r.state.steps.small).toBeUndefined();
      expect(evs(r, 'step.enter', 'report')[0].payload.args).toEqual({ total: 3, bare: 6, own: 3, listed: 3 });
      // the events keep their order: the rule is recorded at step.exit, the vars after step_completed
      expectSubsequence(r.events.map(evLabel), ['fetch:step.exit', 'fetch:case_applied', 'fetch:step_completed', 'fetch:vars_set', 'fetch:transition']);
      expect(evs(r, 'vars_set', 'fetch')[0].payload.variables).toEqual({ total: 3, doubled: 6 });
    },
  },
  {
    name: 'a next fired on call.done sees the vars its step sets and its result by name, as the step\'s transitions do',
    yaml: `
workflow:
  - step: fetch
    tool: {kind: http, method: GET, url: "http://api/token"}
    vars:
      token: "{{ result.token }}"
    case:
      - when: "{{ event.name == 'call.done' and response.ok }}"
        then:
          next: [{step: use, args: {token: "{{ vars.token }}", bare: "{{ token }}", own: "{{ fetch.token }}", call: "{{ response.token }}"}}]
    next: [other]
  - step: use
  - step: other
`,
    worker: byStep({ fetch: () => ok({ ok: true, token: 'abc' }) }),
    status: 'completed',
    steps: { fetch: 'completed', use: 'completed' },
    check: (r) => {
      expect(r.state.steps.other).toBeUndefined();
      expect(evs(r, 'step.enter', 'use')[0].payload.args).toEqual({ token: 'abc', bare: 'abc', own: 'abc', call: 'abc' });
      expect(evs(r, 'vars_set', 'fetch')[0].payload.variables).toEqual({ token: 'abc' });
      expectSubsequence(r.events.map(evLabel), ['fetch:call.done', 'fetch:action_completed', 'fetch:step.exit', 'fetch:step_completed', 'fetch:vars_set', 'fetch:transition']);
    },
  },
  {
    name: 'a loop broken on call.done: the next sees the vars of the items finished so far, the breaking one included, and not the iterator',
    yaml: `
workflow:
  - step: scan
    loop: {in: "{{ [10, 20, 30, 40] }}", iterator: i, mode: sequential}
    tool: {kind: http, method: GET, url: "http://api/{{ i }}"}
    vars: {seen: "{{ result | length }}", last: "{{ result[1].data.n }}"}
    case:
      - when: "{{ event.name == 'call.done' and response.n == 20 }}"
        then:
          next: [{step: found, args: {seen: "{{ vars.seen }}", last: "{{ last }}", it: "{{ i | default('hidden') }}"}}]
  - step: found
`,
    worker: byStep({ scan: ({ cmd }) => ok({ n: Number(String(cmd.tool.endpoint ?? cmd.tool.url).split('/').pop()) }) }),
    status: 'completed',
    steps: { scan: 'completed', found: 'completed' },
    check: (r) => {
      expect(evs(r, 'step.enter', 'found')[0].payload.args).toEqual({ seen: 2, last: 20, it: 'hidden' });
      expect(evs(r, 'vars_set', 'scan')[0].payload.variables).toEqual({ seen: 2, last: 20 });
    },
  },
  {
    name: 'a step.exit rule: variables set through the API still outrank the step\'s own vars',
    yaml: `
workflow:
  - step: fetch
    tool: {kind: python, code: "x"}
    vars: {total: "{{ result.count }}"}
    case:
      - when: "{{ event.name == 'step.exit' }}"
        then:
          next: [{step: report, args: {total: "{{ total }}", via: "{{ vars.total }}"}}]
  - step: report
`,
    opts: { externalVars: { total: 100 } },
    worker: () => ({ response: { count: 3 } }),
    status: 'completed',
    steps: { fetch: 'completed', report: 'completed' },
    check: (r) => expect(evs(r, 'step.enter', 'report')[0].payload.args).toEqual({ total: 100, via: 100 }),
  },
  {
    name: 'an entry without event.name and without call data applies to step.exit',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ ctx.flag is not defined }}"
        then:
          next: [exit_rule]
    next: [structural]
  - step: exit_rule
  - step: structural
`,
    status: 'completed',
    steps: { s: 'completed', exit_rule: 'completed' },
    check: (r) => {
      const applied = evs(r, 'case_applied', 's');
      expect(applied).toHaveLength(1);
      expect(applied[0].payload.on).toBe('step.exit');
    },
  },
  {
    name: 'entries are evaluated only for the event they name; first match per event wins',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'step.enter' }}"
        then: {set: {ctx: {entered: true}}}
      - when: "{{ event.name == 'step.enter' }}"
        then: {set: {ctx: {second: true}}}
      - when: "{{ event.name in ['call.done'] }}"
        then: {set: {ctx: {called: "{{ ctx.entered }}"}}}
      - when: "{{ event.name == 'step.exit' }}"
        then:
          result: {from: "{{ ctx }}"}
`,
    status: 'completed',
    result: { entered: true, called: true },
    check: (r) => expect(evs(r, 'case_applied').map((e) => e.payload.on)).toEqual(['step.enter', 'step.exit']),
  },
  {
    name: 'all actions of one then run (set, collect, result, next)',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - set: {ctx: {a: 1}}
          - collect: {from: "{{ response.v }}", into: vals, mode: append}
          - result: {from: {a: "{{ ctx.a }}", vals: "{{ vals }}"}}
          - next: [{step: t, args: {a: "{{ ctx.a }}"}}]
  - step: t
`,
    worker: () => ({ response: { v: 5 } }),
    status: 'completed',
    check: (r) => {
      expect(r.state.steps.s.result).toEqual({ a: 1, vals: [5] });
      expect(evs(r, 'step.enter', 't')[0].payload.args).toEqual({ a: 1 });
    },
  },
  {
    name: 'case fail fails the step and the execution',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ response.ok == false }}"
        then:
          fail: {message: "validation failed: {{ response.why }}"}
    next: [t]
  - step: t
`,
    worker: () => ({ response: { ok: false, why: 'empty' } }),
    status: 'failed',
    steps: { s: 'failed' },
    check: (r) => {
      expect((r.state.steps.s.error as JsonObject).message).toBe('validation failed: empty');
      expect(r.state.steps.t).toBeUndefined();
    },
  },
  {
    name: 'fail together with next: the step fails, the failure is handled, the execution goes on',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://x"}
    case:
      - when: "{{ error }}"
        then:
          - fail: {message: "upstream down"}
          - next: [{step: cleanup, args: {code: "{{ error.status }}"}}]
  - step: cleanup
    tool: {kind: python, code: "x"}
`,
    worker: byStep({ s: () => httpError(503) }),
    status: 'completed',
    steps: { s: 'failed', cleanup: 'completed' },
    check: (r) => expect(cmds(r, 'cleanup')[0].args).toEqual({ code: 503 }),
  },
  {
    name: 'skip on step.enter: step skipped without commands, structural next continues',
    yaml: `
workload: {enabled: false}
workflow:
  - step: start
    next: [optional]
  - step: optional
    tool: {kind: http, method: GET, url: "http://x"}
    case:
      - when: "{{ event.name == 'step.enter' and not workload.enabled }}"
        then: {skip: true}
    next: [end]
  - step: end
    tool: {kind: python, code: "x"}
`,
    status: 'completed',
    calls: ['end'],
    steps: { optional: 'skipped', end: 'completed' },
    events: ['optional:step.enter', 'optional:case_applied', 'optional:step_skipped', 'optional:transition', 'end:step.enter'],
  },
  {
    name: 'skip on call.done marks the step skipped',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ response.empty }}"
        then: {skip: true}
`,
    worker: () => ({ response: { empty: true } }),
    status: 'completed',
    steps: { s: 'skipped' },
  },
  {
    name: 'a call error matched by a case entry is handled: the step completes with {error}',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://x"}
    case:
      - when: "{{ error.status == 404 }}"
        then: {set: {ctx: {missing: true}}}
    next: [t]
  - step: t
    tool: {kind: python, code: "x"}
`,
    worker: byStep({ s: () => httpError(404, 'nope') }),
    status: 'completed',
    steps: { s: 'completed', t: 'completed' },
    check: (r) => expect(r.state.steps.s.result).toEqual({ error: { status: 404, message: 'nope' } }),
  },
  {
    name: 'step.enter set is visible in the tool config through ctx',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://x/{{ ctx.path }}"}
    case:
      - when: "{{ event.name == 'step.enter' }}"
        then: {set: {ctx: {path: "v2/items"}}}
`,
    status: 'completed',
    check: (r) => expect(r.commands[0].tool.endpoint).toBe('http://x/v2/items'),
  },

  // ------------------------------------------------------------------ loops
  {
    name: 'sequential loop: one item at a time, iterator in tool config, results in item order',
    yaml: `
workflow:
  - step: each
    loop: {in: [a, b, c], iterator: city, mode: sequential}
    tool: {kind: http, method: GET, url: "http://api/weather/{{ city }}"}
`,
    worker: ({ cmd }) => ok({ url: cmd.tool.endpoint as string }),
    status: 'completed',
    calls: ['each#0', 'each#1', 'each#2'],
    result: [env({ url: 'http://api/weather/a' }), env({ url: 'http://api/weather/b' }), env({ url: 'http://api/weather/c' })],
    check: (r) => {
      expect(r.maxOpen.each).toBe(1);
      expect(evs(r, 'step.enter', 'each')).toHaveLength(1);
      expect(evs(r, 'step.exit', 'each')).toHaveLength(1);
      expect(evs(r, 'call.done', 'each')).toHaveLength(3);
    },
  },
  {
    name: 'async loop bounded by input.maxInFlight, answered newest first: results still in item order',
    yaml: `
workflow:
  - step: each
    loop: {in: "{{ workload.ids }}", iterator: id, mode: async}
    tool: {kind: python, code: "x", args: {id: "{{ id }}"}}
workload: {ids: [1, 2, 3, 4, 5]}
`,
    opts: { maxInFlight: 2, order: 'lifo' },
    worker: ({ cmd }) => ({ response: (cmd.tool.args as JsonObject).id as number }),
    status: 'completed',
    result: [1, 2, 3, 4, 5],
    check: (r) => {
      expect(r.maxOpen.each).toBe(2);
      expect(r.decisions[0].commands.map(label)).toEqual(['each#0', 'each#1']);
      expect(r.answered.map(label)).not.toEqual(['each#0', 'each#1', 'each#2', 'each#3', 'each#4']);
    },
  },
  {
    name: 'async loop default bound is 16',
    yaml: `
workflow:
  - step: each
    loop: {in: "{{ range(20) | list }}", iterator: i, mode: async}
    tool: {kind: python, code: "x", args: {i: "{{ i }}"}}
`,
    status: 'completed',
    check: (r) => {
      expect(r.decisions[0].commands).toHaveLength(16);
      expect(r.maxOpen.each).toBe(16);
      expect((r.state.steps.each.result as Json[]).length).toBe(20);
    },
  },
  {
    name: 'loop.max_in_flight overrides the engine default',
    yaml: `
workflow:
  - step: each
    loop: {in: [1, 2, 3, 4], iterator: i, mode: async, max_in_flight: 3}
    tool: {kind: python, code: "x"}
`,
    opts: { order: 'shuffle' },
    status: 'completed',
    check: (r) => expect(r.maxOpen.each).toBe(3),
  },
  {
    name: 'an empty loop completes with [] and no commands',
    yaml: `
workflow:
  - step: each
    loop: {in: "{{ payload.items }}", iterator: it, mode: async}
    tool: {kind: python, code: "x"}
    next: [after]
  - step: after
    tool: {kind: python, code: "x", args: {n: "{{ each | length }}"}}
`,
    opts: { payload: { items: [] } },
    status: 'completed',
    calls: ['after'],
    check: (r) => {
      expect(r.state.steps.each.result).toEqual([]);
      expect(cmds(r, 'after')[0].tool.args).toEqual({ n: 0 });
    },
  },
  {
    name: 'early loop break: case next stops the loop, in-flight items are superseded, step.exit once',
    yaml: `
workflow:
  - step: search
    loop: {in: [a, b, c, d, e, f], iterator: host, mode: async, max_in_flight: 3}
    tool: {kind: http, method: GET, url: "http://{{ host }}/ping"}
    case:
      - when: "{{ event.name == 'call.done' and response.found }}"
        then:
          - set: {ctx: {winner: "{{ host }}"}}
          - next: [{step: found, args: {host: "{{ ctx.winner }}", leaked: "{{ host | default('hidden') }}"}}]
    next: [not_found]
  - step: found
    tool: {kind: python, code: "x"}
  - step: not_found
`,
    worker: ({ cmd }) => ok({ found: String(cmd.tool.endpoint).includes('//b/') }),
    status: 'completed',
    calls: ['search#0', 'search#1', 'found'],
    steps: { search: 'completed', found: 'completed' },
    check: (r) => {
      expect(evs(r, 'step.exit', 'search')).toHaveLength(1);
      expect(evs(r, 'step.exit', 'search')[0].payload.broken).toBe(true);
      // items 0..2 were issued; item 2 was in flight and is cancelled; d, e, f never issued
      expect(cmds(r, 'search').map(label)).toEqual(['search#0', 'search#1', 'search#2', 'search#3']);
      expect(r.cancelled).toEqual([cmds(r, 'search')[2].command_id, cmds(r, 'search')[3].command_id]);
      expect(cmds(r, 'found')[0].args).toEqual({ host: 'b', leaked: 'hidden' });
      expect(r.state.steps.search.result).toEqual([env({ found: false }), env({ found: true })]);
      expect(r.state.steps.not_found).toBeUndefined();
    },
  },
  {
    name: 'a late call.done for a command superseded by an early break is ignored',
    yaml: `
workflow:
  - step: search
    loop: {in: [1, 2], iterator: n, mode: async}
    tool: {kind: python, code: "x", args: {n: "{{ n }}"}}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {next: [done]}
  - step: done
`,
    opts: { inject: [[1, { name: 'call.done', step: 'search', command_id: 2, payload: { response: 'late' } }]] },
    status: 'completed',
    calls: ['search#0'],
    check: (r) => {
      expect(r.decisions.at(-1)!.events).toEqual([]);
      expect(evs(r, 'call.done')).toHaveLength(1);
    },
  },
  {
    name: 'the iterator is visible in case when, collect, set and sink during the loop',
    yaml: `
workflow:
  - step: each
    loop: {in: [{id: 1, keep: true}, {id: 2, keep: false}, {id: 3, keep: true}], iterator: row, mode: sequential}
    tool: {kind: python, code: "x", args: {id: "{{ row.id }}"}}
    case:
      - when: "{{ event.name == 'call.done' and row.keep }}"
        then:
          - collect: {from: "{{ row.id }}", into: kept, mode: append}
          - set: {ctx: {last: "{{ row.id }}"}}
          - sink: {kind: postgres, command: "insert {{ row.id }}"}
      - when: "{{ event.name == 'step.exit' }}"
        then: {result: {from: {kept: "{{ kept }}", last: "{{ ctx.last }}"}}}
`,
    worker: ({ cmd }) => ({ response: cmd.tool.kind === 'postgres' ? 'ok' : 'fine' }),
    status: 'completed',
    result: { kept: [1, 3], last: 3 },
    check: (r) =>
      expect(r.commands.filter((c) => c.tool.kind === 'postgres').map((c) => [c.tool.command, c.iteration])).toEqual([
        ['insert 1', 0],
        ['insert 3', 2],
      ]),
  },
  {
    name: 'loop item retried by a case rule, other items unaffected',
    yaml: `
workflow:
  - step: each
    loop: {in: [x, y, z], iterator: k, mode: async}
    tool: {kind: http, method: GET, url: "http://api/{{ k }}"}
    case:
      - when: "{{ error.status == 503 }}"
        then: {retry: {max_attempts: 3, initial_delay: 1}}
`,
    worker: ({ cmd }) => (cmd.iteration === 1 && cmd.attempt === 1 ? httpError(503) : ok(cmd.tool.endpoint as string)),
    status: 'completed',
    calls: ['each#0', 'each#1', 'each#2', 'each#1@2'],
    result: [env('http://api/x'), env('http://api/y'), env('http://api/z')],
  },
  {
    name: 'an unhandled loop item failure fails the step and cancels the other items',
    yaml: `
workflow:
  - step: each
    loop: {in: [1, 2, 3], iterator: n, mode: async}
    tool: {kind: python, code: "x", args: {n: "{{ n }}"}}
`,
    worker: ({ cmd }) => (cmd.iteration === 0 ? { error: { message: 'boom' } } : { response: 1 }),
    status: 'failed',
    calls: ['each#0'],
    check: (r) => {
      expect(r.cancelled.sort()).toEqual([2, 3]);
      expect(r.state.open_commands).toEqual([]);
      expect(evs(r, 'execution_failed')[0].payload.cancelled_commands).toEqual([]);
      expect(evs(r, 'step_failed')[0].payload.superseded).toEqual([2, 3]);
    },
  },
  {
    name: 'loop.in that is not a list fails the step naming loop.in',
    yaml: `
workflow:
  - step: each
    loop: {in: "{{ workload.n }}", iterator: i, mode: async}
    tool: {kind: python, code: "x"}
workload: {n: 5}
`,
    status: 'failed',
    calls: [],
    check: (r) => expect((r.state.steps.each.error as JsonObject).field).toBe('loop.in'),
  },

  // ------------------------------------------------------------------ unified retry: pagination and polling
  {
    name: 'pagination by page number: next_call params, collect append at data.items into pages',
    yaml: `
workflow:
  - step: users
    tool: {kind: http, method: GET, url: "http://api/users", params: {page: 1, pageSize: 2}}
    retry:
      - when: "{{ response.data.has_more }}"
        then:
          max_attempts: 10
          next_call:
            params: {page: "{{ response.data.page + 1 }}"}
          collect: {strategy: append, path: data.items, into: all_users}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {set: {ctx: {total: "{{ all_users | length }}", pages_seen: "{{ pages | length }}", count: "{{ _retry.count }}"}}}
      - when: "{{ event.name == 'step.exit' }}"
        then: {result: {from: {items: "{{ result }}", ctx: "{{ ctx }}"}}}
`,
    worker: ({ cmd }) => {
      const page = (cmd.tool.params as JsonObject).page as number;
      return ok({ page, has_more: page < 3, items: [`u${page}a`, `u${page}b`] });
    },
    status: 'completed',
    calls: ['users#1', 'users#2', 'users#3'],
    result: { items: ['u1a', 'u1b', 'u2a', 'u2b', 'u3a', 'u3b'], ctx: { total: 6, pages_seen: 6, count: 3 } },
    check: (r) => expect(r.commands.map((c) => c.tool.params)).toEqual([1, 2, 3].map((page) => ({ page, pageSize: 2 }))),
  },
  {
    name: 'pagination by offset: offset from _retry.index, continue while a page is full',
    yaml: `
workflow:
  - step: rows
    tool: {kind: http, method: GET, url: "http://api/rows", params: {offset: 0, limit: 3}}
    retry:
      - when: "{{ response.data.rows | length == 3 }}"
        then:
          next_call: {params: {offset: "{{ _retry.index * 3 }}"}}
          collect: {strategy: append, path: rows}
`,
    worker: ({ cmd }) => {
      const off = (cmd.tool.params as JsonObject).offset as number;
      const all = [1, 2, 3, 4, 5, 6, 7, 8];
      return ok({ rows: all.slice(off, off + 3) });
    },
    status: 'completed',
    result: [1, 2, 3, 4, 5, 6, 7, 8],
    check: (r) => expect(r.commands.map((c) => (c.tool.params as JsonObject).offset)).toEqual([0, 3, 6]),
  },
  {
    name: 'pagination by cursor: continue while the next cursor is non-null and non-empty',
    yaml: `
workflow:
  - step: events
    tool: {kind: http, method: GET, url: "http://api/events"}
    retry:
      - when: "{{ response.data.next_cursor }}"
        then:
          next_call: {params: {cursor: "{{ response.data.next_cursor }}"}}
          collect: {strategy: append, path: data.events, into: all_events}
`,
    worker: ({ cmd }) => {
      const cursor = ((cmd.tool.params as JsonObject | undefined)?.cursor as string) ?? 'start';
      const next: Record<string, Json> = { start: 'c1', c1: 'c2', c2: '' };
      return ok({ events: [cursor], next_cursor: next[cursor] });
    },
    status: 'completed',
    result: ['start', 'c1', 'c2'],
    check: (r) => expect(r.commands.map((c) => c.tool.params ?? null)).toEqual([null, { cursor: 'c1' }, { cursor: 'c2' }]),
  },
  {
    name: 'cursor pagination stops on a null cursor',
    yaml: `
workflow:
  - step: events
    tool: {kind: http, method: GET, url: "http://api/events"}
    retry:
      - when: "{{ response.data.next_cursor is not none and response.data.next_cursor != '' }}"
        then:
          next_call: {params: {cursor: "{{ response.data.next_cursor }}"}}
          collect: {strategy: append, path: data.events}
`,
    worker: ({ n }) => ok({ events: [n], next_cursor: n === 0 ? 'x' : null }),
    status: 'completed',
    result: [0, 1],
  },
  {
    name: 'URL-based pagination: next_call.url from a links field',
    yaml: `
workflow:
  - step: repos
    tool: {kind: http, method: GET, url: "http://api/repos?page=1"}
    retry:
      - when: "{{ response.data.links.next }}"
        then:
          next_call: {url: "{{ response.data.links.next }}"}
          collect: {strategy: append, path: data.items}
`,
    worker: ({ cmd }) => {
      const p = Number(String(cmd.tool.endpoint).split('page=')[1]);
      return ok({ items: [p], links: { next: p < 3 ? `http://api/repos?page=${p + 1}` : null } });
    },
    status: 'completed',
    result: [1, 2, 3],
    check: (r) => expect(r.commands.map((c) => c.tool.endpoint)).toEqual(['http://api/repos?page=1', 'http://api/repos?page=2', 'http://api/repos?page=3']),
  },
  {
    name: 'collect strategy replace keeps the last page; merge merges objects',
    yaml: `
workflow:
  - step: replace
    tool: {kind: http, method: GET, url: "http://api/a"}
    retry:
      - when: "{{ response.data.more }}"
        then: {collect: {strategy: replace, path: data.value}}
    next: [merge]
  - step: merge
    tool: {kind: http, method: GET, url: "http://api/b"}
    retry:
      - when: "{{ response.data.more }}"
        then: {collect: {strategy: merge, path: data.value}}
`,
    worker: ({ n }) => ok({ more: n < 2, value: { [`k${n}`]: n } }),
    status: 'completed',
    check: (r) => {
      expect(r.state.steps.replace.result).toEqual({ k2: 2 });
      expect(r.state.steps.merge.result).toEqual({ k0: 0, k1: 1, k2: 2 });
    },
  },
  {
    name: 'max_attempts bounds the number of pages',
    yaml: `
workflow:
  - step: endless
    tool: {kind: http, method: GET, url: "http://api/x"}
    retry:
      - when: "{{ response.data.more }}"
        then:
          max_attempts: 3
          next_call: {params: {page: "{{ iteration + 1 }}"}}
          collect: {strategy: append, path: data.items}
`,
    worker: ({ n }) => ok({ more: true, items: [n] }),
    status: 'completed',
    calls: ['endless#1', 'endless#2', 'endless#3'],
    result: [0, 1, 2],
  },
  {
    name: 'per-iteration sink (sink and per_iteration.sink forms) runs for every page',
    yaml: `
workflow:
  - step: a
    tool: {kind: http, method: GET, url: "http://api/a"}
    retry:
      - when: "{{ response.data.more }}"
        then:
          collect: {strategy: append, path: data.items, into: got}
          sink: {kind: postgres, command: "insert {{ page.items | join(',') }} #{{ _retry.index }}"}
    next: [b]
  - step: b
    tool: {kind: http, method: GET, url: "http://api/b"}
    retry:
      - when: "{{ response.data.more }}"
        then:
          collect: {strategy: append, path: data.items}
          per_iteration:
            sink: {kind: postgres, command: "insert b {{ iteration }}"}
`,
    worker: ({ cmd }) => (cmd.tool.kind === 'postgres' ? { response: 'ok' } : ok({ more: cmd.iteration === 1, items: [`${cmd.step}${cmd.iteration}`] })),
    status: 'completed',
    check: (r) => {
      const sinks = r.commands.filter((c) => c.tool.kind === 'postgres').map((c) => c.tool.command);
      expect(sinks).toEqual(['insert a1 #1', 'insert a2 #2', 'insert b 1', 'insert b 2']);
      expect(r.state.steps.a.result).toEqual(['a1', 'a2']);
    },
  },
  {
    name: 'error-side retry policy: backoff from initial_delay and backoff_multiplier',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/x"}
    retry:
      - when: "{{ error.status == 503 }}"
        then: {max_attempts: 3, initial_delay: 1, backoff_multiplier: 4}
`,
    worker: ({ n }) => (n < 2 ? httpError(503) : ok('fine')),
    status: 'completed',
    calls: ['s#1', 's#1@2', 's#1@3'],
    result: env('fine'),
    check: (r) => {
      expect(r.commands[1].available_at - (T0 + 10)).toBe(1000);
      expect(r.commands[2].available_at - (r.commands[1].available_at + 10)).toBe(4000);
    },
  },
  {
    name: 'error-side retry policy exhausted: the step fails when no case handles it',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/x"}
    retry:
      - when: "{{ error }}"
        then: {max_attempts: 2, initial_delay: 0}
`,
    worker: () => httpError(500),
    status: 'failed',
    calls: ['s#1', 's#1@2'],
    check: (r) => expect(String((r.state.steps.s.error as JsonObject).message)).toContain('Retry attempts exhausted (2)'),
  },
  {
    name: 'an error-side policy whose condition holds without an error never re-sends a successful call',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: POST, url: "http://api/orders", json: {item: 1}}
    retry:
      - when: "{{ error.status != 404 }}"
        then: {max_attempts: 3, initial_delay: 0}
      - when: "{{ not event.payload.error }}"
        then: {max_attempts: 3, initial_delay: 0}
`,
    worker: () => ok({ id: 7 }),
    status: 'completed',
    calls: ['s#1'],
    result: env({ id: 7 }),
  },
  {
    name: 'a response-side policy never retries a failure: the step fails with the call error',
    yaml: `
workflow:
  - step: job
    tool: {kind: http, method: GET, url: "http://api/job"}
    retry:
      - when: "{{ response.data.state != 'done' }}"
        then: {max_attempts: 4, initial_delay: 1}
`,
    worker: () => httpError(500),
    status: 'failed',
    calls: ['job#1'],
    check: (r) => expect(String((r.state.steps.job.error as JsonObject).message)).not.toContain('Retry attempts exhausted'),
  },
  {
    name: 'a policy reading both error and response, or neither, is tried on either outcome',
    yaml: `
workflow:
  - step: both
    tool: {kind: http, method: GET, url: "http://api/both"}
    retry:
      - when: "{{ error is defined or response.data.state != 'done' }}"
        then: {max_attempts: 5, initial_delay: 0}
    next: [neither]
  - step: neither
    tool: {kind: http, method: GET, url: "http://api/neither"}
    retry:
      - when: "{{ _retry.index < 3 }}"
        then: {max_attempts: 5, initial_delay: 0}
`,
    worker: ({ cmd, n }) => (cmd.step === 'both' ? (n === 0 ? httpError(500) : n === 1 ? ok({ state: 'running' }) : ok({ state: 'done' })) : n === 0 ? httpError(500) : ok({ n })),
    status: 'completed',
    // both: the error is retried, `running` polled again, `done` ends it; neither: the same by _retry.index
    calls: ['both#1', 'both#1@2', 'both#2', 'neither#1', 'neither#1@2', 'neither#2', 'neither#3'],
  },
  {
    name: 'a case entry on event.payload.error applies to call.done: its retry runs',
    yaml: `
workflow:
  - step: start
    tool: {kind: http, method: GET, url: "http://api/flaky"}
    case:
      - when: "{{ event.payload.error.status == 503 }}"
        then:
          retry: {max_attempts: 5, initial_delay: 0}
`,
    worker: ({ n }) => (n < 2 ? httpError(503) : ok('fine')),
    status: 'completed',
    calls: ['start', 'start@2', 'start@3'],
  },
  {
    name: "a case entry on the loop iterator applies to each item's call.done: its next breaks the loop",
    yaml: `
workflow:
  - step: start
    tool: {kind: http, method: GET, url: "http://api/item/{{ it }}"}
    loop: {in: [1, 2, 3], iterator: it}
    case:
      - when: "{{ it == 2 }}"
        then: {next: [{step: found}]}
    next: [not_found]
  - step: found
  - step: not_found
`,
    status: 'completed',
    steps: { found: 'completed' },
    check: (r) => expect(r.state.steps.not_found).toBeUndefined(),
  },
  {
    name: "a case entry excluding an event by name (event.name != 'step.enter') is evaluated on the others",
    yaml: `
workflow:
  - step: start
    tool: {kind: http, method: GET, url: "http://api/down"}
    case:
      - when: "{{ event.name != 'step.enter' and error is defined }}"
        then: {next: [fallback]}
  - step: fallback
`,
    worker: () => httpError(500),
    status: 'completed',
    steps: { fallback: 'completed' },
  },
  {
    name: 'retry settings written as templates are rendered when they apply, as text they are numbers',
    yaml: `
workload: {attempts: 4, delay: 2}
workflow:
  - step: policy
    tool: {kind: http, method: GET, url: "http://api/down"}
    retry:
      - when: "{{ error.status == 503 }}"
        then: {max_attempts: "{{ workload.attempts }}", initial_delay: "{{ workload.delay }}", backoff_multiplier: "1"}
    next: [action]
  - step: action
    tool: {kind: http, method: GET, url: "http://api/down"}
    case:
      - when: "{{ error }}"
        then:
          retry: {max_attempts: "3", initial_delay: 0}
`,
    opts: { random: () => 0.5 },
    worker: ({ cmd, n }) => (cmd.step === 'policy' && n === 3 ? ok('up') : httpError(503)),
    status: 'failed',
    calls: ['policy#1', 'policy#1@2', 'policy#1@3', 'policy#1@4', 'action', 'action@2', 'action@3'],
    check: (r) => {
      expect(r.commands[1].available_at - (T0 + 10)).toBe(2000);
      expect(r.commands[2].available_at - (r.commands[1].available_at + 10)).toBe(2000);
      expect(String((r.state.steps.action.error as JsonObject).message)).toContain('Retry attempts exhausted (3)');
    },
  },
  {
    name: 'a retry setting whose template renders no number fails the step, naming the field',
    yaml: `
workload: {attempts: many}
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/down"}
    retry:
      - when: "{{ error }}"
        then: {max_attempts: "{{ workload.attempts }}"}
`,
    worker: () => httpError(500),
    status: 'failed',
    calls: ['s#1'],
    check: (r) => expect(r.state.steps.s.error).toMatchObject({ field: 'retry[0].then.max_attempts', message: expect.stringContaining('must be a number') }),
  },
  {
    name: 'a retry setting whose template renders a negative number fails the step, naming the field',
    yaml: `
workload: {delay: -5}
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/down"}
    retry:
      - when: "{{ error }}"
        then: {max_attempts: 3, initial_delay: "{{ workload.delay }}"}
`,
    worker: () => httpError(500),
    status: 'failed',
    calls: ['s#1'],
    check: (r) => expect(r.state.steps.s.error).toMatchObject({ field: 'retry[0].then.initial_delay', message: "retry[0].then.initial_delay must not be negative, but '{{ workload.delay }}' rendered to -5" }),
  },
  {
    name: 'policies top to bottom, first truthy when wins (error side before success side)',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/x"}
    retry:
      - when: "{{ error.status == 429 }}"
        then: {max_attempts: 5, initial_delay: 30}
      - when: "{{ error }}"
        then: {max_attempts: 5, initial_delay: 1}
`,
    worker: ({ n }) => (n === 0 ? httpError(429) : n === 1 ? httpError(500) : ok(1)),
    status: 'completed',
    check: (r) => {
      expect(r.commands[1].available_at - (T0 + 10)).toBe(30000);
      expect(r.commands[2].available_at - (r.commands[1].available_at + 10)).toBe(2000);
    },
  },
  {
    name: 'polling: a success-side policy without collect repeats the call until done',
    yaml: `
workflow:
  - step: job
    tool: {kind: http, method: GET, url: "http://api/job/1"}
    retry:
      - when: "{{ response.data.state == 'running' }}"
        then: {max_attempts: 10, initial_delay: 5}
`,
    worker: ({ n }) => ok({ state: n < 2 ? 'running' : 'done' }),
    status: 'completed',
    calls: ['job#1', 'job#2', 'job#3'],
    result: env({ state: 'done' }),
    check: (r) => expect(r.commands[1].available_at - (T0 + 10)).toBe(5000),
  },
  {
    name: 'pagination inside an async loop: each item paginates on its own',
    yaml: `
workflow:
  - step: each
    loop: {in: [a, b], iterator: org, mode: async}
    tool: {kind: http, method: GET, url: "http://api/{{ org }}/repos", params: {page: 1}}
    retry:
      - when: "{{ response.data.page < 2 }}"
        then:
          next_call: {params: {page: "{{ response.data.page + 1 }}"}}
          collect: {strategy: append, path: data.items}
`,
    worker: ({ cmd }) => {
      const page = (cmd.tool.params as JsonObject).page as number;
      return ok({ page, items: [`${String(cmd.tool.endpoint).split('/')[3]}${page}`] });
    },
    opts: { order: 'lifo' },
    status: 'completed',
    result: [['a1', 'a2'], ['b1', 'b2']],
  },

  // ------------------------------------------------------------------ legacy loop.pagination
  {
    name: 'legacy pagination: continue_while on the envelope, next_page params, merge append at merge_path',
    yaml: `
workflow:
  - step: users
    tool: {kind: http, method: GET, url: "http://api/users", params: {page: 1}}
    loop:
      pagination:
        type: response_based
        continue_while: "{{ response.data.paging.hasMore and accumulated | length < 100 }}"
        next_page:
          params: {page: "{{ response.data.paging.page + 1 }}"}
          headers: {X-Iteration: "{{ iteration }}"}
        merge_strategy: append
        merge_path: data.data
`,
    worker: ({ cmd }) => {
      const page = (cmd.tool.params as JsonObject).page as number;
      return ok({ data: [page * 10, page * 10 + 1], paging: { page, hasMore: page < 3 } });
    },
    status: 'completed',
    calls: ['users#1', 'users#2', 'users#3'],
    result: [10, 11, 20, 21, 30, 31],
    check: (r) => {
      expect(r.commands.map((c) => (c.tool.params as JsonObject).page)).toEqual([1, 2, 3]);
      expect(r.commands.map((c) => (c.tool.headers as JsonObject | undefined)?.['X-Iteration'] ?? null)).toEqual([null, 0, 1]);
    },
  },
  {
    name: 'legacy pagination: max_iterations is a safety limit',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/x"}
    loop:
      pagination:
        type: response_based
        continue_while: "{{ true }}"
        next_page: {params: {p: "{{ iteration + 1 }}"}}
        merge_strategy: collect
        max_iterations: 2
`,
    worker: ({ n }) => ok({ n }),
    status: 'completed',
    result: [env({ n: 0 }), env({ n: 1 })],
  },
  {
    name: 'legacy pagination: max_iterations written as text or as a template counts the same',
    yaml: `
workload: {pages: 3}
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/x"}
    loop:
      pagination:
        type: response_based
        continue_while: "{{ true }}"
        merge_strategy: collect
        max_iterations: "2"
    next: [t]
  - step: t
    tool: {kind: http, method: GET, url: "http://api/y"}
    loop:
      pagination:
        type: response_based
        continue_while: "{{ true }}"
        merge_strategy: collect
        max_iterations: "{{ workload.pages }}"
`,
    worker: ({ n }) => ok({ n }),
    status: 'completed',
    calls: ['s#1', 's#2', 't#1', 't#2', 't#3'],
  },
  {
    name: 'legacy pagination: extend flattens nested arrays, replace keeps the last response',
    yaml: `
workflow:
  - step: ext
    tool: {kind: http, method: GET, url: "http://api/x"}
    loop:
      pagination:
        type: response_based
        continue_while: "{{ iteration < 1 }}"
        merge_strategy: extend
        merge_path: data.groups
    next: [rep]
  - step: rep
    tool: {kind: http, method: GET, url: "http://api/y"}
    loop:
      pagination:
        type: response_based
        continue_while: "{{ iteration < 1 }}"
        merge_strategy: replace
`,
    worker: ({ cmd, n }) => ok(cmd.step === 'ext' ? { groups: [[n, n], [n + 10]] } : { last: n }),
    status: 'completed',
    check: (r) => {
      expect(r.state.steps.ext.result).toEqual([0, 0, 10, 1, 1, 11]);
      expect(r.state.steps.rep.result).toEqual(env({ last: 1 }));
    },
  },
  {
    name: 'legacy pagination: per-request retry with exponential backoff capped at max_delay',
    yaml: `
workflow:
  - step: s
    tool: {kind: http, method: GET, url: "http://api/x"}
    loop:
      pagination:
        type: response_based
        continue_while: "{{ false }}"
        merge_strategy: append
        merge_path: data.items
        retry: {max_attempts: 4, backoff: exponential, initial_delay: 2, max_delay: 5}
`,
    worker: ({ n }) => (n < 3 ? httpError(500) : ok({ items: [1] })),
    status: 'completed',
    calls: ['s#1', 's#1@2', 's#1@3', 's#1@4'],
    result: [1],
    check: (r) => {
      const gaps = r.commands.slice(1).map((c, i) => c.available_at - (i === 0 ? T0 + 10 : r.commands[i].available_at + 10));
      expect(gaps).toEqual([2000, 4000, 5000]);
    },
  },

  // ------------------------------------------------------------------ vars block
  {
    name: 'vars block: result bound with data extracted, failing template recorded and skipped, later steps see vars',
    yaml: `
workflow:
  - step: login
    tool: {kind: http, method: POST, url: "http://api/login"}
    vars:
      token_id: "{{ result.token_id }}"
      same: "{{ result.data.token_id }}"
      user: "{{ login.user }}"
      broken: "{{ result.nope.deeper }}"
    next: [use]
  - step: use
    tool: {kind: http, method: GET, url: "http://api/{{ vars.token_id }}/{{ vars.user }}"}
`,
    worker: byStep({ login: () => ok({ token_id: 't-1', user: 'ann' }) }),
    status: 'completed',
    steps: { login: 'completed', use: 'completed' },
    events: ['login:step_completed', 'login:vars_set', 'login:transition', 'use:step.enter'],
    check: (r) => {
      const vs = evs(r, 'vars_set')[0].payload;
      expect(vs.variables).toEqual({ token_id: 't-1', same: 't-1', user: 'ann' });
      expect(vs.source_step).toBe('login');
      expect((vs.errors as JsonObject[])[0].message).toMatch(/^Failed to render var 'broken'/);
      expect(r.state.vars).toEqual({ token_id: 't-1', same: 't-1', user: 'ann' });
      expect(cmds(r, 'use')[0].tool.endpoint).toBe('http://api/t-1/ann');
    },
  },
  {
    name: 'input.externalVars overlays the engine vars',
    yaml: `
workflow:
  - step: s
    vars: {mine: "from-step"}
    next: [t]
  - step: t
    tool: {kind: python, code: "x", args: {a: "{{ vars.mine }}", b: "{{ vars.api_set }}", c: "{{ api_set }}"}}
`,
    opts: { externalVars: { api_set: 42, mine: 'overlaid' } },
    status: 'completed',
    check: (r) => expect(cmds(r, 't')[0].tool.args).toEqual({ a: 'overlaid', b: 42, c: 42 }),
  },
  {
    name: 'name resolution: iterator > vars > step results > workload > built-ins',
    yaml: `
workload: {shared: from-workload, only_workload: w, args: shadowed-builtin}
workflow:
  - step: shared
    tool: {kind: python, code: "x"}
    vars: {shared: from-var}
    next: [use]
  - step: only_step
    tool: {kind: python, code: "x"}
  - step: use
    loop: {in: [it], iterator: shared, mode: sequential}
    tool:
      kind: python
      code: "x"
      args: {a: "{{ shared }}", b: "{{ vars.shared }}", c: "{{ results.shared }}", d: "{{ only_workload }}", e: "{{ args }}", f: "{{ job.step }}"}
  - step: after
    tool: {kind: python, code: "x", args: {a: "{{ shared }}", b: "{{ workload.shared }}"}}
`,
    edit: (p) => {
      p.workflow[2].next = [{ step: 'after' }];
    },
    worker: () => ({ response: 'from-step' }),
    status: 'completed',
    check: (r) => {
      expect(cmds(r, 'use')[0].tool.args).toEqual({ a: 'it', b: 'from-var', c: 'from-step', d: 'w', e: 'shadowed-builtin', f: 'use' });
      expect(cmds(r, 'after')[0].tool.args).toEqual({ a: 'from-var', b: 'from-workload' });
    },
  },
  {
    name: 'vars see the pages of a paginated step as its result',
    yaml: `
workflow:
  - step: p
    tool: {kind: http, method: GET, url: "http://api/x"}
    retry:
      - when: "{{ response.data.more }}"
        then: {collect: {strategy: append, path: data.items, into: all}}
    vars: {count: "{{ result | length }}"}
`,
    worker: ({ n }) => ok({ more: n < 2, items: [n] }),
    status: 'completed',
    check: (r) => expect(r.state.vars).toEqual({ count: 3 }),
  },

  // ------------------------------------------------------------------ playbook tool (nested executions)
  {
    name: 'nested playbook success: child path and rendered payload; child result is the step result',
    yaml: `
workload: {region: eu}
workflow:
  - step: child
    tool:
      kind: playbook
      path: tests/child
      args: {region: "{{ workload.region }}", n: 3}
    next: [after]
  - step: after
    tool: {kind: python, code: "x", args: {total: "{{ child.total }}"}}
`,
    worker: byStep({ child: () => ({ response: { total: 12 } }) }),
    status: 'completed',
    check: (r) => {
      expect(r.commands[0].child).toEqual({ path: 'tests/child', payload: { region: 'eu', n: 3 } });
      expect(r.state.steps.child.result).toEqual({ total: 12 });
      expect(cmds(r, 'after')[0].tool.args).toEqual({ total: 12 });
    },
  },
  {
    name: 'nested playbook failure fails the parent step and execution',
    yaml: `
workflow:
  - step: child
    tool: {kind: playbook, path: tests/child}
`,
    worker: () => ({ error: { message: 'child execution 55 failed', execution_id: '55' } }),
    status: 'failed',
    check: (r) => {
      expect(r.commands[0].child).toEqual({ path: 'tests/child', payload: {} });
      expect((r.state.error as JsonObject).error).toEqual({ message: 'child execution 55 failed', execution_id: '55' });
    },
  },

  // ------------------------------------------------------------------ fan-out / fan-in, status
  {
    name: 'fan-out then fan-in: the join runs once per arriving transition; completes at quiescence',
    yaml: `
workflow:
  - step: start
    next: [a, b]
  - step: a
    tool: {kind: python, code: "x"}
    next: [join]
  - step: b
    tool: {kind: python, code: "x"}
    next: [join]
  - step: join
    tool: {kind: python, code: "x"}
`,
    worker: ({ cmd, n }) => ({ response: `${cmd.step}${n}` }),
    status: 'completed',
    calls: ['a', 'b', 'join', 'join'],
    result: 'join1',
    check: (r) => {
      expect(r.decisions[0].commands.map(label)).toEqual(['a', 'b']);
      expect(r.state.steps.join.runs).toBe(2);
      // b completed while join was running: its transition was queued, not dropped
      expect(evs(r, 'transition', 'b')[0].payload.targets).toEqual([{ step: 'join', args: {}, queued: true }]);
      expect(evs(r, 'execution_completed')).toHaveLength(1);
    },
  },
  {
    name: 'fan-in onto a routing step: runs twice immediately',
    yaml: `
workflow:
  - step: start
    next: [a, b]
  - step: a
    tool: {kind: python, code: "x"}
    next: [join]
  - step: b
    tool: {kind: python, code: "x"}
    next: [join]
  - step: join
`,
    status: 'completed',
    check: (r) => {
      expect(r.state.steps.join.runs).toBe(2);
      expect(r.state.terminal_step).toBe('join');
    },
  },
  {
    name: 'the execution is not completed while a parallel branch still has commands',
    yaml: `
workflow:
  - step: start
    next: [fast, slow]
  - step: fast
  - step: slow
    tool: {kind: python, code: "x"}
`,
    status: 'completed',
    check: (r) => {
      expect(r.decisions[0].state.status).toBe('started');
      expect(r.state.steps.fast.status).toBe('completed');
      expect(r.state.result).toEqual(env({ step: 'slow', iteration: null }));
      expect(r.state.terminal_step).toBe('slow');
    },
  },
  {
    name: 'a transition to an unknown step fails the execution',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {next: [{step: s}]}
`,
    edit: (p) => {
      const next = p.workflow[0].case![0].then[0];
      if (next.action === 'next') next.targets[0].step = 'nowhere';
    },
    status: 'failed',
    check: (r) => expect(String((r.state.error as JsonObject).message)).toContain("unknown step 'nowhere'"),
  },
  {
    name: 'a routing cycle is stopped by the entry guard',
    yaml: `
workflow:
  - step: start
    next: [ping]
  - step: ping
    next: [pong]
  - step: pong
    next: [ping]
`,
    status: 'failed',
    check: (r) => expect(String((r.state.error as JsonObject).message)).toContain('routing cycle'),
  },

  {
    name: 'fan-in inside one decision: two routing branches reach a tool step, it runs twice in order',
    yaml: `
workflow:
  - step: start
    next: [x, y]
  - step: x
    next: [{step: join, args: {from: x}}]
  - step: y
    next: [{step: join, args: {from: y}}]
  - step: join
    tool: {kind: python, code: "x", args: {from: "{{ args.from }}"}}
`,
    worker: ({ cmd }) => ({ response: (cmd.tool.args as JsonObject).from }),
    status: 'completed',
    calls: ['join', 'join'],
    result: 'y',
    check: (r) => {
      expect(r.decisions[0].commands.map((c) => c.args)).toEqual([{ from: 'x' }]);
      expect(cmds(r, 'join').map((c) => c.args)).toEqual([{ from: 'x' }, { from: 'y' }]);
      expect(evs(r, 'step.enter', 'join').map((e) => e.payload.queued ?? false)).toEqual([false, true]);
      expect(r.state.pending).toEqual({});
    },
  },
  {
    name: 'case call inside a loop keeps the item open until its follow-up call is done',
    yaml: `
workflow:
  - step: each
    loop: {in: [1, 2], iterator: n, mode: async}
    tool: {kind: http, method: GET, url: "http://api/{{ n }}", params: {part: 1}}
    case:
      - when: "{{ event.name == 'call.done' and response.part == 1 }}"
        then:
          call: {params: {part: 2}}
`,
    worker: ({ cmd }) => ok({ part: (cmd.tool.params as JsonObject).part, url: cmd.tool.endpoint as string }),
    status: 'completed',
    calls: ['each#0', 'each#1', 'each#0', 'each#1'],
    result: [env({ part: 2, url: 'http://api/1' }), env({ part: 2, url: 'http://api/2' })],
  },
  {
    name: 'next and result at step.enter on a routing step',
    yaml: `
workflow:
  - step: start
    case:
      - when: "{{ event.name == 'step.enter' }}"
        then:
          - result: {from: {mode: "{{ payload.mode }}"}}
          - next: [{step: work, args: {mode: "{{ payload.mode }}"}}]
    next: [never]
  - step: work
    tool: {kind: python, code: "x", args: {m: "{{ args.mode }}"}}
  - step: never
`,
    opts: { payload: { mode: 'fast' } },
    status: 'completed',
    check: (r) => {
      expect(r.state.steps.start.result).toEqual({ mode: 'fast' });
      expect(cmds(r, 'work')[0].tool.args).toEqual({ m: 'fast' });
      expect(r.state.steps.never).toBeUndefined();
    },
  },
  {
    name: 'fail at step.exit fails a completed-looking step',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'step.exit' and result | length == 0 }}"
        then: {fail: {message: "no rows"}}
`,
    worker: () => ({ response: [] }),
    status: 'failed',
    steps: { s: 'failed' },
    events: ['s:step.exit', 's:case_applied', 's:step_failed', 'execution_failed'],
  },
  {
    name: 'a step args render error fails the step naming the arg',
    yaml: `
workflow:
  - step: s
    args: {id: "{{ payload.missing.id }}"}
    tool: {kind: python, code: "x"}
`,
    status: 'failed',
    calls: [],
    check: (r) => expect((r.state.steps.s.error as JsonObject).field).toBe('args.id'),
  },
  {
    name: 'a literal loop list is rendered too',
    yaml: `
workload: {a: 1}
workflow:
  - step: each
    loop: {in: ["{{ workload.a }}", 2], iterator: v, mode: sequential}
    tool: {kind: python, code: "x", args: {v: "{{ v }}"}}
`,
    worker: ({ cmd }) => ({ response: (cmd.tool.args as JsonObject).v as number }),
    status: 'completed',
    result: [1, 2],
  },
  {
    name: 'a loop over an object iterates its {key, value} pairs',
    yaml: `
workload: {regions: {eu: 1, us: 2}}
workflow:
  - step: each
    loop: {in: "{{ workload.regions }}", iterator: r, mode: sequential}
    tool: {kind: python, code: "x", args: {k: "{{ r.key }}", v: "{{ r.value }}"}}
`,
    worker: ({ cmd }) => ({ response: cmd.tool.args as Json }),
    status: 'completed',
    result: [{ k: 'eu', v: 1 }, { k: 'us', v: 2 }],
  },
  {
    name: 'legacy pagination per loop item',
    yaml: `
workflow:
  - step: each
    loop:
      in: [a, b]
      iterator: org
      mode: sequential
      pagination:
        type: response_based
        continue_while: "{{ response.data.page < 2 }}"
        next_page: {params: {page: "{{ response.data.page + 1 }}"}}
        merge_strategy: append
        merge_path: data.items
    tool: {kind: http, method: GET, url: "http://api/{{ org }}", params: {page: 1}}
`,
    worker: ({ cmd }) => {
      const page = (cmd.tool.params as JsonObject).page as number;
      return ok({ page, items: [`${String(cmd.tool.endpoint).slice(-1)}${page}`] });
    },
    status: 'completed',
    calls: ['each#0', 'each#0', 'each#1', 'each#1'],
    result: [['a1', 'a2'], ['b1', 'b2']],
  },
  {
    name: 'async loop answered in shuffled order with duplicates and claims: state and fold agree',
    yaml: `
workflow:
  - step: each
    loop: {in: "{{ range(12) | list }}", iterator: i, mode: async, max_in_flight: 5}
    tool: {kind: python, code: "x", args: {i: "{{ i }}"}}
    case:
      - when: "{{ event.name == 'call.done' and i % 3 == 0 }}"
        then: {collect: {from: "{{ i }}", into: threes, mode: append}}
      - when: "{{ event.name == 'step.exit' }}"
        then: {set: {ctx: {threes: "{{ threes | sort }}"}}}
    vars: {n: "{{ result | length }}"}
`,
    opts: { order: 'shuffle', duplicate: true, claim: true },
    worker: ({ cmd }) => ({ response: (cmd.tool.args as JsonObject).i as number }),
    status: 'completed',
    result: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    check: (r) => {
      expect(r.maxOpen.each).toBe(5);
      expect(r.state.vars).toEqual({ n: 12 });
      expect(r.duplicatesIgnored).toBe(12);
    },
  },

  // ------------------------------------------------------------------ idempotence, claims, cancel
  {
    name: 'duplicate delivery of every call.done (with claims) changes nothing the second time',
    yaml: `
workflow:
  - step: each
    loop: {in: [1, 2, 3], iterator: n, mode: async}
    tool: {kind: python, code: "x", args: {n: "{{ n }}"}}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {collect: {from: "{{ n }}", into: seen, mode: append}}
      - when: "{{ event.name == 'step.exit' }}"
        then: {result: {from: "{{ seen }}"}}
`,
    opts: { duplicate: true, claim: true },
    status: 'completed',
    result: [1, 2, 3],
    check: (r) => {
      expect(r.duplicatesIgnored).toBe(3);
      expect(evs(r, 'call.done')).toHaveLength(3);
      expect(evs(r, 'action_started')).toHaveLength(3);
    },
  },
  {
    name: 'worker-sent step.enter / step.exit, unknown command ids and worker.done are ignored',
    yaml: `
workflow:
  - step: s
    tool: {kind: python, code: "x"}
    next: [t]
  - step: t
    tool: {kind: python, code: "x"}
`,
    opts: {
      inject: [
        [1, { name: 'step.enter', step: 't', payload: {} }],
        [1, { name: 'step.exit', step: 's', payload: {} }],
        [1, { name: 'call.done', step: 's', command_id: 99, payload: { response: 1 } }],
        [1, { name: 'worker.done', step: 't', payload: {} }],
      ],
    },
    status: 'completed',
    calls: ['s', 't'],
    check: (r) => {
      const injected = r.decisions.slice(2, 6);
      expect(injected.map((d) => d.events.length)).toEqual([0, 0, 0, 0]);
      expect(evs(r, 'step.enter', 't')).toHaveLength(1);
      expect(evs(r, 'step.exit', 's')).toHaveLength(1);
    },
  },
  {
    name: 'execution.cancel: status cancelled, open commands reported, later call.done ignored',
    yaml: `
workflow:
  - step: each
    loop: {in: [1, 2, 3, 4], iterator: n, mode: async, max_in_flight: 3}
    tool: {kind: python, code: "x"}
`,
    opts: { cancelAfter: 1 },
    status: 'cancelled',
    calls: ['each#0'],
    check: (r) => {
      const ev = evs(r, 'execution_cancelled')[0];
      expect(ev.payload.cancelled_commands).toEqual([2, 3, 4]);
      expect(r.cancelled).toEqual([2, 3, 4]);
      expect(r.state.open_commands).toEqual([]);
      expect(evs(r, 'execution.cancel')).toHaveLength(1);
    },
  },
];

describe('engine scenarios', () => {
  it('has at least 50 scenarios', () => expect(scenarios.length).toBeGreaterThanOrEqual(50));

  for (const sc of scenarios) {
    it(sc.name, () => {
      const playbook = yaml(sc.yaml);
      sc.edit?.(playbook);
      const r = runScenario(playbook, sc.worker ?? echo, sc.opts);
      expect(r.state.status).toBe(sc.status);
      if ('result' in sc) expect(r.state.result).toEqual(sc.result);
      if (sc.calls) expect(r.answered.map(label)).toEqual(sc.calls);
      if (sc.steps) for (const [step, status] of Object.entries(sc.steps)) expect(r.state.steps[step]?.status, step).toBe(status);
      if (sc.events) expectSubsequence(r.events.map(evLabel), sc.events);
      sc.check?.(r);
    });
  }
});
