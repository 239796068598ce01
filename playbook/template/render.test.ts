import { describe, expect, it } from 'vitest';
import { TemplateError, cacheSize, cacheStats, setCacheLimit, checkTemplate, deferKeychain, evalCondition, evalExpression, referencesName, renderString, renderValue } from './index.js';
import type { Json } from '../types.js';

const ctx = {
  name: 'ada',
  n: 3,
  f: 1.5,
  list: [1, 2, 3],
  obj: { a: 1, b: { c: 'deep' } },
  nothing: null,
  flag: true,
  empty: [],
  emptyObj: {},
  s: '  Hello World  ',
};

function err(fn: () => unknown): TemplateError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(TemplateError);
    return e as TemplateError;
  }
  throw new Error('expected a TemplateError');
}

describe('native value rule (whole expression)', () => {
  it('a whole {{ expr }} renders to a list', () => {
    expect(renderString('{{ list }}', ctx)).toEqual([1, 2, 3]);
  });
  it('to a number, boolean, null and object', () => {
    expect(renderString('{{ n }}', ctx)).toBe(3);
    expect(renderString('{{ f * 2 }}', ctx)).toBe(3);
    expect(renderString('{{ flag }}', ctx)).toBe(true);
    expect(renderString('{{ nothing }}', ctx)).toBeNull();
    expect(renderString('{{ obj }}', ctx)).toEqual({ a: 1, b: { c: 'deep' } });
  });
  it('surrounding whitespace still counts as whole', () => {
    expect(renderString('  {{ list }}\n', ctx)).toEqual([1, 2, 3]);
  });
  it('`}}` inside a string literal does not break the whole-expression detection', () => {
    expect(renderString("{{ '}}' ~ name }}", ctx)).toBe('}}ada');
  });
  it('two expressions are not whole: they interpolate', () => {
    expect(renderString('{{ n }}{{ n }}', ctx)).toBe('33');
  });
  it('native results are copies: mutating them leaves the context intact', () => {
    const out = renderString('{{ obj }}', ctx) as { a: number };
    out.a = 99;
    expect(ctx.obj.a).toBe(1);
  });
  it('dict and list literals, Python None/True/False', () => {
    expect(renderString("{{ {'k': [1, None, True, False], 'n': none} }}", ctx)).toEqual({ k: [1, null, true, false], n: null });
  });
});

describe('interpolation', () => {
  it('interpolates strings and numbers', () => {
    expect(renderString('hi {{ name }} x{{ n }}', ctx)).toBe('hi ada x3');
  });
  it('objects and lists interpolate as JSON, never [object Object]', () => {
    expect(renderString('o={{ obj }} l={{ list }}', ctx)).toBe('o={"a":1,"b":{"c":"deep"}} l=[1,2,3]');
  });
  it('booleans as true/false, null as empty', () => {
    expect(renderString('{{ flag }}/{{ nothing }}/', ctx)).toBe('true//');
  });
  it('strings without template markers are returned untouched (fast path)', () => {
    expect(renderString('plain {text}', ctx)).toBe('plain {text}');
  });
  it('statements: if/for/set', () => {
    expect(renderString('{% for x in list %}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}', ctx)).toBe('1,2,3');
    expect(renderString('{% set y = n * 2 %}{{ y }}', ctx)).toBe('6');
    expect(renderString('{% if empty %}yes{% else %}no{% endif %}', ctx)).toBe('no');
  });
  it('comments render to nothing', () => {
    expect(renderString('a{# note #}b', ctx)).toBe('ab');
  });
});

