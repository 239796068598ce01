/**
 * Engine behaviour that playbooks written for the reference implementation rely on (issue 18,
 * items 1, 4, 5, 6): `from` as an expression, the one `.data` rule across tool kinds, a body with
 * its own `data`, and loop step args rendered per item. Each row runs through the scenario
 * runner, which also checks that fold(events) equals the incremental state.
 */
import { describe, expect, it } from 'vitest';
import { parsePlaybook } from '../../playbook/index.js';
import type { Json, Playbook } from '../../playbook/types.js';
import { runScenario, type FakeWorker } from './testkit.js';

const HEADER = 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: ref, path: tests/ref}\n';

function yaml(text: string): Playbook {
  const r = parsePlaybook(HEADER + text);
  if (!r.playbook) throw new Error(`playbook invalid: ${JSON.stringify(r.errors)}`);
  return r.playbook;
}

interface Row {
  name: string;
  playbook: string;
  worker: FakeWorker;
  result?: Json;
  /** Checks of the commands the engine issued (step → list of tool/args). */
  check?: (r: ReturnType<typeof runScenario>) => void;
}

const http = (data: Json): Json => ({ id: 'r', status: 200, data, headers: {} });

const rows: Row[] = [
  {
    name: 'item 1: result.from as a bare expression is evaluated, not kept as text',
    playbook: `
workflow:
  - step: start
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {result: {from: response}}
`,
    worker: () => ({ response: { v: 7 } }),
    result: { v: 7 },
  },
  {
    name: 'item 1: collect.from bare dot path, readable as <into> and as ctx.<into>',
    playbook: `
workflow:
  - step: start
    loop: {in: [1, 2, 3], iterator: n}
    tool: {kind: python, code: "x", args: {n: "{{ n }}"}}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {collect: {from: response.v, into: acc}}
      - when: "{{ event.name == 'step.exit' }}"
        then: {result: {from: "{{ {'top': acc, 'ctx': ctx.acc} }}"}}
`,
    worker: ({ cmd }) => ({ response: { v: (cmd.tool.args as { n: number }).n * 10 } }),
    result: { top: [10, 20, 30], ctx: [10, 20, 30] },
  },
  {
    name: 'item 1: a {{ }} template in from still works',
    playbook: `
workflow:
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://api/x"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {result: {from: "{{ response.data.items }}"}}
`,
    worker: () => ({ response: http({ items: [1, 2] }) }),
    result: [1, 2],
  },
  {
    name: 'item 4: .data on a python step result without data (multiply.data.value)',
    playbook: `
workflow:
  - step: multiply
    tool: {kind: python, code: "x"}
    next: [report]
  - step: report
    tool: {kind: python, code: "x", args: {v: "{{ multiply.data.value }}", same: "{{ multiply.value }}"}}
`,
    worker: ({ cmd }) => ({ response: cmd.step === 'multiply' ? { value: 20 } : (cmd.tool.args as Json) }),
    result: { v: 20, same: 20 },
  },
  {
    name: 'item 4: a python result with its own data is passed whole ({{ start }})',
    playbook: `
workflow:
  - step: start
    tool: {kind: python, code: "x"}
    next: [{step: echo, args: {whole: "{{ start }}", inner: "{{ start.data.rows }}"}}]
  - step: echo
    tool: {kind: python, code: "x", args: {whole: "{{ args.whole }}", inner: "{{ args.inner }}"}}
`,
    worker: ({ cmd }) => ({ response: cmd.step === 'start' ? { status: 'ok', data: { rows: 3 } } : (cmd.tool.args as Json) }),
    result: { whole: { status: 'ok', data: { rows: 3 } }, inner: 3 },
  },
  {
    name: 'item 4: response in a rule of a python step follows the same rule (response.data.x)',
    playbook: `
workflow:
  - step: start
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'call.done' and response.data.value > 1 }}"
        then: {result: {from: "{{ response.data.value * 2 }}"}}
`,
    worker: () => ({ response: { value: 4 } }),
    result: 8,
  },
  {
    name: 'item 5: body with its own data: response.data.paging paginates (spec wording)',
    playbook: `
workflow:
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://api/items", params: {page: 1}}
    retry:
      - when: "{{ response.data.paging.hasMore }}"
        then:
          max_attempts: 10
          next_call: {params: {page: "{{ response.data.paging.page + 1 }}"}}
          collect: {strategy: append, path: data, into: all}
`,
    worker: ({ cmd }) => {
      const page = (cmd.tool.params as { page: number }).page;
      return { response: http({ data: [page * 10, page * 10 + 1], paging: { page, hasMore: page < 3 } }) };
    },
    result: [10, 11, 20, 21, 30, 31],
  },
  {
    name: 'item 5: the reference wording response.data.data reaches the same list',
    playbook: `
workflow:
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://api/items"}
    case:
      - when: "{{ event.name == 'call.done' and response.data.data | length == 2 }}"
        then: {result: {from: response.data.data}}
`,
    worker: () => ({ response: http({ data: ['a', 'b'], paging: { hasMore: false } }) }),
    result: ['a', 'b'],
  },
  {
    name: 'item 6: loop step args rendered per item with the iterator visible',
    playbook: `
workflow:
  - step: start
    loop: {in: [2, 3, 4], iterator: n}
    args: {num: "{{ n }}", twice: "{{ n * 2 }}", fixed: "{{ workload.k }}"}
    tool: {kind: python, code: "def main(num, twice, fixed): return num + twice + fixed"}
`,
    worker: ({ cmd }) => {
      const a = cmd.args as { num: number; twice: number; fixed: number };
      return { response: a.num + a.twice + a.fixed };
    },
    result: [7, 10, 13],
    check: (r) => {
      expect(r.commands.map((c) => c.args)).toEqual([{ num: 2, twice: 4, fixed: 1 }, { num: 3, twice: 6, fixed: 1 }, { num: 4, twice: 8, fixed: 1 }]);
    },
  },
];

describe('reference-era playbooks in the engine', () => {
  for (const row of rows) {
    it(row.name, () => {
      const r = runScenario(yaml(row.playbook), row.worker, { payload: { k: 1 } });
      expect(r.state.status, JSON.stringify(r.state.error)).toBe('completed');
      if ('result' in row) expect(r.state.result).toEqual(row.result);
      row.check?.(r);
    });
  }

  it('item 1: a bare from naming nothing fails the step, naming the field', () => {
    const r = runScenario(yaml(`
workflow:
  - step: start
    tool: {kind: python, code: "x"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {result: {from: respons.v}}
`), () => ({ response: { v: 1 } }));
    expect(r.state.status).toBe('failed');
    expect(JSON.stringify(r.state.error)).toContain('result.from');
    expect(JSON.stringify(r.state.error)).toContain('respons');
  });
});
