import { describe, expect, it } from 'vitest';
import { MAX_PLAYBOOK_BYTES, MAX_REPORTED_ISSUES, parsePlaybook, parsePlaybookObject } from './parse.js';

const minimal = `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: minimal}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
`;

/** A valid playbook of `n` chained http steps. */
function chain(n: number, target = (i: number) => `s${i + 1}`): string {
  const steps = Array.from({ length: n }, (_, i) =>
    [
      `  - step: s${i}`,
      `    desc: step number ${i} of a long generated chain`,
      `    tool: {kind: http, method: GET, endpoint: "https://api.example.com/items/${i}"}`,
      ...(i < n - 1 ? [`    next: ${target(i)}`] : []),
    ].join('\n'),
  );
  return `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: chain}\nworkflow:\n${steps.join('\n')}\n`;
}

describe('parsePlaybook', () => {
  it('parses a v2 document into the normalised playbook', () => {
    const r = parsePlaybook(minimal);
    expect(r.errors).toEqual([]);
    expect(r.playbook).toEqual({
      apiVersion: 'playflow.io/v2',
      kind: 'Playbook',
      metadata: { name: 'minimal' },
      workload: {},
      keychain: [],
      workbook: [],
      workflow: [{ step: 'start', tool: { kind: 'python', code: 'result = 1' } }],
    });
  });

  it('accepts JSON text, a subset of YAML', () => {
    const r = parsePlaybook(JSON.stringify({ apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata: { name: 'j' }, workflow: [{ step: 'a' }] }));
    expect(r.errors).toEqual([]);
    expect(r.playbook?.metadata.name).toBe('j');
  });

  it('reports invalid YAML with its line and column', () => {
    const r = parsePlaybook('apiVersion: playflow.io/v2\nkind: Playbook\nworkflow:\n  - step: a\n   tool: [unclosed\n');
    expect(r.playbook).toBeUndefined();
    expect(r.errors.length).toBeGreaterThan(0);
    for (const e of r.errors) expect(e.message).toMatch(/^invalid YAML at line \d+, column \d+: /);
    expect(r.errors[0].message).toMatch(/line 5, column/);
  });

  it('rejects duplicate keys, naming the line', () => {
    const r = parsePlaybook(`${minimal}metadata: {name: again}\n`);
    expect(r.errors[0].message).toMatch(/invalid YAML at line 7, column 1: .*unique/i);
  });

  it('rejects a stream of several documents', () => {
    const r = parsePlaybook(`${minimal}---\n${minimal}`);
    expect(r.playbook).toBeUndefined();
    expect(r.errors[0].message).toBe('invalid YAML at line 7, column 1: the file holds several YAML documents (---); a playbook is one document');
  });

  it('refuses alias expansion bombs instead of exhausting memory', () => {
    const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 12; i++) lines.push(`a${i}: &a${i} [${Array(10).fill(`*a${i - 1}`).join(', ')}]`);
    const r = parsePlaybook(lines.join('\n'));
    expect(r.playbook).toBeUndefined();
    expect(r.errors[0].message).toMatch(/invalid YAML: .*alias/i);
  });

  it.each([
    ['a list', '- step: a\n- step: b\n'],
    ['a string', 'just some text\n'],
    ['a number', '42\n'],
  ])('rejects a document that is %s', (what, text) => {
    const r = parsePlaybook(text);
    expect(r.playbook).toBeUndefined();
    expect(r.errors).toEqual([{ path: '', severity: 'error', message: expect.stringContaining(`got ${what}`) }]);
  });

  it.each([['empty', ''], ['whitespace', '  \n\n'], ['comments only', '# nothing here\n'], ['null', '~\n']])(
    'rejects an empty document (%s)',
    (_, text) => {
      const r = parsePlaybook(text);
      expect(r.errors).toEqual([{ path: '', severity: 'error', message: 'the playbook document is empty' }]);
    },
  );

  it('refuses a 5 MB document, naming its size and the limit', () => {
    const text = `${minimal}workload:\n  blob: "${'x'.repeat(5_000_000)}"\n`;
    const r = parsePlaybook(text);
    expect(r.playbook).toBeUndefined();
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0].message).toContain(`${Buffer.byteLength(text)} bytes`);
    expect(r.errors[0].message).toContain(`the limit is 2.0 MiB (${MAX_PLAYBOOK_BYTES} bytes)`);
  });

  it('counts bytes, not characters, against the limit', () => {
    const text = `${minimal}workload: {note: "${'é'.repeat(600)}"}\n`;
    expect(text.length).toBeLessThan(1024);
    expect(parsePlaybook(text, { maxBytes: 1024 }).errors[0].message).toMatch(/too large/);
    expect(parsePlaybook(text, { maxBytes: 4096 }).errors).toEqual([]);
  });

  it('parses a large document just under the limit', () => {
    // Few, fat steps: block scalars are cheap to scan, so this stays quick on a loaded machine.
    const code = Array.from({ length: 24 }, (_, i) => `        total_${i} = sum(row["amount_${i}"] for row in rows if row.get("amount_${i}") is not None)`).join('\n');
    const steps = Array.from({ length: 800 }, (_, i) => `  - step: s${i}\n    tool:\n      kind: python\n      code: |\n${code}\n${i < 799 ? `    next: s${i + 1}\n` : ''}`);
    const text = `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: fat}\nworkflow:\n${steps.join('')}`;
    const size = Buffer.byteLength(text);
    expect(size).toBeGreaterThan(1.5 * 1024 * 1024);
    expect(size).toBeLessThan(MAX_PLAYBOOK_BYTES);
    const r = parsePlaybook(text);
    expect(r.errors).toEqual([]);
    expect(r.playbook?.workflow).toHaveLength(800);
  });

  it('lists at most MAX_REPORTED_ISSUES problems and counts the rest', () => {
    const r = parsePlaybook(chain(3000, (i) => `missing_${i}`));
    expect(r.errors).toHaveLength(MAX_REPORTED_ISSUES + 1);
    expect(r.errors[0]).toMatchObject({ path: 'workflow[0].next', message: expect.stringContaining("'missing_0' is not a step") });
    expect(r.errors[MAX_REPORTED_ISSUES].message).toBe(`… and ${2999 - MAX_REPORTED_ISSUES} more errors`);
  });

  it('reports problems from every stage together', () => {
    const r = parsePlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: many}
workflow:
  - step: start
    when: "{{ true }}"
    next: nowhere
  - step: fetch
    tool: {kind: http, endpiont: x}
`);
    expect(r.errors.map((e) => e.path)).toEqual(['workflow[0].when', 'workflow[1].tool.endpiont', 'workflow[0].next']);
  });
});

describe('parsePlaybookObject', () => {
  it('parses an already decoded document', () => {
    const r = parsePlaybookObject({ apiVersion: 'noetl.io/v2', kind: 'Playbook', metadata: { name: 'o' }, workflow: [{ step: 'start' }] });
    expect(r.errors).toEqual([]);
    expect(r.playbook?.apiVersion).toBe('noetl.io/v2');
  });

  it.each([[null], [[]], ['text'], [7]])('rejects %j', (doc) => {
    const r = parsePlaybookObject(doc);
    expect(r.playbook).toBeUndefined();
    expect(r.errors[0].message).toMatch(/^a playbook must be a mapping/);
  });

  it('does not throw on structurally broken documents', () => {
    const broken = [
      { apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata: 'x', workflow: 'y' },
      { apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata: { name: 1 }, workflow: [null, 3, { step: 5, tool: 'http', loop: [], case: {}, next: 7, retry: 'x' }] },
      { apiVersion: 'playflow.io/v1', kind: 'Playbook', workflow: [{ step: 'a', type: 'http', next: [{ when: 3 }, { else: 'b' }] }] },
    ];
    for (const doc of broken) {
      const r = parsePlaybookObject(doc);
      expect(r.playbook).toBeUndefined();
      expect(r.errors.length).toBeGreaterThan(0);
      for (const e of r.errors) expect(e.message.length).toBeGreaterThan(5);
    }
  });
});

describe('fields the engine and worker read', () => {
  const doc = (steps: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: t, path: t/t }
workflow:
${steps}`;

  it('keeps backoff jitter on retry policies and case retry actions', () => {
    const r = parsePlaybook(doc(`  - step: start
    tool: { kind: http, endpoint: "http://x" }
    retry:
      - when: "{{ error.status == 503 }}"
        then: { max_attempts: 3, initial_delay: 0.5, jitter: 0 }
    case:
      - when: "{{ error.status == 500 }}"
        then:
          retry: { max_attempts: 2, jitter: false }`));
    expect(r.errors).toEqual([]);
    const step = r.playbook!.workflow[0];
    expect(step.retry![0].then.jitter).toBe(0);
    expect(step.case![0].then[0]).toEqual({ action: 'retry', max_attempts: 2, jitter: false });
  });

  it('accepts postgres and duckdb args as a list of bind parameters', () => {
    const r = parsePlaybook(doc(`  - step: start
    tool: { kind: postgres, auth: pg, command: "SELECT $1::int + $2::int AS s", args: [1, 2] }
    next: d
  - step: d
    tool: { kind: duckdb, query: "SELECT ? AS x", args: ["{{ start.rows[0].s }}"] }`));
    expect(r.errors).toEqual([]);
    expect(r.playbook!.workflow[0].tool!.args).toEqual([1, 2]);
  });

  it('accepts auth.inline as one template rendering to the connection object', () => {
    const r = parsePlaybook(doc(`  - step: start
    tool: { kind: postgres, command: "SELECT 1", auth: { type: postgres, inline: "{{ workload.pg }}" } }`));
    expect(r.errors).toEqual([]);
    const bad = parsePlaybook(doc(`  - step: start
    tool: { kind: postgres, command: "SELECT 1", auth: { type: postgres, inline: [1] } }`));
    expect(bad.errors.map((e) => e.path)).toContain('workflow[0].tool.auth.inline');
  });
});
