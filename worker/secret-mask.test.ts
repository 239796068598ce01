import { describe, expect, it } from 'vitest';
import { SecretMask } from './secret-mask.js';

describe('SecretMask', () => {
  it('masks every string of the data it is given, longest first, but not descriptive fields or short values', () => {
    const m = new SecretMask();
    m.add({ host: 'db.internal', port: 5432, user: 'svc_orders', password: 's3cret-pw', nested: { keys: ['abcd1234', 'abcd1234-and-more'] }, flag: 'on' });
    expect(m.text('user svc_orders at db.internal: bad password s3cret-pw (on)')).toBe('user *** at db.internal: bad password *** (on)');
    // the longer value is masked whole, not as `***-and-more`
    expect(m.text('k=abcd1234-and-more k2=abcd1234')).toBe('k=*** k2=***');
  });

  it('deep masks strings and keys of a JSON value and leaves the rest', () => {
    const m = new SecretMask();
    m.add({ access_token: 'tok-123456', token_type: 'Bearer' });
    expect(m.deep({ status: 401, data: { got: 'Bearer tok-123456', 'tok-123456': true, list: ['x tok-123456'] } }))
      .toEqual({ status: 401, data: { got: 'Bearer ***', '***': true, list: ['x ***'] } });
  });

  it("masks an Error's message (a tool logging `{ err }`)", () => {
    const m = new SecretMask();
    m.add({ password: 'pw-secret-1' });
    expect(m.deep({ err: new TypeError('login pw-secret-1 refused') })).toEqual({ err: { name: 'TypeError', message: 'login *** refused' } });
  });

  it('with nothing added, the value is returned as it is', () => {
    const m = new SecretMask();
    const v = { a: 'b' };
    expect(m.empty).toBe(true);
    expect(m.deep(v)).toBe(v);
  });
});
