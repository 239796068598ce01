/**
 * Validation of forms real (reference-era) playbooks use, issue 18 items 1, 2, 3, 7, 8, 9: each
 * row is a minimal playbook with the errors and warnings it must give (exactly, by path) and,
 * where it matters, what normalisation keeps.
 */
import { describe, expect, it } from 'vitest';
import { parsePlaybook } from './index.js';
import type { Playbook } from './types.js';

const HEAD = 'apiVersion: playflow.io/v2\nkind: Playbook\n';
const META = 'metadata: {name: t, path: t/x}\n';

interface Row {
  name: string;
  yaml: string;
  errors?: Array<[string, string]>;
  warnings?: Array<[string, string]>;
  check?: (pb: Playbook) => void;
}

const pgInline = '{type: postgres, inline: {host: h, user: u, database: d}}';

const rows: Row[] = [
  {
    name: 'item 1: from as a bare expression validates without warnings',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {collect: {from: response.data.items, into: acc}, result: {from: ctx.acc}}
`,
  },
  {
    name: 'item 1: a bare from that does not parse is an error at its path',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: {result: {from: "response.("}}
`,
    errors: [['workflow[0].case[0].then.result.from', 'invalid template']],
  },
  {
    name: 'item 2: the table sink validates (args one row, data a list, upsert with key)',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - sink: {kind: postgres, auth: ${pgInline}, table: probe_sink, args: {id: "{{ response.id }}", name: "{{ response.name }}"}}
          - sink: {kind: duckdb, database: "/tmp/x.duckdb", table: probe, data: [{id: 1}], mode: upsert, key: id}
`,
    check: (pb) => {
      const sinks = pb.workflow[0].case![0].then.flatMap((a) => (a.action === 'sink' ? [a.tool] : []));
      expect(sinks[0]).toMatchObject({ kind: 'postgres', table: 'probe_sink', args: { id: '{{ response.id }}' } });
      expect(sinks[1]).toMatchObject({ kind: 'duckdb', table: 'probe', mode: 'upsert', key: 'id' });
    },
  },
  {
    name: 'item 3: sink {tool: {...}, command} keeps every field',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink: {tool: {kind: postgres, auth: pg}, command: "INSERT INTO t VALUES ($1)", args: ["{{ response.v }}"]}
`,
    check: (pb) => {
      const a = pb.workflow[0].case![0].then[0];
      expect(a).toEqual({ action: 'sink', tool: { kind: 'postgres', auth: 'pg', command: 'INSERT INTO t VALUES ($1)', args: ['{{ response.v }}'] } });
    },
  },
  {
    name: 'item 3: an unknown sink field is an error naming it, at its path',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink: {kind: postgres, auth: pg, table: t, args: {a: 1}, bogus_field: 1}
`,
    errors: [['workflow[0].case[0].then.sink.bogus_field', "unknown field 'bogus_field' in this postgres sink"]],
  },
  {
    name: 'item 3: unknown field inside a sink tool: {...} points into tool',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://x"}
    retry:
      - when: "{{ response.more }}"
        then:
          max_attempts: 3
          sink: {tool: {kind: postgres, auth: pg, colour: red}, command: "SELECT 1"}
`,
    errors: [['workflow[0].retry[0].then.sink.tool.colour', "unknown field 'colour'"]],
  },
  {
    name: 'item 3: a wrongly typed sink field is an error',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink: {kind: postgres, auth: pg, table: t, args: {a: 1}, mode: merge}
`,
    errors: [['workflow[0].case[0].then.sink.mode', 'must be one of "insert", "upsert"']],
  },
  {
    name: 'item 7: a whole-expression template where an object is expected',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://x", params: "{{ workload.q }}", headers: "{{ workload.h }}"}
    next: [{step: py, args: "{{ start.data }}"}]
  - step: py
    tool: {kind: python, code: "def main(a): return a", args: "{{ args }}"}
`,
    check: (pb) => expect(pb.workflow[0].next).toEqual([{ step: 'py', args: '{{ start.data }}' }]),
  },
  {
    name: 'item 7: text that is not one template where an object is expected is still refused',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: http, method: GET, endpoint: "http://x", params: "page={{ n }}"}
`,
    errors: [['workflow[0].tool.params', 'must be a mapping, or one whole-expression template']],
  },
  {
    name: 'item 8: harmless metadata is kept; labels may be numbers or booleans',
    yaml: `metadata: {name: t, path: t/x, version: "1.2", tags: [etl, demo], owner: {team: data}, labels: {tier: 1, beta: true}}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
`,
    check: (pb) => {
      expect(pb.metadata).toMatchObject({ version: '1.2', tags: ['etl', 'demo'], owner: { team: 'data' }, labels: { tier: '1', beta: 'true' } });
    },
  },
  {
    name: 'item 8: a leading / in metadata.path is normalised as registration does, with a warning',
    yaml: `metadata: {name: t, path: /examples/users}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
`,
    warnings: [['metadata.path', "stored as 'examples/users'"]],
    check: (pb) => expect(pb.metadata.path).toBe('examples/users'),
  },
  {
    name: 'item 8: a path registration would refuse is refused by validate with the same message',
    yaml: `metadata: {name: t, path: "a//b c"}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
`,
    errors: [['metadata.path', "path 'a//b c' is not a catalog path"]],
  },
  {
    name: 'script: {path} (read by the worker) validates, with a note that it stays as written',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, script: {path: etl/load.py}, args: {n: 1}}
`,
    warnings: [['workflow[0].tool.script', 'the worker loads it at run time']],
  },
  {
    name: 'item 9: async def main(...) is recognised',
    yaml: `${META}workflow:
  - step: start
    tool: {kind: python, code: "import asyncio\\nasync def main(n):\\n    await asyncio.sleep(0)\\n    return n", args: {n: 1}}
`,
  },
];

describe('reference-era forms: validation', () => {
  for (const row of rows) {
    it(row.name, () => {
      const r = parsePlaybook(HEAD + row.yaml);
      expect(r.errors.map((e) => [e.path, e.message])).toEqual((row.errors ?? []).map(([p]) => [p, expect.stringContaining(row.errors!.find((x) => x[0] === p)![1])]));
      expect(r.warnings.map((w) => [w.path, w.message])).toEqual((row.warnings ?? []).map(([p, m]) => [p, expect.stringContaining(m)]));
      if (row.check) row.check(r.playbook!);
    });
  }
});
