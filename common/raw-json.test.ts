import { describe, expect, it } from 'vitest';
import { RawJson, stringifyJson } from './raw-json.js';

describe('RawJson', () => {
  it('stringifyJson writes the text as it is, wherever the value sits', () => {
    // spaced as JSON.stringify never writes it: only the text itself can appear in the output
    const big = JSON.stringify({ rows: [{ id: 1, name: 'a "quoted" name' }, { id: 2, name: 'b' }] }, null, 1);
    const body = { events: [{ name: 'call.done', payload: { response: new RawJson(big), meta: { log: 'x' } } }], n: 2 };
    const text = stringifyJson(body);
    expect(text).toContain(big);
    expect(JSON.parse(text)).toEqual({ events: [{ name: 'call.done', payload: { response: JSON.parse(big), meta: { log: 'x' } } }], n: 2 });
    // several, and scalars
    const two = stringifyJson([new RawJson('1'), { a: new RawJson('"s"') }, new RawJson('[ true, null ]')]);
    expect(two).toBe('[1,{"a":"s"},[ true, null ]]');
  });

  it('a plain JSON.stringify gets the parsed value (correct where nobody expected a RawJson)', () => {
    expect(JSON.stringify({ a: new RawJson('{"b": [1, 2]}') })).toBe('{"a":{"b":[1,2]}}');
  });

  it('a string of the value that holds the mark itself cannot take the text\'s place', () => {
    // the mark, as a replacer sees it in place of a RawJson
    let mark = '';
    stringifyJson({ a: new RawJson('1') }, (k, v) => {
      if (k === 'a') mark = v as string;
      return v;
    });
    expect(mark.startsWith('\u0001raw-json:') && mark.endsWith(':0')).toBe(true);
    const text = stringifyJson({ log: mark, response: new RawJson('{"ok": true}') });
    expect(JSON.parse(text)).toEqual({ log: mark, response: { ok: true } });
    expect(text).toContain('{"ok":true}'); // serialised plainly
  });

  it('takes a replacer as JSON.stringify does', () => {
    expect(stringifyJson({ n: 10n, r: new RawJson('[ 1 ]') }, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))).toBe('{"n":"10","r":[ 1 ]}');
  });
});
