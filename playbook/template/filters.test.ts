import { describe, expect, it } from 'vitest';
import { evalExpression, renderString } from './index.js';

const ctx = {
  users: [
    { name: 'bo', age: 30, role: 'admin', tags: ['x'] },
    { name: 'al', age: 25, role: 'user' },
    { name: 'Cy', age: 35, role: 'admin', email: null },
  ],
  nums: [3, 1, 2, 3],
  words: ['b', 'A', 'c'],
  d: { b: 2, a: 1 },
  s: ' Hi There ',
  n: 3.14159,
  neg: -4,
  intStr: '42',
  floatStr: '2.5',
  bad: 'abc',
};
const E = (expr: string) => evalExpression(expr, ctx);

describe('filters', () => {
  it('int: strings, floats, defaults, base', () => {
    expect(E('intStr | int')).toBe(42);
    expect(E('floatStr | int')).toBe(2);
    expect(E('n | int')).toBe(3);
    expect(E('bad | int')).toBe(0);
    expect(E('bad | int(7)')).toBe(7);
    expect(E("'ff' | int(0, 16)")).toBe(255);
  });
  it('float', () => {
    expect(E('floatStr | float')).toBe(2.5);
    expect(E('intStr | float + 0.5')).toBe(42.5);
    expect(E('bad | float')).toBe(0);
  });
  it('string converts to text (JSON for dicts)', () => {
    expect(E('42 | string')).toBe('42');
    expect(E('d | string')).toBe('{"b":2,"a":1}');
    expect(E('(42 | string) ~ "x"')).toBe('42x');
  });
  it('length / count of lists, strings and dicts', () => {
    expect(E('users | length')).toBe(3);
    expect(E('s | length')).toBe(10);
    expect(E('d | length')).toBe(2);
    expect(E('nums | count')).toBe(4);
  });
  it('default / d, including boolean mode', () => {
    expect(E("missing | default('x')")).toBe('x');
    expect(E("none | default('x')")).toBe(null);
    expect(E("'' | default('x', true)")).toBe('x');
    expect(E("missing | d(5)")).toBe(5);
    expect(E("0 | d(5)")).toBe(0);
  });
  it('tojson (nunjucks lacks it) with indent; dump is the same', () => {
    expect(E('d | tojson')).toBe('{"b":2,"a":1}');
    expect(E('[1] | tojson(2)')).toBe('[\n  1\n]');
    expect(E("'a\"b' | tojson")).toBe('"a\\"b"');
    expect(E('d | dump')).toBe('{"b":2,"a":1}');
    expect(renderString('{"body": {{ d | tojson }}}', ctx)).toBe('{"body": {"b":2,"a":1}}');
  });
  it('from_json parses', () => {
    expect(E('\'{"a": [1]}\' | from_json')).toEqual({ a: [1] });
  });
  it('lower / upper / capitalize / title', () => {
    expect(E('s | lower')).toBe(' hi there ');
    expect(E('s | upper')).toBe(' HI THERE ');
    expect(E("'hELLO' | capitalize")).toBe('Hello');
    expect(E("'hello world' | title")).toBe('Hello World');
  });
  it('join, with attribute', () => {
    expect(E("words | join(',')")).toBe('b,A,c');
    expect(E('nums | join')).toBe('3123');
    expect(E("users | join(', ', attribute='name')")).toBe('bo, al, Cy');
  });
  it('first / last', () => {
    expect(E('nums | first')).toBe(3);
    expect(E('nums | last')).toBe(3);
    expect(E("'abc' | first")).toBe('a');
    expect(E('[] | first')).toBeUndefined();
  });
  it('round (common, floor, ceil, precision) and abs', () => {
    expect(E('n | round')).toBe(3);
    expect(E('n | round(2)')).toBe(3.14);
    expect(E("n | round(1, 'ceil')")).toBe(3.2);
    expect(E("n | round(0, 'floor')")).toBe(3);
    expect(E('2.5 | round')).toBe(3);
    expect(E('neg | abs')).toBe(4);
  });
  it('replace (all, or count) and trim', () => {
    expect(E("'a-b-c' | replace('-', '+')")).toBe('a+b+c');
    expect(E("'a-b-c' | replace('-', '+', 1)")).toBe('a+b-c');
    expect(E('s | trim')).toBe('Hi There');
    expect(E("'xxhixx' | trim('x')")).toBe('hi');
  });
  it('list: strings to chars, dicts to keys, copies lists', () => {
    expect(E("'ab' | list")).toEqual(['a', 'b']);
    expect(E('d | list')).toEqual(['b', 'a']);
    expect(E('nums | list')).toEqual([3, 1, 2, 3]);
  });
  it('sum, with attribute and start', () => {
    expect(E('nums | sum')).toBe(9);
    expect(E("users | sum(attribute='age')")).toBe(90);
    expect(E('nums | sum(start=10)')).toBe(19);
    expect(E("users | map(attribute='age') | sum")).toBe(90);
  });
  it('min / max, with attribute', () => {
    expect(E('nums | min')).toBe(1);
    expect(E('nums | max')).toBe(3);
    expect(E("(users | min(attribute='age')).name")).toBe('al');
    expect(E("(users | max(attribute='age')).name")).toBe('Cy');
  });
  it('unique', () => {
    expect(E('nums | unique | list')).toEqual([3, 1, 2]);
    expect(E("users | unique(attribute='role') | map(attribute='name') | list")).toEqual(['bo', 'al']);
  });
  it('sort: plain, reverse, case-insensitive by default, attribute=', () => {
    expect(E('nums | sort')).toEqual([1, 2, 3, 3]);
    expect(E('nums | sort(reverse=true)')).toEqual([3, 3, 2, 1]);
    expect(E('words | sort')).toEqual(['A', 'b', 'c']);
    expect(E("users | sort(attribute='age') | map(attribute='name') | list")).toEqual(['al', 'bo', 'Cy']);
    expect(E("users | sort(attribute='name') | map(attribute='name') | join(',')")).toBe('al,bo,Cy');
  });
  it('sort does not mutate its input', () => {
    E('nums | sort');
    expect(ctx.nums).toEqual([3, 1, 2, 3]);
  });
  it('selectattr / rejectattr with tests equalto, defined, none, truthiness', () => {
    expect(E("users | selectattr('role', 'equalto', 'admin') | map(attribute='name') | list")).toEqual(['bo', 'Cy']);
    expect(E("users | selectattr('role', '==', 'user') | map(attribute='name') | list")).toEqual(['al']);
    expect(E("users | selectattr('tags', 'defined') | map(attribute='name') | list")).toEqual(['bo']);
    expect(E("users | selectattr('email', 'none') | map(attribute='name') | list")).toEqual(['Cy']);
    expect(E("users | selectattr('tags') | list | length")).toBe(1);
    expect(E("users | rejectattr('role', 'equalto', 'admin') | map(attribute='name') | list")).toEqual(['al']);
    expect(E("users | selectattr('age', 'gt', 28) | map(attribute='name') | list")).toEqual(['bo', 'Cy']);
  });
  it('select / reject with tests', () => {
    expect(E("nums | select('odd') | list")).toEqual([3, 1, 3]);
    expect(E("nums | reject('odd') | list")).toEqual([2]);
    expect(E("[0, 1, '', 'a'] | select | list")).toEqual([1, 'a']);
  });
  it('map(attribute=), with default, and map(filter)', () => {
    expect(E("users | map(attribute='name') | list")).toEqual(['bo', 'al', 'Cy']);
    expect(E("users | map(attribute='tags.0', default='-') | list")).toEqual(['x', '-', '-']);
    expect(E("words | map('upper') | list")).toEqual(['B', 'A', 'C']);
    expect(E("['1', '2'] | map('int') | sum")).toBe(3);
  });
  it('items and dictsort', () => {
    expect(E('d | items | list')).toEqual([['b', 2], ['a', 1]]);
    expect(E('d | dictsort')).toEqual([['a', 1], ['b', 2]]);
    expect(E("d | dictsort(false, 'value', true)")).toEqual([['b', 2], ['a', 1]]);
  });
  it('b64encode / b64decode round trip (utf-8)', () => {
    expect(E("'user:pässword' | b64encode")).toBe(Buffer.from('user:pässword').toString('base64'));
    expect(E("'user:pässword' | b64encode | b64decode")).toBe('user:pässword');
  });
  it('reverse, batch, slice, flatten, groupby', () => {
    expect(E('[1, 2, 3] | reverse')).toEqual([3, 2, 1]);
    expect(E("'abc' | reverse")).toBe('cba');
    expect(E('[1, 2, 3] | batch(2)')).toEqual([[1, 2], [3]]);
    expect(E('[[1, [2]], [3]] | flatten')).toEqual([1, 2, 3]);
    expect(E("users | groupby('role') | map(attribute='grouper') | list")).toEqual(['admin', 'user']);
  });
  it('format (Jinja %-formatting), pprint, to_nice_json', () => {
    expect(E("'%s-%03d' | format('a', 7)")).toBe('a-007');
    expect(E("'%.2f%%' | format(n)")).toBe('3.14%');
    expect(E("'%(a)s+%(b)s' | format(a=1, b=2)")).toBe('1+2');
    expect(E('d | pprint')).toBe('{\n  "b": 2,\n  "a": 1\n}');
    expect(E('[1] | to_nice_json')).toBe('[\n    1\n]');
  });
  it('urlencode, truncate, bool, dict', () => {
    expect(E("{'q': 'a b', 'n': 1} | urlencode")).toBe('q=a%20b&n=1');
    expect(E("'hello world foo' | truncate(11)")).toBe('hello...');
    expect(E("'yes' | bool")).toBe(true);
    expect(E("[['a', 1]] | dict")).toEqual({ a: 1 });
  });
  it('filters other than default refuse an undefined input in rendering (no silent 0 or empty string), naming it', () => {
    expect(() => renderString('{{ missing | length }}', ctx)).toThrow(/undefined/);
    expect(() => renderString('{{ missing | upper }}', ctx)).toThrow(/undefined/);
    expect(() => renderString('{{ missing | int }}', ctx)).toThrow("filter 'int' applied to an undefined value ('missing' is undefined)");
    expect(() => renderString('x{{ missing | b64encode }}', ctx)).toThrow(/'missing' is undefined/);
    expect(E("missing | default('7') | int")).toBe(7);
  });
  it('random (non-deterministic) and regex filters (backtracking risk) are not available', () => {
    expect(() => E('nums | random')).toThrow(/random/);
    expect(() => E("'aaa' | regex_replace('(a+)+$', '')")).toThrow(/regex_replace/);
  });
});
