/**
 * Reference conventions (issue 18): each row is a playbook fragment in the reference's form, the
 * spec form it runs as (the normalised step), and the deprecation warning naming that form. The
 * same rewrite is what `playflow playbook convert` writes, and a converted document validates
 * without warnings.
 */
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { convertReferenceForms } from './convert.js';
import { parsePlaybook, parsePlaybookObject } from './parse.js';
import type { Step } from './types.js';

const HEAD = 'apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t/x}\n';

interface Row {
  name: string;
  workflow: string;
  /** Extra top-level YAML (workbook). */
  extra?: string;
  /** Warning: [path, fragment]. */
  warning: [string, string];
  /** The normalised step (index `at`, default 0) must match this. */
  step: Partial<Step> | Record<string, unknown>;
  at?: number;
}

const rows: Row[] = [
  {
    name: 'v1 step form: tool: <kind> with flat attributes',
    workflow: `
  - step: start
    tool: http
    method: GET
    endpoint: "http://api/x"
    params: {q: 1}`,
    warning: ['workflow[0].tool', 'tool: {kind: http, ...}'],
    step: { tool: { kind: 'http', method: 'GET', endpoint: 'http://api/x', params: { q: 1 } } },
  },
  {
    name: "call.error is call.done with an error",
    workflow: `
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://api/x"}
    case:
      - when: "{{ event.name == 'call.error' }}"
        then: {fail: boom}`,
    warning: ['workflow[0].case[0].when', "event 'call.error'"],
    step: { case: [{ when: "{{ (event.name == 'call.done' and error is defined) }}", then: [{ action: 'fail', message: 'boom' }] }] },
  },
  {
    name: 'workbook tool task: is name:',
    workflow: `
  - step: start
    tool: {kind: workbook, task: greet}`,
    extra: 'workbook:\n  - name: greet\n    tool: {kind: python, code: "result = 1"}\n',
    warning: ['workflow[0].tool.task', "'task' → 'name'"],
    step: { tool: { kind: 'workbook', name: 'greet' } },
  },
  {
    name: 'playbook tool payload is args',
    workflow: `
  - step: start
    tool: {kind: playbook, path: child/x, payload: {n: 3}}`,
    warning: ['workflow[0].tool.payload', "'payload' → 'args'"],
    step: { tool: { kind: 'playbook', path: 'child/x', args: { n: 3 } } },
  },
  {
    name: 'set as a list of {name, value}',
    workflow: `
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          set: [{name: seen, value: "{{ response }}"}, {name: n, value: 2}]`,
    warning: ['workflow[0].case[0].then.set', 'set: {ctx:'],
    step: { case: [{ when: "{{ event.name == 'call.done' }}", then: [{ action: 'set', ctx: { seen: '{{ response }}', n: 2 } }] }] },
  },
  {
    name: 'case-level retry with params and collect is a step-level retry policy',
    workflow: `
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://api/x", params: {page: 1}}
    case:
      - when: "{{ event.name == 'call.done' and response.data.has_more }}"
        then:
          retry:
            max_attempts: 20
            params: {page: "{{ response.data.page + 1 }}"}
            collect: {strategy: append, path: data.items, into: all}`,
    warning: ['workflow[0].case[0].then.retry', 'step-level retry policy'],
    step: {
      retry: [{
        when: "{{ event.name == 'call.done' and response.data.has_more }}",
        then: { max_attempts: 20, next_call: { params: { page: '{{ response.data.page + 1 }}' } }, collect: { strategy: 'append', path: 'data.items', into: 'all' } },
      }],
    },
  },
  {
    name: 'sink written tool: <kind>',
    workflow: `
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink: {tool: postgres, auth: pg, table: t, args: {v: "{{ response }}"}}`,
    warning: ['workflow[0].case[0].then.sink.tool', "'kind: postgres'"],
    step: { case: [{ when: "{{ event.name == 'call.done' }}", then: [{ action: 'sink', tool: { kind: 'postgres', auth: 'pg', table: 't', args: { v: '{{ response }}' } } }] }] },
  },
  {
    name: 'sink written backend: <kind>',
    workflow: `
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://api/x"}
    retry:
      - when: "{{ response.more }}"
        then:
          max_attempts: 3
          sink: {backend: duckdb, database: /tmp/a.duckdb, table: t, args: "{{ response.rows }}"}`,
    warning: ['workflow[0].retry[0].then.sink.backend', "'kind: duckdb'"],
    step: { retry: [{ when: '{{ response.more }}', then: { max_attempts: 3, sink: { kind: 'duckdb', database: '/tmp/a.duckdb', table: 't', args: '{{ response.rows }}' } } }] },
  },
  {
    name: 'script: inline text is python code',
    workflow: `
  - step: start
    tool: {kind: python, script: "result = 41 + 1"}`,
    warning: ['workflow[0].tool.script', "'code'"],
    step: { tool: { kind: 'python', code: 'result = 41 + 1' } },
  },
  {
    name: 'script: inline text is postgres command',
    workflow: `
  - step: start
    tool: {kind: postgres, auth: pg, script: "SELECT 1"}`,
    warning: ['workflow[0].tool.script', "'command'"],
    step: { tool: { kind: 'postgres', auth: 'pg', command: 'SELECT 1' } },
  },
  {
    name: '| tojson feeding an object field',
    workflow: `
  - step: start
    tool: {kind: http, method: POST, endpoint: "http://api/x", json: "{{ workload.body | tojson }}"}`,
    warning: ['workflow[0].tool.json', "'| tojson' dropped"],
    step: { tool: { kind: 'http', method: 'POST', endpoint: 'http://api/x', json: '{{ workload.body }}' } },
  },
  {
    name: 'python main(input_data) receives all args as one dict',
    workflow: `
  - step: start
    tool: {kind: python, code: "def main(input_data):\\n    return input_data['a']", args: {a: 1, b: 2}}`,
    warning: ['workflow[0].tool.code', 'main(input_data) received all args as one dict'],
    step: { tool: { kind: 'python', code: "def main(input_data):\n    return input_data['a']", args: { input_data: { a: 1, b: 2 } } } },
  },
  {
    name: 'the loop iterator bound to a same-named main() parameter',
    workflow: `
  - step: start
    loop: {in: [1, 2], iterator: city}
    tool: {kind: python, code: "def main(city):\\n    return city"}`,
    warning: ['workflow[0].tool.args', "args: {city: \"{{ city }}\"}"],
    step: { tool: { kind: 'python', code: 'def main(city):\n    return city', args: { city: '{{ city }}' } } },
  },
  {
    name: 'max_delay caps the error-side backoff (kept; it has no spec form)',
    workflow: `
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://api/x"}
    retry:
      - when: "{{ error.status == 503 }}"
        then: {max_attempts: 5, initial_delay: 1, backoff_multiplier: 10, max_delay: 3}`,
    warning: ['workflow[0].retry[0].then.max_delay', "'max_delay' has no spec form"],
    step: { retry: [{ when: '{{ error.status == 503 }}', then: { max_attempts: 5, initial_delay: 1, backoff_multiplier: 10, max_delay: 3 } }] },
  },
];

