import { describe, expect, it } from 'vitest';
import { Issues } from './issues.js';
import { parsePlaybook } from './parse.js';
import { checkWrittenDocument, entryStep, stepTargets, validatePlaybook } from './validate.js';
import type { Playbook, Step } from './types.js';

const playbook = (workflow: Step[], extra: Partial<Playbook> = {}): Playbook => ({
  apiVersion: 'playflow.io/v2',
  kind: 'Playbook',
  metadata: { name: 't' },
  workload: {},
  keychain: [],
  workbook: [],
  workflow,
  ...extra,
});

describe('entryStep', () => {
  it('is the step named start wherever it is', () => {
    expect(entryStep(playbook([{ step: 'load' }, { step: 'start' }])).step).toBe('start');
  });
  it('is the first step when none is named start', () => {
    expect(entryStep(playbook([{ step: 'fetch' }, { step: 'load' }])).step).toBe('fetch');
  });
  it('throws for a playbook without steps', () => {
    expect(() => entryStep(playbook([]))).toThrow(/has no steps/);
  });
});

describe('validatePlaybook', () => {
  it('reports at normalised paths when no source map is given', () => {
    const issues = validatePlaybook(
      playbook([
        { step: 'a', next: [{ step: 'b' }, { step: 'zz' }], case: [{ when: 'x', then: [{ action: 'skip' }, { action: 'next', targets: [{ step: 'q' }] }] }] },
        { step: 'b' },
        { step: 'b' },
      ]),
    );
    expect(issues.filter((i) => i.severity === 'error').map((i) => i.path)).toEqual([
      'workflow[2].step',
      'workflow[0].next[1].step',
      'workflow[0].case[0].then[1].next[0].step',
    ]);
  });

  it('checks workbook references', () => {
    const issues = validatePlaybook(
      playbook(
        [
          { step: 'a', tool: { kind: 'workbook', name: 'known' }, next: [{ step: 'b' }] },
          { step: 'b', tool: { kind: 'workbook', name: 'unknown' }, next: [{ step: 'c' }] },
          { step: 'c', tool: { kind: 'workbook', name: '{{ args.task }}' }, next: [{ step: 'd' }] },
          { step: 'd', tool: { kind: 'workbook' } },
        ],
        { workbook: [{ name: 'known', tool: { kind: 'python', code: 'result = 1' } }] },
      ),
    );
    expect(issues.map((i) => [i.path, i.message])).toEqual([
      ['workflow[1].tool.name', "step 'b': workbook task 'unknown' is not defined in the workbook section (tasks: known)"],
      ['workflow[3].tool.name', "step 'd': a workbook tool needs 'name': the workbook task to run"],
    ]);
  });

  it('warns about unreachable steps and retry policies without max_attempts', () => {
    const issues = validatePlaybook(
      playbook([
        { step: 'start', retry: [{ when: '{{ error }}', then: { initial_delay: 1 } }], case: [{ when: 'x', then: [{ action: 'next', targets: [{ step: 'via_case' }] }] }] },
        { step: 'via_case' },
        { step: 'orphan' },
      ]),
    );
    expect(issues).toEqual([
      { path: 'workflow[0].retry[0].then.max_attempts', severity: 'warning', message: expect.stringContaining('prevent endless loops') },
      { path: 'workflow[2]', severity: 'warning', message: "step 'orphan' is never reached from the entry step 'start'" },
    ]);
  });

  it('lists every target of a step', () => {
    const s: Step = { step: 'a', next: [{ step: 'b' }], case: [{ when: 'x', then: [{ action: 'next', targets: [{ step: 'c', args: { n: 1 } }] }] }] };
    expect(stepTargets(s)).toEqual([{ step: 'b' }, { step: 'c', args: { n: 1 } }]);
  });
});

