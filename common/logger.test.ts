import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { createLogger } from './logger.js';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { lines, destination };
}

describe('createLogger', () => {
  it('redacts authorization headers and secret fields', () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination });
    log.info({ req: { headers: { authorization: 'Bearer abc' } } }, 'request');
    log.info({ body: { name: 'pg', data: { password: 'pw1' } } }, 'credential');
    log.info({ entry: { token_data: { access_token: 'tok-xyz' } }, password: 'pw2' }, 'keychain');
    log.info({ resource: { metadata: { name: 'pg' }, stringData: { DB_URL_PASS: 'pw3' } } }, 'operator read a Secret');
    const out = lines.join('');
    for (const secret of ['Bearer abc', 'pw1', 'tok-xyz', 'pw2', 'pw3']) expect(out).not.toContain(secret);
    expect(out).toContain('[redacted]');
    expect(out).toContain('"name":"pg"');
  });

  it('honours the level', () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination, level: 'warn' });
    log.info('hidden');
    log.warn('shown');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toMatchObject({ level: 'warn', msg: 'shown' });
  });
});