describe('undefined rules', () => {
  it('a whole-expression template whose value is undefined names the variable and the field', () => {
    const e = err(() => renderString('{{ fetch.data.items }}', {}, { field: 'tool.params.items' }));
    expect(e.message).toBe("'{{ fetch.data.items }}' in tool.params.items: 'fetch' is undefined");
    expect(e.field).toBe('tool.params.items');
    expect(e.variable).toBe('fetch');
    expect(e.kind).toBe('undefined');
  });
  it('a missing attribute of a defined object names the path', () => {
    const e = err(() => renderString('{{ obj.b.missing }}', ctx, { field: 'args.x' }));
    expect(e.message).toContain("'obj.b' has no attribute 'missing'");
    expect(e.variable).toBe('obj.b.missing');
  });
  it('interpolated undefined is an error too (StrictUndefined), naming the variable', () => {
    const e = err(() => renderString('https://{{ host }}/x', ctx, { field: 'tool.endpoint' }));
    expect(e.message).toBe("'https://{{ host }}/x' in tool.endpoint: 'host' is undefined");
    expect(e.variable).toBe('host');
  });
  it('the variable named is the one of the failing {{ }}, not an earlier defaulted one', () => {
    const e = err(() => renderString("{{ a | default('x') }}-{{ b }}", ctx, { field: 'f' }));
    expect(e.variable).toBe('b');
  });
  it('{% if %} treats undefined as false (a condition); {% for %} over undefined is an error naming it', () => {
    expect(renderString('{% if missing %}a{% else %}b{% endif %}', ctx)).toBe('b');
    expect(err(() => renderString('{% for x in missing %}{{ x }}{% endfor %}', ctx)).variable).toBe('missing');
    expect(renderString('{% for x in missing | default([]) %}{{ x }}{% endfor %}.', ctx)).toBe('.');
  });
  it('undefined may be tested and defaulted without error', () => {
    expect(renderString('{{ missing is defined }}', ctx)).toBe(false);
    expect(renderString('{{ missing is not defined }}', ctx)).toBe(true);
    expect(renderString('{{ missing.deeper.still is defined }}', ctx)).toBe(false);
    expect(renderString("{{ missing | default('dflt') }}", ctx)).toBe('dflt');
    expect(renderString("{{ missing.x | d('dflt') }}", ctx)).toBe('dflt');
    expect(renderString('{{ missing.x if missing is defined else 0 }}', ctx)).toBe(0);
    expect(renderString('v={{ missing | default(n) }}', ctx)).toBe('v=3');
  });
  it('arithmetic and concatenation with undefined are errors in rendering, not NaN or "undefined", naming the variable', () => {
    const e1 = err(() => renderString('{{ missing + 1 }}', ctx, { field: 'f' }));
    expect(e1.message).toBe("'{{ missing + 1 }}' in f: '+' of an undefined value ('missing' is undefined)");
    expect(e1.variable).toBe('missing');
    const e2 = err(() => renderString("x{{ 'a' ~ obj.nope }}", ctx));
    expect(e2.message).toContain("'obj' has no attribute 'nope'");
    expect(e2.variable).toBe('obj.nope');
  });
  it('an expression that is undefined without a missing name says which expression', () => {
    const e = err(() => renderString('{{ empty | first }}', ctx, { field: 'f' }));
    expect(e.message).toBe("'{{ empty | first }}' in f: 'empty | first' is undefined");
    expect(e.kind).toBe('undefined');
  });
  it('an undefined subscript key names the key variable', () => {
    expect(err(() => renderString('{{ list[idx] }}', ctx)).variable).toBe('idx');
  });
  it('conditions: undefined is false, missing attributes of missing objects do not throw', () => {
    expect(evalCondition('missing', ctx)).toBe(false);
    expect(evalCondition('missing.a.b.c', ctx)).toBe(false);
    expect(evalCondition('missing.a > 1', ctx)).toBe(false);
    expect(evalCondition("'x' in missing", ctx)).toBe(false);
    expect(evalCondition('missing == 1', ctx)).toBe(false);
    expect(evalCondition('{{ missing.status in [500] }}', ctx)).toBe(false);
  });
  it('conditions: a YAML boolean (when: true) is accepted as is', () => {
    expect(evalCondition(true as unknown as string, ctx)).toBe(true);
    expect(evalCondition(false as unknown as string, ctx)).toBe(false);
  });
  it('conditions: not undefined is true (Jinja semantics)', () => {
    expect(evalCondition('not missing', ctx)).toBe(true);
  });
  it('conditions: a syntax error is not hidden as false', () => {
    const e = err(() => evalCondition('n >', ctx));
    expect(e.kind).toBe('syntax');
  });
  it('evalExpression returns undefined for undefined values, native values otherwise', () => {
    expect(evalExpression('missing.x', ctx)).toBeUndefined();
    expect(evalExpression('list[1:]', ctx)).toEqual([2, 3]);
    expect(evalExpression('{{ n + 1 }}', ctx)).toBe(4);
    expect(evalExpression('n={{ n }}', ctx)).toBe('n=3');
  });
});

