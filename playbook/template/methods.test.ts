import { describe, expect, it } from 'vitest';
import { evalCondition, evalExpression, renderString } from './index.js';

const ctx = {
  d: { a: 1, b: null, items: 'a field named items' },
  s: '  Mixed Case, text  ',
  csv: 'a,b,,c',
  list: [1, 2, 2, 3],
};
const E = (expr: string) => evalExpression(expr, ctx);

describe('Python-style methods on values', () => {
  it('dict.get(k) and dict.get(k, default)', () => {
    expect(E("d.get('a')")).toBe(1);
    expect(E("d.get('zz')")).toBeNull();
    expect(E("d.get('zz', 7)")).toBe(7);
    expect(E("d.get('b', 7)")).toBeNull();
  });
  it('dict.items(), .keys(), .values(), even when the dict has a key named items', () => {
    expect(E('d.items()')).toEqual([['a', 1], ['b', null], ['items', 'a field named items']]);
    expect(E('d.keys()')).toEqual(['a', 'b', 'items']);
    expect(E('d.values() | length')).toBe(3);
    expect(E('d.items')).toBe('a field named items');
  });
  it('str.upper(), .lower(), .strip(), .lstrip(), .rstrip()', () => {
    expect(E("'ab'.upper()")).toBe('AB');
    expect(E('s.lower()')).toBe('  mixed case, text  ');
    expect(E('s.strip()')).toBe('Mixed Case, text');
    expect(E('s.lstrip()')).toBe('Mixed Case, text  ');
    expect(E('s.rstrip()')).toBe('  Mixed Case, text');
    expect(E("'xxaxx'.strip('x')")).toBe('a');
  });
  it('str.split() with Python semantics', () => {
    expect(E("csv.split(',')")).toEqual(['a', 'b', '', 'c']);
    expect(E('s.split()')).toEqual(['Mixed', 'Case,', 'text']);
    expect(E("csv.split(',', 1)")).toEqual(['a', 'b,,c']);
    expect(E("'a b  c'.split(None, 1)")).toEqual(['a', 'b  c']);
  });
  it('str.startswith(), .endswith() (also with a list of prefixes)', () => {
    expect(E("csv.startswith('a,')")).toBe(true);
    expect(E("csv.endswith('c')")).toBe(true);
    expect(E("csv.startswith(['x', 'a'])")).toBe(true);
    expect(evalCondition("'http://x'.startswith('https')", ctx)).toBe(false);
  });
  it('str.replace() replaces every occurrence like Python (count optional)', () => {
    expect(E("csv.replace(',', ';')")).toBe('a;b;;c');
    expect(E("csv.replace(',', ';', 2)")).toBe('a;b;,c');
  });
  it("str.join(list) is Python's separator join", () => {
    expect(E("', '.join(['a', 'b'])")).toBe('a, b');
    expect(E("'-'.join(list | map('string'))")).toBe('1-2-2-3');
  });
  it('str.format(), .find(), .count(), .title(), .capitalize(), .isdigit(), .zfill()', () => {
    expect(E("'{} is {}'.format('x', 1)")).toBe('x is 1');
    expect(E("csv.find('b')")).toBe(2);
    expect(E("csv.count(',')")).toBe(3);
    expect(E("'ab cd'.title()")).toBe('Ab Cd');
    expect(E("'aB'.capitalize()")).toBe('Ab');
    expect(E("'123'.isdigit()")).toBe(true);
    expect(E("'7'.zfill(3)")).toBe('007');
  });
  it('list.count() and list.index()', () => {
    expect(E('list.count(2)')).toBe(2);
    expect(E('list.index(3)')).toBe(3);
  });
  it('methods chain with filters and attribute access', () => {
    expect(E("s.strip().split(',')[0].lower()")).toBe('mixed case');
    expect(renderString("{{ d.get('a', 0) + 1 }}/{{ csv.split(',') | length }}", ctx)).toBe('2/4');
  });
  it('calling an unknown method is an error in rendering and false in conditions', () => {
    expect(() => renderString('{{ d.nosuch() }}', ctx)).toThrow(/has no method 'nosuch'/);
    expect(evalCondition('d.nosuch()', ctx)).toBe(false);
  });
  it('calling a method on an undefined value names the value', () => {
    expect(() => renderString("{{ missing.get('x') }}", ctx)).toThrow(/'missing' is undefined/);
    expect(evalCondition("missing.get('x')", ctx)).toBe(false);
  });
  it('JavaScript spellings used by nunjucks authors still work', () => {
    expect(E("'Ab'.toUpperCase()")).toBe('AB');
    expect(E('list.length')).toBe(4);
    expect(E("csv.includes('b')")).toBe(true);
  });
});