describe('checkWrittenDocument', () => {
  const check = (doc: Record<string, unknown>) => {
    const issues = new Issues();
    checkWrittenDocument(doc, issues);
    return issues.errors;
  };

  it('leaves v1 constructs to normalisation in v1 documents', () => {
    expect(check({ apiVersion: 'noetl.io/v1', kind: 'Playbook', workflow: [{ step: 'a', type: 'http', endpoint: 'e', when: 'x' }] })).toEqual([]);
  });

  it('names the v2 replacement for each removed construct', () => {
    const errors = check({
      apiVersion: 'playflow.io/v2',
      kind: 'Playbook',
      workflow: [{ step: 'a', type: 'python', when: 'x', with: { a: 1 }, code: 'c', next: [{ when: 'y', then: ['b'] }] }],
    });
    expect(errors.map((e) => [e.path, e.message.split(';')[1]?.trim()])).toEqual([
      ['workflow[0].type', "put the tool under 'tool' with 'kind' (tool: {kind: python, ...})"],
      ['workflow[0].when', 'route from the previous step with a case entry: case: [{when: <condition>, then: {next: [{step: a}]}}]'],
      ['workflow[0].with', "pass data into a step with 'args'"],
      ['workflow[0].code', "move it under 'tool' (tool: {kind: ..., code: ...})"],
      ['workflow[0].next[0]', 'use case: [{when: <condition>, then: {next: [{step: <name>, args: {...}}]}}] and keep next for unconditional successors'],
    ]);
  });
});

