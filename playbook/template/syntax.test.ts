import { describe, expect, it } from 'vitest';
import { evalCondition, evalExpression, renderString } from './index.js';

const ctx = { n: 3, s: 'abc', list: [1, 2, 3], obj: { a: 1, k: 'v' }, nul: null, t: true, f: false, zero: 0, empty: [], emptyObj: {}, str5: '5' };
const E = (expr: string) => evalExpression(expr, ctx);

describe('Jinja expression constructs', () => {
  it('is defined / is not defined / is none / is not none', () => {
    expect(E('n is defined')).toBe(true);
    expect(E('nope is defined')).toBe(false);
    expect(E('nope is not defined')).toBe(true);
    expect(E('nul is none')).toBe(true);
    expect(E('n is none')).toBe(false);
    expect(E('nul is not none')).toBe(false);
    expect(E('nope is none')).toBe(false);
  });
  it('in / not in over lists, dicts (keys) and strings', () => {
    expect(E('2 in list')).toBe(true);
    expect(E('5 not in list')).toBe(true);
    expect(E("'a' in obj")).toBe(true);
    expect(E("'z' in obj")).toBe(false);
    expect(E("'bc' in s")).toBe(true);
    expect(E("'x' not in s")).toBe(true);
    expect(E('[1, 2] in [[1, 2], [3]]')).toBe(true);
  });
  it('inline if/else, with and without else', () => {
    expect(E("'big' if n > 2 else 'small'")).toBe('big');
    expect(E("'big' if n > 5 else 'small'")).toBe('small');
    expect(E("'yes' if f")).toBe('');
  });
  it('and / or / not return Python values and short-circuit', () => {
    expect(E('t and n')).toBe(3);
    expect(E('f or s')).toBe('abc');
    expect(E('zero or empty or "last"')).toBe('last');
    expect(E('not empty')).toBe(true);
    expect(E('not list')).toBe(false);
    expect(E('nope is defined and nope.x > 1')).toBe(false);
    expect(E('n or nope.x.y')).toBe(3);
  });
  it('comparisons, including chained and mixed numbers', () => {
    expect(E('n == 3 and n != 4 and n >= 3 and n <= 3 and n > 2 and n < 4')).toBe(true);
    expect(E('1 < n < 5')).toBe(true);
    expect(E('1 < n < 2')).toBe(false);
    expect(E('3 == 3.0')).toBe(true);
    expect(E("'a' < 'b'")).toBe(true);
  });
  it('== is Python equality: no string/number coercion, deep for lists and dicts', () => {
    expect(E("str5 == 5")).toBe(false);
    expect(E('str5 | int == 5')).toBe(true);
    expect(E('[1, 2] == [1, 2]')).toBe(true);
    expect(E("{'a': 1} == {'a': 1}")).toBe(true);
    expect(E("obj == {'a': 1, 'k': 'v'}")).toBe(true);
    expect(E('nul == none')).toBe(true);
  });
  it('arithmetic: + - * / // % ** and unary minus', () => {
    expect(E('n + 2')).toBe(5);
    expect(E('n - 5')).toBe(-2);
    expect(E('n * 2')).toBe(6);
    expect(E('7 / 2')).toBe(3.5);
    expect(E('7 // 2')).toBe(3);
    expect(E('-7 // 2')).toBe(-4);
    expect(E('7 % 3')).toBe(1);
    expect(E('-7 % 3')).toBe(2);
    expect(E('2 ** 10')).toBe(1024);
    expect(E('-n')).toBe(-3);
    expect(E('(n + 1) * 2')).toBe(8);
  });
  it('+ joins lists and strings; a string and a number do not add', () => {
    expect(E('list + [4]')).toEqual([1, 2, 3, 4]);
    expect(E("s + 'd'")).toBe('abcd');
    expect(() => E("s + 1")).toThrow(/use '~'/);
  });
  it('string concatenation with ~ converts operands', () => {
    expect(E("s ~ '-' ~ n ~ '-' ~ t")).toBe('abc-3-true');
    expect(renderString('{{ "id-" ~ n }}', ctx)).toBe('id-3');
  });
  it('string % formatting', () => {
    expect(E("'%s has %d items (%.1f%%)' % (s, 3, 12.345)")).toBe('abc has 3 items (12.3%)');
    expect(E("'%s!' % s")).toBe('abc!');
  });
  it('subscripts: index, negative index, key, slices', () => {
    expect(E('list[0]')).toBe(1);
    expect(E('list[-1]')).toBe(3);
    expect(E("obj['k']")).toBe('v');
    expect(E('s[1]')).toBe('b');
    expect(E('list[1:]')).toEqual([2, 3]);
    expect(E('list[:-1]')).toEqual([1, 2]);
    expect(E('list[::-1]')).toEqual([3, 2, 1]);
    expect(E('s[::2]')).toBe('ac');
  });
  it('Python literals True/False/None and lowercase forms', () => {
    expect(E('True and not False')).toBe(true);
    expect(E('None is none')).toBe(true);
    expect(E('true and not false')).toBe(true);
  });
  it('filters chain inside expressions', () => {
    expect(E('list | map("string") | join("-") | upper')).toBe('1-2-3');
  });
  it('tests with arguments', () => {
    expect(E('n is divisibleby(3)')).toBe(true);
    expect(E('n is odd')).toBe(true);
    expect(E("s is string and n is number and obj is mapping and list is sequence")).toBe(true);
    expect(E('n is equalto(3)')).toBe(true);
    expect(E('(1, 2)')).toEqual([1, 2]);
  });
  it('Jinja test forms: one argument without parentheses, is in, is true/false/none, is not', () => {
    expect(E('n is divisibleby 3')).toBe(true);
    expect(E('n is not divisibleby 2')).toBe(true);
    expect(E('n is in [1, 3]')).toBe(true);
    expect(E("s is in 'xabcx'")).toBe(true);
    expect(E('f is sameas false')).toBe(true);
    expect(E('t is true and nul is none and f is false')).toBe(true);
    expect(E('nul is None and t is True and f is False and n is not None')).toBe(true);
    expect(E('n is gt 2 and n is ge 3 and n is lt 4')).toBe(true);
    expect(E('n is defined and n is number')).toBe(true);
    expect(E("'y' if n is odd else 'n'")).toBe('y');
    expect(E("list | select('odd') | list")).toEqual([1, 3]);
  });
  it('an unknown test is a syntax error, even in conditions', () => {
    expect(() => evalCondition('n is nosuchtest', ctx)).toThrow(/unknown test 'nosuchtest'/);
  });
  it('regular expression literals (a nunjucks extension) are refused', () => {
    expect(() => E('r/a+/')).toThrow(/regular expression/);
  });
  it('Python truthiness in conditions: empty list/dict/string and zero are false', () => {
    expect(evalCondition('empty', ctx)).toBe(false);
    expect(evalCondition('emptyObj', ctx)).toBe(false);
    expect(evalCondition('zero', ctx)).toBe(false);
    expect(evalCondition('list', ctx)).toBe(true);
    expect(evalCondition('obj', ctx)).toBe(true);
    expect(evalCondition("''", ctx)).toBe(false);
  });
  it('conditions accept both a bare expression and a {{ }} template', () => {
    expect(evalCondition('n > 2', ctx)).toBe(true);
    expect(evalCondition('{{ n > 2 }}', ctx)).toBe(true);
    expect(evalCondition('{{ n > 5 }}', ctx)).toBe(false);
  });
  it('a condition rendered as text ("false") is not mistaken for true', () => {
    expect(evalCondition('{{ n > 5 }} ', ctx)).toBe(false);
    expect(evalCondition('{% if n > 5 %}true{% else %}false{% endif %}', ctx)).toBe(false);
    expect(evalCondition('{% if n > 2 %}true{% else %}false{% endif %}', ctx)).toBe(true);
    expect(evalCondition('{{ n > 5 }}{{ "" }}', ctx)).toBe(false);
  });
  it('a whole-expression string value keeps Python truthiness', () => {
    expect(evalCondition('{{ "false" }}', ctx)).toBe(true);
    expect(evalCondition('{{ "" }}', ctx)).toBe(false);
  });
  it('globals range, cycler, joiner are usable', () => {
    expect(E('range(3)')).toEqual([0, 1, 2]);
    expect(renderString('{% set c = cycler("a", "b") %}{{ c.next() }}{{ c.next() }}{{ c.next() }}', ctx)).toBe('aba');
    expect(renderString('{% set j = joiner(",") %}{% for x in list %}{{ j() }}{{ x }}{% endfor %}', ctx)).toBe('1,2,3');
  });
  it('macros and for-else work', () => {
    expect(renderString('{% macro tag(x) %}<{{ x }}>{% endmacro %}{{ tag(s) }}', ctx)).toBe('<abc>');
    expect(renderString('{% for x in empty %}{{ x }}{% else %}none{% endfor %}', ctx)).toBe('none');
  });
  it('for over a dict iterates its keys (Jinja); two targets iterate pairs (nunjucks)', () => {
    expect(renderString('{% for k in obj %}{{ k }};{% endfor %}', ctx)).toBe('a;k;');
    expect(renderString('{% for k, v in obj %}{{ k }}={{ v }};{% endfor %}', ctx)).toBe('a=1;k=v;');
    expect(renderString('{% for x in list %}{{ x }}{% endfor %}', ctx)).toBe('123');
  });
  it('dict() and namespace() build dicts from keyword arguments', () => {
    expect(E("dict(a=1, b='x')")).toEqual({ a: 1, b: 'x' });
    expect(E('namespace(total=0).total')).toBe(0);
  });
  it('for over dict items with two targets and loop variables', () => {
    expect(renderString('{% for k, v in obj.items() %}{{ loop.index }}:{{ k }}={{ v }} {% endfor %}', ctx)).toBe('1:a=1 2:k=v ');
  });
});