describe('reference conventions run as their spec forms, with a deprecation warning', () => {
  for (const row of rows) {
    it(row.name, () => {
      const text = `${HEAD}${row.extra ?? ''}workflow:${row.workflow}\n`;
      const r = parsePlaybook(text);
      expect(r.errors).toEqual([]);
      expect(r.warnings.map((w) => w.path)).toEqual([row.warning[0]]);
      expect(r.warnings[0].message).toContain(row.warning[1]);
      expect(r.warnings[0].message).toMatch(/^deprecated: /);
      expect(r.playbook!.workflow[row.at ?? 0]).toMatchObject(row.step);
    });
  }
});

describe('the converter (legacy set included) leaves nothing to warn about', () => {
  for (const row of rows) {
    if (row.warning[1].includes('max_delay')) continue; // no spec form: reported, kept
    it(row.name, () => {
      const raw = parseYaml(`${HEAD}${row.extra ?? ''}workflow:${row.workflow}\n`) as Record<string, unknown>;
      const c = convertReferenceForms(raw, { legacy: true });
      expect(c.changes.map((x) => x.path)).toEqual([row.warning[0]]);
      expect(c.unconverted).toEqual([]);
      const again = parsePlaybookObject(c.doc);
      expect(again.errors).toEqual([]);
      expect(again.warnings).toEqual([]);
      expect(convertReferenceForms(c.doc, { legacy: true }).changes).toEqual([]);
    });
  }

  it('the legacy set: loop collection/element, http url, postgres query, _loop.*, a leading / in the path', () => {
    const raw = parseYaml(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: /t/x}
workflow:
  - step: start
    loop: {collection: [1, 2], element: n}
    tool: {kind: http, method: GET, url: "http://api/{{ n }}?i={{ _loop.index }}"}
    next: [store]
  - step: store
    tool: {kind: postgres, auth: pg, query: "SELECT 1"}
`) as Record<string, unknown>;
    expect(parsePlaybookObject(raw).warnings.length).toBeGreaterThan(0);
    const c = convertReferenceForms(raw, { legacy: true });
    expect(c.changes.map((x) => x.path).sort()).toEqual([
      'metadata.path', 'workflow[0].loop.collection', 'workflow[0].loop.element', 'workflow[0].tool.url', 'workflow[0].tool.url', 'workflow[1].tool.query',
    ].sort());
    const again = parsePlaybookObject(c.doc);
    expect(again.warnings).toEqual([]);
    expect(again.playbook!.workflow[0].tool).toEqual({ kind: 'http', method: 'GET', endpoint: 'http://api/{{ n }}?i={{ _retry.index }}' });
  });

  it('what it cannot convert is reported with the reason and left as written', () => {
    const raw = parseYaml(`${HEAD}workflow:
  - step: start
    tool: {kind: python, code: "x = 1"}
    next: [{step: use, args: "{{ start }}"}]
  - step: use
    tool: {kind: python, code: "def main(input_data):\\n    return input_data"}
`) as Record<string, unknown>;
    const c = convertReferenceForms(raw, { legacy: true });
    expect(c.changes).toEqual([]);
    expect(c.unconverted).toEqual([{ path: 'workflow[1].tool.code', message: expect.stringContaining('not known here') }]);
  });

  it('never changes its input', () => {
    const raw = parseYaml(`${HEAD}workflow:\n  - step: start\n    tool: python\n    code: "result = 1"\n`) as Record<string, unknown>;
    const before = JSON.stringify(raw);
    convertReferenceForms(raw, { legacy: true });
    expect(JSON.stringify(raw)).toBe(before);
  });
});