describe('errors', () => {
  it('syntax errors name the field', () => {
    const e = err(() => renderString('{{ n + }}', ctx, { field: 'tool.params.page' }));
    expect(e.kind).toBe('syntax');
    expect(e.field).toBe('tool.params.page');
    expect(e.message).toMatch(/^'\{\{ n \+ \}\}' in tool\.params\.page: template syntax error: .* \(line 1, column \d+\)$/);
  });
  it('unclosed blocks are syntax errors', () => {
    expect(err(() => renderString('{% if n %}x', ctx, { field: 'f' })).kind).toBe('syntax');
  });
  it('unknown filters are syntax errors naming the filter, also in conditions', () => {
    const e = err(() => renderString('{{ n | nosuchfilter }}', ctx, { field: 'f' }));
    expect(e.message).toBe("'{{ n | nosuchfilter }}' in f: template syntax error: unknown filter 'nosuchfilter'");
    expect(e.kind).toBe('syntax');
    expect(() => evalCondition('n | nosuchfilter', ctx)).toThrow(/unknown filter/);
  });
  it('calling an undefined function names it', () => {
    const e = err(() => renderString('{{ nofn(1) }}', ctx, { field: 'f' }));
    expect(e.message).toContain("'nofn' is undefined");
  });
  it('include/import/extends are refused', () => {
    expect(err(() => renderString("{% include 'x.html' %}", ctx)).kind).toBe('syntax');
    expect(err(() => renderString("{% extends 'x.html' %}", ctx)).kind).toBe('syntax');
    expect(err(() => renderString("{% import 'x.html' as y %}", ctx)).kind).toBe('syntax');
  });
  it('checkTemplate validates without rendering', () => {
    expect(checkTemplate('{{ a.b | int }}')).toBeUndefined();
    expect(checkTemplate('error.status in [500]', { expression: true })).toBeUndefined();
    expect(checkTemplate('{{ a. }}', { field: 'x' })?.kind).toBe('syntax');
    expect(checkTemplate("{{ a['__proto__'] }}")?.kind).toBe('security');
  });
});

describe('renderValue', () => {
  it('renders objects and lists recursively with native values', () => {
    const v = { url: 'http://h/{{ name }}', params: { ids: '{{ list }}', n: '{{ n }}', lit: 5, t: true, z: null }, arr: ['{{ obj.b }}', 'x'] };
    expect(renderValue(v as Json, ctx)).toEqual({ url: 'http://h/ada', params: { ids: [1, 2, 3], n: 3, lit: 5, t: true, z: null }, arr: [{ c: 'deep' }, 'x'] });
  });
  it('errors carry the field path of nested values', () => {
    const e = err(() => renderValue({ tool: { params: { items: ['ok', '{{ fetch.data.items }}'] } } } as Json, {}, { field: 'step' }));
    expect(e.field).toBe('step.tool.params.items[1]');
    expect(e.message).toBe("'{{ fetch.data.items }}' in step.tool.params.items[1]: 'fetch' is undefined");
  });
  it('defer leaves matching strings untouched, even when their names are missing', () => {
    const v = { token: '{{ keychain.api.access_token }}', h: 'Bearer {{ keychain.api.access_token }}' };
    expect(renderValue(v, {}, { defer: deferKeychain, field: 'tool' })).toEqual(v);
  });
  it('defer: deferred strings are not evaluated, others are', () => {
    const v = { token: '{{ keychain.api.access_token }}', u: '{{ name }}' };
    expect(renderValue(v, ctx, { defer: deferKeychain })).toEqual({ token: '{{ keychain.api.access_token }}', u: 'ada' });
  });
  it('referencesName looks at expressions only', () => {
    expect(referencesName('{{ keychain.x.y }}', 'keychain')).toBe(true);
    expect(referencesName("{{ 'keychain' }} keychain", 'keychain')).toBe(false);
    expect(referencesName('{{ mykeychain.x }}', 'keychain')).toBe(false);
    expect(referencesName('{{ a | default(keychain.b) }}', 'keychain')).toBe(true);
  });
});

describe('compile cache', () => {
  it('reuses compiled templates', () => {
    const t = `{{ n + ${Math.random()} }}`;
    renderString(t, ctx);
    const before = { ...cacheStats };
    renderString(t, ctx);
    renderString(t, ctx);
    expect(cacheStats.hits - before.hits).toBe(2);
    expect(cacheStats.misses).toBe(before.misses);
  });
  it('is bounded', () => {
    setCacheLimit(200);
    try {
      for (let i = 0; i < 1000; i++) renderString(`{{ ${i} }}`, {});
      expect(cacheSize()).toBeLessThanOrEqual(200);
      expect(cacheSize()).toBeGreaterThanOrEqual(100);
    } finally {
      setCacheLimit();
    }
  });
  it('keeps templates in use while others come and go (LRU)', () => {
    setCacheLimit(200);
    try {
      const hot = `{{ n * ${Math.random()} }}`;
      renderString(hot, ctx);
      for (let i = 0; i < 1000; i++) {
        renderString(`{{ ${i} + 0.5 }}`, {});
        if (i % 50 === 0) renderString(hot, ctx);
      }
      const before = cacheStats.misses;
      renderString(hot, ctx);
      expect(cacheStats.misses).toBe(before);
      renderString('{{ 0 + 0.5 }}', {}); // used once, long ago: evicted
      expect(cacheStats.misses).toBe(before + 1);
    } finally {
      setCacheLimit();
    }
  });
  it('syntax errors are cached as errors and still thrown', () => {
    expect(err(() => renderString('{{ ( }}', {})).kind).toBe('syntax');
    expect(err(() => renderString('{{ ( }}', {})).kind).toBe('syntax');
  });
});
