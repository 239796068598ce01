/**
 * Untrusted templates must not reach process, require, globalThis or Function (DESIGN §8).
 * Each attack must fail with a TemplateError, and no attack may have an effect: a canary on
 * globalThis and the Node version are checked against every output.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import nunjucks from 'nunjucks';
import { TemplateError, buildContext, evalCondition, evalExpression, renderString, renderValue } from './index.js';

const g = globalThis as Record<string, unknown>;
const ctx = {
  s: 'str',
  n: 1,
  obj: { a: 1, nested: { b: 2 } },
  list: [{ a: 1 }, { a: 2 }],
  fn: (x: unknown) => x,
};

beforeAll(() => {
  g.__pf_canary = 'untouched';
});
afterAll(() => {
  delete g.__pf_canary;
});

// Every one of these is an attempt to reach JavaScript internals. Comments say what it tries.
const ATTACKS: string[] = [
  "{{ ''.constructor.constructor('return process')().version }}", // DESIGN §8's example
  "{{ ''['constructor']['constructor']('return process')().version }}", // subscript form
  "{{ ''['con' ~ 'structor']['con' ~ 'structor']('return process')() }}", // computed name
  "{% set c = 'constr' ~ 'uctor' %}{{ s[c][c]('return process')() }}", // name through a variable
  "{{ (s | attr('constructor'))('x') }}", // attr filter
  "{{ s | attr('con' ~ 'structor') }}", // attr with a computed name
  "{{ list | map(attribute='constructor') | list }}", // map(attribute=)
  "{{ list | map(attribute='a.constructor') | list }}", // dotted attribute path
  "{{ list | map('attr', 'constructor') | list }}", // map through the attr filter
  "{{ list | sort(attribute='constructor') }}", // sort(attribute=)
  "{{ list | selectattr('constructor') | list }}", // selectattr
  "{{ list | rejectattr('__proto__') | list }}", // rejectattr
  "{{ list | groupby('constructor') }}", // groupby
  "{{ list | sum(attribute='constructor') }}", // sum(attribute=)
  "{{ list | unique(attribute='__proto__') }}", // unique(attribute=)
  "{{ list | join(',', attribute='constructor') }}", // join(attribute=)
  "{{ range.constructor('return process')() }}", // global function's constructor
  "{{ range.call }}", // Function.prototype members
  "{{ range.apply(none, [1]) }}",
  "{{ range.bind }}",
  "{{ range.caller }}", // sloppy-mode caller leaks the compiled render function
  "{{ range.arguments }}",
  "{{ cycler(1, 2).next.constructor('return process')() }}", // method of a global's result
  "{{ cycler.constructor }}",
  "{{ joiner().constructor('return process')() }}", // a function returned by a global
  "{{ lipsum.constructor }}", // lipsum is not provided at all
  "{{ fn.constructor('return process')() }}", // a function placed in the context
  "{{ obj.__proto__ }}", // prototype access
  "{{ obj['__proto__'].constructor }}",
  "{{ obj.__lookupGetter__('__proto__') }}",
  "{{ obj.__defineGetter__('a', range) }}",
  "{{ obj.get('constructor') }}", // Python method with a refused key
  "{{ obj.toString.constructor('return process')() }}", // prototype method of a dict
  "{{ obj.valueOf().constructor }}",
  "{{ list.map.constructor }}", // Array.prototype.map
  "{{ list.items().constructor }}",
  "{{ s.sub }}", // String.prototype.sub (not a data member)
  "{{ 1.0.constructor }}",
  "{{ (1).toFixed.constructor }}",
  "{% macro m() %}x{% endmacro %}{{ m.constructor('return process')() }}", // a macro
  "{% macro m() %}x{% endmacro %}{{ m.caller }}",
  '{% set __proto__ = obj %}{{ constructor }}', // rebinding __proto__ of a frame
  '{{ constructor }}', // a bare name that objects inherit
  "{{ {'__proto__': range}.call }}", // dict literal with a __proto__ key
  '{{ process.version }}', // Node globals are not in the context
  "{{ require('fs') }}",
  '{{ globalThis.__pf_canary }}',
  '{{ global.process }}',
  '{{ Function("return process")() }}',
  "{{ this }}",
  '{{ runtime }}', // names of the compiled code's own variables
  '{{ context.env }}',
  '{{ env.globals }}',
  '{{ frame.parent }}',
  "{{ 'x' is constructor }}", // test lookup by a refused name
  "{{ s | constructor }}", // filter lookup by a refused name
  "{{ '{constructor}'.format(obj) }}", // Python str.format with a refused key
  "{{ '%(constructor)s' % obj }}", // % formatting with a refused key
  "{{ s }}{% set x = 1 %}{{ x.constructor }}",
  "{{ [['__proto__', 1]] | dict }}", // dict from pairs with a refused key
];

function attempt(t: string): { ok: boolean; out?: unknown; err?: unknown } {
  try {
    return { ok: true, out: renderString(t, ctx, { field: 'attack' }) };
  } catch (e) {
    return { ok: false, err: e };
  }
}

describe('sandbox: attack templates', () => {
  it(`has at least 10 attacks (${ATTACKS.length})`, () => {
    expect(ATTACKS.length).toBeGreaterThanOrEqual(10);
  });
  for (const t of ATTACKS) {
    it(`refuses ${t}`, () => {
      const r = attempt(t);
      // No attack renders: every one fails, as a TemplateError (never a raw JS error).
      expect(r.ok, `rendered to ${JSON.stringify(r.out)}`).toBe(false);
      expect(r.err).toBeInstanceOf(TemplateError);
      expect(String((r.err as Error).message)).not.toContain(process.version);
      expect(g.__pf_canary).toBe('untouched');
    });
  }
  it('refusals of member names say so (kind security)', () => {
    for (const t of ATTACKS.slice(0, 17)) {
      const r = attempt(t);
      expect((r.err as TemplateError).kind, t).toBe('security');
    }
  });
  it('the same attacks fail in conditions and in evalExpression', () => {
    expect(() => evalCondition("''.constructor.constructor('return process')().version", ctx)).toThrow(TemplateError);
    expect(() => evalCondition("s['con' ~ 'structor']", ctx)).toThrow(/not allowed/);
    expect(() => evalExpression("range.constructor('return process')()", ctx)).toThrow(/not allowed/);
  });
  it('renderValue refuses attacks anywhere in a nested value', () => {
    expect(() => renderValue({ a: [{ b: "{{ ''.constructor }}" }] }, ctx, { field: 'tool' })).toThrow(/tool\.a\[0\]\.b/);
  });
  it('step results cannot smuggle refused names through result views', () => {
    const c = buildContext({ steps: { s: { id: 1, status: 200, data: { constructor: 'x', __proto__: { polluted: true } } as never } } });
    expect(() => renderString('{{ s.constructor }}', c)).toThrow(/not allowed/);
    expect(() => renderString('{{ s.polluted }}', c)).toThrow(TemplateError);
  });
  it('string literals cannot inject code into the compiled template', () => {
    const t = '{{ "\\"); globalThis.__pf_canary = \'pwned\'; (\\"" }}';
    expect(renderString(t, ctx)).toBe('"); globalThis.__pf_canary = \'pwned\'; ("');
    expect(renderString('a{{ "\u2028\\n" }}b', ctx)).toBe('a\u2028\nb');
    expect(g.__pf_canary).toBe('untouched');
  });
  it('huge ranges and repeats are refused instead of exhausting memory', () => {
    expect(() => renderString('{{ range(10000000000) }}', ctx)).toThrow(/too large/);
    expect(() => renderString("{{ 'x' * 100000000000 }}", ctx)).toThrow(/too large/);
    expect(() => renderString('{{ [1, 2] * 10000000000 }}', ctx)).toThrow(/too large/);
    expect(() => renderString("{{ 'x' | center(1000000000) }}", ctx)).toThrow(/too large/);
    expect(() => renderString("{{ 'x'.zfill(1000000000) }}", ctx)).toThrow(/too large/);
    expect(() => renderString("{{ 'x'.ljust(1000000000) }}", ctx)).toThrow(/too large/);
    expect(() => renderString("{{ '%1000000000s' % 'x' }}", ctx)).toThrow(/too large/);
    expect(renderString("{{ 'x' | center(5) }}|{{ '7'.zfill(3) }}", ctx)).toBe('  x  |007');
  });
  it('nested loops that would run for hours are stopped by the loop budget', () => {
    expect(() => renderString('{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}', ctx)).toThrow(/exceed/);
    expect(() => renderString('{% for k, v in obj %}{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}{% endfor %}', ctx)).toThrow(/exceed/);
    // an ordinary loop is unaffected
    expect(renderString('{% for i in range(1000) %}{% endfor %}ok', ctx)).toBe('ok');
    expect(renderString('{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}ok', ctx)).toBe('ok');
  });
  it('unbounded macro recursion fails as a template error', () => {
    expect(() => renderString('{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}', ctx)).toThrow(TemplateError);
  });
});

describe('sandbox: legitimate data is not caught by the refusals', () => {
  it('JSON fields named call, apply, arguments, caller, import, global, process are ordinary data', () => {
    const data = { fn: { arguments: '{"q":1}', call: 'c', apply: 'a', caller: 'me' }, import: { rows: 2 }, global: 1, process: 'p' };
    expect(renderString('{{ fn.arguments }}|{{ fn.call }}|{{ fn.apply }}|{{ fn.caller }}', data)).toBe('{"q":1}|c|a|me');
    expect(renderString('{{ import.rows + global }}{{ process }}', data)).toBe('3p');
  });
  it('{% call %} blocks can use caller()', () => {
    expect(renderString('{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}x{% endcall %}', {})).toBe('[x]');
  });
  it('names with a single leading underscore (_retry) are allowed', () => {
    expect(renderString('{{ _retry.index }}', { _retry: { index: 1 } })).toBe(1);
  });
});

describe('sandbox: templates cannot change the data they read', () => {
  it('no filter, method or statement mutates the context', () => {
    const data = { l: [3, 1, 2], d: { b: 1, a: 2 }, nested: { list: [{ k: 2 }, { k: 1 }] } };
    const before = JSON.stringify(data);
    for (const t of [
      '{{ l | sort }}',
      '{{ l | reverse }}',
      '{{ l | batch(2, 0) }}',
      "{{ nested.list | sort(attribute='k') }}",
      '{{ d | dictsort }}',
      '{{ d.items() }}',
      '{{ d.copy() }}',
      '{{ l + [4] }}',
      '{% set l = [9] %}{{ l }}',
      '{% for x in l %}{% set y = x %}{% endfor %}',
      "{{ l | list }}{{ d | list }}{{ l | unique }}",
    ]) {
      renderString(t, data);
    }
    expect(JSON.stringify(data)).toBe(before);
  });
  it('a {% set %} in one render does not leak into the next', () => {
    const data = { a: 1 };
    expect(renderString('{% set a = 2 %}{{ a }}', data)).toBe('2');
    expect(renderString('{{ a }}', data)).toBe(1);
  });
});

describe('sandbox: the rest of the process is unaffected', () => {
  it('no prototype of Object, Array, String or Function gains members', () => {
    for (const t of ATTACKS) attempt(t);
    renderString("{{ obj.items() }}{{ s.upper() }}{{ list | map(attribute='a') | list }}{{ obj.get('a') }}", ctx);
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(Object.getOwnPropertyNames(Object.getPrototypeOf({})).sort());
    const o = { a: 1, b: 2 };
    const seen: string[] = [];
    for (const k in o) seen.push(k);
    expect(seen).toEqual(['a', 'b']);
    expect(Object.keys(o)).toEqual(['a', 'b']);
    expect(JSON.stringify({ a: [1, 'x'] })).toBe('{"a":[1,"x"]}');
    const arrKeys: string[] = [];
    for (const k in [1, 2]) arrKeys.push(k);
    expect(arrKeys).toEqual(['0', '1']);
    expect(Object.prototype.hasOwnProperty.call(Object.prototype, 'get')).toBe(false);
    expect(Object.prototype.hasOwnProperty.call(Array.prototype, 'items')).toBe(false);
    expect(Object.prototype.hasOwnProperty.call(String.prototype, 'upper')).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
  it("nunjucks' own runtime and default environment keep their behaviour", () => {
    renderString('{{ obj.a }}', ctx);
    // nunjucks' global runtime is not patched: its plain environment still renders JS-style.
    expect(nunjucks.renderString('{{ a.length }}-{{ "X".toLowerCase() }}', { a: [1, 2] })).toBe('2-x');
    expect(nunjucks.renderString('{{ None }}', {})).toBe('');
  });
});