describe('args in next (spec Errors §3)', () => {
  const doc = (next: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: t}
workflow:
  - step: start
${next}
  - step: b
`;

  it('allows args inside then.next entries and inside structural {step, args} targets', () => {
    const r = parsePlaybook(doc(`    next: [{step: b, args: {n: 1}}]
    case:
      - when: "{{ event.name == 'step.exit' }}"
        then:
          next: [{step: b, args: {n: 2}}]`));
    expect(r.errors).toEqual([]);
    expect(r.playbook?.workflow[0].next).toEqual([{ step: 'b', args: { n: 1 } }]);
  });

  it('rejects args as a top-level key of a structural next', () => {
    expect(parsePlaybook(doc('    next: {step: b, args: {n: 1}}')).errors.map((e) => e.path)).toEqual(['workflow[0].next.args']);
    expect(parsePlaybook(doc('    next: [b, {args: {n: 1}}]')).errors.map((e) => e.path)).toEqual(['workflow[0].next[1].args']);
  });
});

describe('reference warnings', () => {
  const warnings = (workflow: string, head = '') =>
    parsePlaybook(`apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: w}\n${head}workflow:\n${workflow}`).warnings.map((w) => [w.path, w.message]);

  it('flags case conditions on events that never fire', () => {
    expect(
      warnings(`  - step: start
    tool: {kind: http, endpoint: e}
    case:
      - when: "{{ event.name == 'call.finished' }}"
        then: {skip: true}
      - when: "event.name == 'call.done'"
        then: {skip: true}
`),
    ).toEqual([['workflow[0].case[0].when', "event 'call.finished' never fires; case conditions see step.enter, call.done, step.exit, worker.done"]]);
  });

  it('flags keychain references that are not declared', () => {
    expect(
      warnings(
        `  - step: start
    tool: {kind: http, endpoint: e, headers: {A: "{{ keychain.tok.access_token }}", B: "{{ keychain['other'].v }}", C: "keychain.x in text"}}
`,
        'keychain:\n  - {name: tok, kind: oauth2, endpoint: https://auth}\n',
      ),
    ).toEqual([['workflow[0].tool.headers.B', "keychain entry 'other' is not declared in the keychain section"]]);
  });

  it('flags the loop iterator in structural next args but not in the tool', () => {
    expect(
      warnings(`  - step: start
    loop: {in: [1, 2], iterator: n}
    tool: {kind: python, code: "result = {{ n }}"}
    next: [{step: after, args: {last: "{{ n }}", all: "{{ start }}"}}]
  - step: after
`),
    ).toEqual([['workflow[0].next[0].args.last', expect.stringContaining("the loop iterator 'n' is not available in next args")]]);
  });

  it('flags step names that hide template variables or are not identifiers', () => {
    expect(warnings('  - step: payload\n    next: load-data\n  - step: load-data\n').map(([p]) => p)).toEqual(['workflow[0].step', 'workflow[1].step']);
  });
});

describe('template checks', () => {
  it('stop after MAX_CHECKED_TEMPLATES templates with a warning, so the verdict does not depend on the machine', async () => {
    const { MAX_CHECKED_TEMPLATES } = await import('./template-check.js');
    const list = Array.from({ length: MAX_CHECKED_TEMPLATES }, () => '"{{ payload.x }}"');
    const text = (extra: string) =>
      `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkflow:\n  - step: a\n    args:\n      broken: "{{ oops }"\n      many: [${list.join(', ')}${extra}]\n`;
    expect(parsePlaybook(text('')).errors.map((e) => e.path)).toEqual(['workflow[0].args.broken']);
    const r = parsePlaybook(text(', "{{ late }"'));
    expect(r.errors.map((e) => e.path)).toEqual(['workflow[0].args.broken']);
    expect(r.warnings).toEqual([
      { path: `workflow[0].args.many[${MAX_CHECKED_TEMPLATES - 1}]`, severity: 'warning', message: `template checks stopped after ${MAX_CHECKED_TEMPLATES} templates; the rest are checked when they render` },
    ]);
  });

  it('warns that workload templates are not rendered, without judging their syntax', () => {
    const r = parsePlaybook('apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkload: {a: "{{ payload.x }", b: plain}\nworkflow: [{step: a}]\n');
    expect(r.errors).toEqual([]);
    expect(r.warnings.map((w) => [w.path, w.message.split(':')[0]])).toEqual([['workload.a', 'workload values are not rendered']]);
  });
});

describe('python code shapes', () => {
  const issuesFor = (code: unknown) => validatePlaybook(playbook([{ step: 'a', tool: code === undefined ? { kind: 'python' } : { kind: 'python', code: code as string } }])).map((i) => [i.severity, i.message.split(' ').slice(0, 4).join(' ')]);

  it('accepts def main(...) and a body assigning result', () => {
    expect(issuesFor('import json\ndef main(rows):\n    return json.dumps(rows)\n')).toEqual([]);
    expect(issuesFor('total = sum(rows)\nresult = {"total": total}\n')).toEqual([]);
    expect(issuesFor('result: dict = {}\n')).toEqual([]);
    expect(issuesFor('{{ workload.code }}')).toEqual([]);
  });

  it('warns about a body without result and about imports in a plain body', () => {
    expect(issuesFor('total = 1\nif result == 2: pass\n')).toEqual([['warning', 'python code neither defines']]);
    expect(issuesFor('import requests\nresult = requests.get("x").json()\n')).toEqual([['warning', 'a plain python body']]);
  });

  it('requires code', () => {
    expect(issuesFor(undefined)).toEqual([['error', "a python tool needs"]]);
  });
});

describe('fields a tool kind cannot run without', () => {
  const errors = (workflow: string, head = 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\n') =>
    parsePlaybook(`${head}workflow:\n${workflow}`).errors.map((e) => [e.path, e.message]);

  it('refuses an http tool without endpoint (or url)', () => {
    expect(errors('  - step: start\n    tool: {kind: http, method: GET, params: {q: 1}}\n')).toEqual([
      ['workflow[0].tool.endpoint', "an http tool needs 'endpoint' (or its synonym 'url'): the URL to call"],
    ]);
  });

  it('refuses a playbook tool without path', () => {
    expect(errors('  - step: start\n    tool: {kind: playbook, args: {n: 1}}\n')).toEqual([
      ['workflow[0].tool.path', "a playbook tool needs 'path': the catalog path of the playbook to run"],
    ]);
  });

  it('refuses a postgres tool without SQL or a table write, and a duckdb tool likewise', () => {
    expect(errors('  - step: start\n    tool: {kind: postgres, auth: pg, args: [1]}\n    next: q\n  - step: q\n    tool: {kind: duckdb, database: /tmp/x.duckdb}\n')).toEqual([
      ['workflow[0].tool.command', "a postgres tool needs 'command' (or its synonym 'query'): the SQL to run, or 'table' with args for a table write"],
      ['workflow[1].tool.query', "a duckdb tool needs 'query' (or 'command'): the SQL to run, or 'table' with args for a table write"],
    ]);
  });

  it('checks workbook task tools, legacy call and v1 inline tools and sinks at the path the author writes', () => {
    expect(
      errors(`  - step: start
    call: {type: http, args: {method: GET}}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink: {tool: {kind: postgres, auth: pg}, args: {a: 1}}
    next: wb
  - step: wb
    tool: {kind: workbook, name: child}
`, 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkbook:\n  - {name: child, tool: {kind: playbook, args: {n: 1}}}\n'),
    ).toEqual([
      ['workbook[0].tool.path', "a playbook tool needs 'path': the catalog path of the playbook to run"],
      ['workflow[0].call.args.endpoint', "an http tool needs 'endpoint' (or its synonym 'url'): the URL to call"],
      ['workflow[0].case[0].then.sink.command', "a postgres sink needs 'command' (or its synonym 'query'): the SQL to run, or 'table' with args for a table write"],
    ]);
    expect(errors('  - step: start\n    type: duckdb\n    database: x.duckdb\n    comand: SELECT 1\n', 'apiVersion: noetl.io/v1\nkind: Playbook\nmetadata: {name: t}\n')).toEqual([
      ['workflow[0].query', "a duckdb tool needs 'query' (or 'command'): the SQL to run, or 'table' with args for a table write; 'comand' is not one of its fields: did you mean 'command'?"],
    ]);
  });

  it('reports a misspelt or misplaced field once, where it is written', () => {
    expect(errors('  - step: start\n    tool: {kind: http, endpiont: "https://e"}\n')).toEqual([
      ['workflow[0].tool.endpiont', "unknown field 'endpiont' in 'tool' of step 'start'; did you mean 'endpoint'?"],
    ]);
    expect(errors('  - step: start\n    tool: {kind: http}\n    url: "https://e"\n').map(([p]) => p)).toEqual(['workflow[0].url']);
  });

  it('accepts every form that provides the field: synonyms, templates, table writes, scripts, legacy and reference forms', () => {
    expect(
      errors(`  - step: start
    tool: {kind: http, url: "{{ workload.base }}/x", auth: api}
    next: pg
  - step: pg
    tool: {kind: postgres, auth: "{{ workload.pg }}", query: "{{ workload.sql }}"}
    next: table
  - step: table
    tool: {kind: postgres, auth: pg, table: t, args: {a: 1}}
    next: script
  - step: script
    tool: {kind: postgres, auth: pg, script: {path: sql/load.sql}}
    next: duck
  - step: duck
    tool: {kind: duckdb, command: SELECT 1}
    next: child
  - step: child
    tool: {kind: playbook, path: "{{ workload.child }}"}
    next: op
  - step: op
    call: {type: http.get, args: {url: "https://e"}}
    next: ref
  - step: ref
    tool: http
    url: "https://e"
`, 'apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\n'),
    ).toEqual([]);
    expect(
      errors(`  - step: start
    type: postgres
    sql: SELECT 1
    next: dd
  - step: dd
    type: duckdb
    sql: SELECT 1
    next: sub
  - step: sub
    type: playbooks
    path: child/x
`, 'apiVersion: noetl.io/v1\nkind: Playbook\nmetadata: {name: t}\n'),
    ).toEqual([]);
  });
});

describe('loop and retry need a tool', () => {
  const errors = (workflow: string) => parsePlaybook(`apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkflow:\n${workflow}`).errors.map((e) => [e.path, e.message]);

  it('refuses loop and retry on a step without a tool', () => {
    expect(errors(`  - step: start
    loop: {in: [1, 2], iterator: n}
    next: again
  - step: again
    retry: [{when: "{{ error }}", then: {max_attempts: 2}}]
`)).toEqual([
      ['workflow[0].loop', "loop runs the step's tool once per item, but this step has no tool, so the loop would be ignored; give the step a tool or remove loop"],
      ['workflow[1].retry', "retry re-runs the step's tool call, but this step has no tool, so the retry policies would be ignored; give the step a tool or remove retry"],
    ]);
  });

  it('does not add to the error of a tool that could not be read', () => {
    expect(errors('  - step: start\n    call: {type: ftp.upload, args: {}}\n    loop: {in: [1]}\n').map(([p]) => p)).toEqual(['workflow[0].call.type']);
    expect(errors('  - step: start\n    type: http\n    loop: {in: [1]}\n').map(([p]) => p)).toEqual(['workflow[0].type']);
  });
});

describe('retry and pagination settings', () => {
  const errors = (workflow: string) => parsePlaybook(`apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkflow:\n${workflow}`).errors.map((e) => [e.path, e.message]);

  it('refuses negative literal counts and delays, naming the field', () => {
    expect(
      errors(`  - step: start
    tool: {kind: http, endpoint: "https://e"}
    loop:
      pagination: {type: response_based, continue_while: "{{ true }}", merge_strategy: append, max_iterations: -1, retry: {max_attempts: "-2", initial_delay: -0.5, max_delay: -60}}
    retry:
      - when: "{{ error }}"
        then: {max_attempts: -3, initial_delay: -1, backoff_multiplier: -2}
      - {when: "{{ response.more }}", then: {max_attempts: 0, initial_delay: 0, max_delay: 0}}
    case:
      - when: "{{ event.name == 'call.done' and error is defined }}"
        then: {retry: {max_attempts: -1, max_delay: -5}}
`),
    ).toEqual([
      ['workflow[0].loop.pagination.max_iterations', 'max_iterations must not be negative, got -1'],
      ['workflow[0].loop.pagination.retry.max_attempts', 'max_attempts must not be negative, got -2'],
      ['workflow[0].loop.pagination.retry.initial_delay', 'initial_delay must not be negative, got -0.5'],
      ['workflow[0].loop.pagination.retry.max_delay', 'max_delay must not be negative, got -60'],
      ['workflow[0].case[0].then.retry.max_attempts', 'max_attempts must not be negative, got -1'],
      ['workflow[0].case[0].then.retry.max_delay', 'max_delay must not be negative, got -5'],
      ['workflow[0].retry[0].then.max_attempts', 'max_attempts must not be negative, got -3'],
      ['workflow[0].retry[0].then.backoff_multiplier', 'backoff_multiplier must not be negative, got -2'],
      ['workflow[0].retry[0].then.initial_delay', 'initial_delay must not be negative, got -1'],
    ]);
  });

  it('refuses them in the legacy retry forms too, and leaves templates to the engine', () => {
    expect(errors(`  - step: start
    tool: {kind: http, endpoint: "https://e"}
    retry: {on_error: {max_attempts: -1, initial_delay: "{{ workload.delay }}"}}
    next: b
  - step: b
    tool: {kind: http, endpoint: "https://e"}
    retry: {when: "{{ error }}", max_attempts: "{{ workload.n }}", backoff_multiplier: -1}
`)).toEqual([
      ['workflow[0].retry.on_error.max_attempts', 'max_attempts must not be negative, got -1'],
      ['workflow[1].retry.backoff_multiplier', 'backoff_multiplier must not be negative, got -1'],
    ]);
  });
});
