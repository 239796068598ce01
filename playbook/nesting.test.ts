import { describe, expect, it } from 'vitest';
import { MAX_NESTING, valueDepth, yamlDepth } from './nesting.js';
import { parsePlaybook, parsePlaybookObject } from './parse.js';
import { parse } from 'yaml';

const header = 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: deep}\nworkflow: [{step: a}]\n';

describe('yamlDepth', () => {
  it('agrees with the depth of the decoded value for ordinary documents', () => {
    const text = `a:\n  b:\n    - c: [1, {d: [2]}]\n    - - x\n      - y\ne: {f: {g: 1}}\n`;
    expect(yamlDepth(text).depth).toBeGreaterThanOrEqual(valueDepth(parse(text)));
    expect(yamlDepth(text).depth).toBeLessThanOrEqual(valueDepth(parse(text)) + 1);
  });

  it('ignores brackets inside quoted strings and block scalars', () => {
    const text = `code: |\n  x = [[[[[[[[[[[[1]]]]]]]]]]]]\nq: "{{{{{{{{{{{{"\nr: '[[[[[[[[[['\n`;
    expect(yamlDepth(text).depth).toBeLessThanOrEqual(2);
  });

  it('counts flow brackets, indentation and compact sequence items', () => {
    const n = MAX_NESTING + 5;
    expect(yamlDepth(`x: ${'['.repeat(n)}${']'.repeat(n)}\n`).depth).toBeGreaterThan(MAX_NESTING);
    expect(yamlDepth(Array.from({ length: n }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n')).depth).toBeGreaterThan(MAX_NESTING);
    expect(yamlDepth(`${'- '.repeat(n)}x\n`).depth).toBeGreaterThan(MAX_NESTING);
  });
});

describe('deeply nested documents', () => {
  it.each([
    ['flow', `${header}workload: {x: ${'['.repeat(200_000)}${']'.repeat(200_000)}}\n`],
    ['JSON', `{"apiVersion": "playflow.io/v2", "kind": "Playbook", "metadata": {"name": "d"}, "workflow": [{"step": "a", "args": ${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}]}`],
    ['block', `${header}workload:\n${Array.from({ length: 1500 }, (_, i) => `${' '.repeat(i + 1)}k${i}:`).join('\n')} v\n`],
    ['compact sequences', `${header}workload:\n  x: \n${'  - '.repeat(300)}v\n`],
  ])('refuses %s nesting beyond the limit with a clear error, one after another in one process', (_, text) => {
    const r = parsePlaybook(text);
    expect(r.playbook).toBeUndefined();
    expect(r.errors).toEqual([{ path: '', severity: 'error', message: expect.stringMatching(/^playbook nests too deeply: more than 100 levels at line \d+; the limit is 100$/) }]);
  });

  it('refuses a deeply nested decoded document', () => {
    let v: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 50_000; i++) v = { v };
    const r = parsePlaybookObject({ apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata: { name: 'd' }, workload: v, workflow: [{ step: 'a' }] });
    expect(r.errors[0].message).toMatch(/^playbook nests too deeply/);
  });

  it('accepts nesting up to the limit', () => {
    const depth = MAX_NESTING - 10;
    const r = parsePlaybook(`${header}workload: {x: ${'['.repeat(depth)}${']'.repeat(depth)}}\n`);
    expect(r.errors).toEqual([]);
  });
});
