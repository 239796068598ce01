/**
 * The pieces of `playflow dev` that need no database: the generated encryption key file and the
 * log lines for a terminal.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadOrCreateDevKey } from '../../cli/dev/key.js';
import { formatLogLine, humanLogStream } from '../../cli/dev/log.js';
import { defaultDataDir } from '../../cli/dev/run.js';
import { Cipher, parseKey } from '../../server/crypto.js';

const tmp = mkdtempSync(join(tmpdir(), 'pf-devkey-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('dev encryption key', () => {
  it('generated once: 32 random bytes in a 0600 file, then reused', () => {
    const first = loadOrCreateDevKey(tmp);
    expect(first).toMatchObject({ created: true, file: join(tmp, 'encryption.key') });
    expect(statSync(first.file).mode & 0o777).toBe(0o600);
    expect(Buffer.from(first.key, 'base64')).toHaveLength(32);
    const again = loadOrCreateDevKey(tmp);
    expect(again).toEqual({ ...first, created: false });
    // A usable AES-256-GCM key, not the fixed development key.
    const cipher = new Cipher(parseKey(first.key));
    expect(cipher.decrypt(cipher.encrypt({ a: 1 }, 'credential'), 'credential')).toEqual({ a: 1 });
    // Another data dir, another key.
    expect(loadOrCreateDevKey(mkdir('other')).key).not.toBe(first.key);
  });

  it('a key file readable by others is narrowed to 0600', () => {
    const dir = mkdir('loose');
    const k = loadOrCreateDevKey(dir);
    chmodSync(k.file, 0o644);
    loadOrCreateDevKey(dir);
    expect(statSync(k.file).mode & 0o777).toBe(0o600);
  });

  it('a damaged key file is an error naming the file, never replaced', () => {
    const dir = mkdir('damaged');
    writeFileSync(join(dir, 'encryption.key'), 'not-a-key\n', { mode: 0o600 });
    expect(() => loadOrCreateDevKey(dir)).toThrow(join(dir, 'encryption.key'));
    expect(readFileSync(join(dir, 'encryption.key'), 'utf8')).toBe('not-a-key\n');
  });
});

describe('dev data dir', () => {
  it('PLAYFLOW_DEV_DIR, else ~/.playflow/dev', () => {
    expect(defaultDataDir({ PLAYFLOW_DEV_DIR: '/srv/pf' })).toBe('/srv/pf');
    expect(defaultDataDir({ HOME: '/home/ada' })).toMatch(/\/\.playflow\/dev$/);
  });
});

describe('dev log lines', () => {
  it('pino JSON → level, component, message, fields', () => {
    const line = JSON.stringify({ level: 'warn', time: 't', pid: 1, name: 'playflow-worker', msg: 'call aborted', execution_id: 5, meta: { a: 1 } });
    expect(formatLogLine(line)).toBe('warn  [worker] call aborted  execution_id=5  meta={"a":1}');
    expect(formatLogLine('plain text')).toBe('plain text');
    expect(formatLogLine('  ')).toBeNull();
  });

  it('the stream splits chunks into lines and drops what `drop` rejects', async () => {
    let out = '';
    const sink = new Writable({ write(c: Buffer, _e, done) { out += c.toString(); done(); } });
    const s = humanLogStream({ out: sink, drop: (l) => l.includes('secret-noise') });
    const a = JSON.stringify({ level: 'info', msg: 'one' });
    s.write(`${a.slice(0, 5)}`);
    s.write(`${a.slice(5)}\n${JSON.stringify({ level: 'warn', msg: 'secret-noise' })}\n`);
    s.write(`${JSON.stringify({ level: 'error', msg: 'two' })}\n`);
    await new Promise((r) => s.end(r));
    expect(out).toBe('info  one\nerror two\n');
  });
});

function mkdir(name: string): string {
  return mkdtempSync(join(tmp, `${name}-`));
}
