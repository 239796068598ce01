/** cli/output.ts: the table and key/value layouts, and the --output parser. */
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from 'commander';
import { parse as parseYaml } from 'yaml';
import { brief, fields, parseOutputFormat, table, toYaml } from '../../cli/output.js';

describe('parseOutputFormat', () => {
  it('accepts table, json, yaml (any case) and text as table; anything else names the allowed values', () => {
    expect(['table', 'JSON', 'yaml', 'text'].map(parseOutputFormat)).toEqual(['table', 'json', 'yaml', 'table']);
    expect(() => parseOutputFormat('yml')).toThrow(InvalidArgumentError);
    expect(() => parseOutputFormat('wide')).toThrow('unknown output format "wide"; allowed: table, json, yaml');
  });
});

describe('table', () => {
  it('upper-case headers, columns padded to the widest cell, two spaces apart, no trailing blanks', () => {
    expect(table(['name', 'type', 'value'], [['a', 'user_defined', 1], ['longer_name', null, 'x\ny']])).toBe(
      'NAME         TYPE          VALUE\n' +
      'a            user_defined  1\n' +
      'longer_name                x y\n',
    );
  });

  it('the empty message instead of a lone header', () => {
    expect(table(['a'], [], 'Nothing.')).toBe('Nothing.\n');
    expect(table(['a'], [])).toBe('A\n');
  });
});

describe('fields and brief', () => {
  it('aligns values after the longest key and leaves out undefined ones', () => {
    expect(fields([['Name', 'pg'], ['Access count', 3], ['Skipped', undefined], ['Empty', '']])).toBe('Name:          pg\nAccess count:  3\nEmpty:\n');
  });

  it('shortens long values with an ellipsis', () => {
    expect(brief({ a: 'x'.repeat(20) }, 10)).toBe('{"a":"xxx…');
    expect(brief('short')).toBe('short');
  });
});

describe('toYaml', () => {
  it('reads back to the same value: long strings, numeric strings, shared objects', () => {
    const shared = { k: 1 };
    const value = { id: '12', long: 'word '.repeat(40), a: shared, b: shared, n: null, list: [1, 'two'] };
    const text = toYaml(value);
    expect(text).not.toContain('&');
    expect(parseYaml(text)).toEqual(value);
  });
});
