import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { redactUrl, redactUrlsDeep, redactUrlsIn } from './redact-url.js';
import { createLogger } from './logger.js';

describe('URL redaction', () => {
  it('masks userinfo, query values and fragment; keeps scheme, host, port, path and parameter names', () => {
    expect(redactUrl('https://user:pass@host:8443/p/a?api_key=k&page=2#t')).toBe('https://***@host:8443/p/a?api_key=***&page=***#***');
    expect(redactUrl('https://host/p')).toBe('https://host/p');
    expect(redactUrl('postgres://app:pw@db:5432/x')).toBe('postgres://***@db:5432/x');
    expect(redactUrl('/api/x?token=abc&flag')).toBe('/api/x?token=***&***');
    expect(redactUrl('https://host/users/a@b?x=1')).toBe('https://host/users/a@b?x=***');
    expect(redactUrl('http://:tok@h/')).toBe('http://***@h/');
  });

  it('finds URLs in text and leaves other text alone', () => {
    expect(redactUrlsIn('GET http://u:p@h/x?k=S failed: ECONNREFUSED.')).toBe('GET http://***@h/x?k=*** failed: ECONNREFUSED.');
    expect(redactUrlsIn('(see https://h/a?b=c), then "ftp://u:p@f/"')).toBe('(see https://h/a?b=***), then "ftp://***@f/"');
    expect(redactUrlsIn('no url ?k=v here')).toBe('no url ?k=v here');
  });

  it('walks objects and errors without copying what holds no URL', () => {
    const clean = { a: 'x', b: { c: 1 } };
    expect(redactUrlsDeep(clean)).toBe(clean);
    const out = redactUrlsDeep({ a: 'x', b: { url: 'http://u:p@h/?t=S' }, list: ['https://h/?q=S'] });
    expect(JSON.stringify(out)).not.toMatch(/S|u:p/);
    const err = redactUrlsDeep(new Error('fetch http://u:p@h/?t=S'));
    expect(err.message).toBe('fetch http://***@h/?t=***');
  });

  it('the logger redacts URLs in messages, fields and errors', () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'debug', destination: new Writable({ write(c, _e, cb) { lines.push(String(c)); cb(); } }) });
    log.debug({ url: 'https://u:SECRETPW@h/x?token=SECRETQ', nested: { err: new Error('to https://h/?k=SECRETQ') } }, 'GET https://h/?api_key=SECRETQ');
    log.warn('plain http://u:SECRETPW@h/');
    expect(lines).toHaveLength(2);
    expect(lines.join('')).not.toMatch(/SECRETPW|SECRETQ/);
    expect(lines[0]).toContain('https://***@h/x?token=***');
  });
});
