import { describe, expect, it } from 'vitest';
import { globToRegExp, parseScope, scopeAllows } from './scope.js';

describe('credential scope', () => {
  it('globs: ** crosses segments, * and ? stay inside one, the rest is literal', () => {
    const m = (g: string, p: string) => globToRegExp(g).test(p);
    expect(m('team-a/**', 'team-a/x')).toBe(true);
    expect(m('team-a/**', 'team-a/x/y/z')).toBe(true);
    expect(m('team-a/**', 'team-ab/x')).toBe(false);
    expect(m('team-a/*', 'team-a/x/y')).toBe(false);
    expect(m('etl/load_?', 'etl/load_1')).toBe(true);
    expect(m('etl/load_?', 'etl/load_12')).toBe(false);
    expect(m('a.b/(c)', 'a.b/(c)')).toBe(true);
    expect(m('a.b/c', 'aXb/c')).toBe(false);
  });

  it('allows by path or by the owning namespace; no scope allows all', () => {
    const scope = parseScope({ paths: ['team-a/**'], namespaces: ['ops'] });
    expect(scopeAllows(scope, { path: 'team-a/x' })).toBe(true);
    expect(scopeAllows(scope, { path: 'team-b/x', namespace: 'ops' })).toBe(true);
    expect(scopeAllows(scope, { path: 'team-b/x', namespace: 'dev' })).toBe(false);
    expect(scopeAllows(scope, { path: 'team-b/x' })).toBe(false);
    expect(scopeAllows(null, { path: 'anything' })).toBe(true);
  });

  it('parses undefined (keep), null (remove), and refuses bad shapes naming the field', () => {
    expect(parseScope(undefined)).toBeUndefined();
    expect(parseScope(null)).toBeNull();
    expect(parseScope({ paths: ['a/*', 'a/*'] })).toEqual({ paths: ['a/*'] });
    expect(() => parseScope({ path: ['a'] })).toThrow(/unknown field\(s\) path/);
    expect(() => parseScope({ paths: [''] })).toThrow(/scope\.paths\[0\]/);
    expect(() => parseScope({ namespaces: ['UPPER'] })).toThrow(/scope\.namespaces\[0\]/);
    expect(() => parseScope({ paths: [], namespaces: [] })).toThrow(/at least one/);
    expect(() => parseScope('team-a/**')).toThrow(/scope must be an object/);
  });
});
