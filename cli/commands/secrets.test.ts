import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { Cipher, parseKey } from '../../server/crypto.js';
import { createHarness, type SecretsHarness } from '../../test/helpers/secrets.js';
import { keyStatus, register, rotateKey } from './secrets.js';

const oldB64 = randomBytes(32).toString('base64');
const newB64 = randomBytes(32).toString('base64');
let h: SecretsHarness;

beforeAll(async () => {
  h = await createHarness({ cipher: new Cipher(parseKey(oldB64)) });
  for (let i = 0; i < 5; i++) await h.credentials.upsert({ name: `c${i}`, type: 'api_key', data: { api_key: `k${i}` } });
  await h.keychain.set('1', 'kc', { token_data: { t: 1 } });
});
afterAll(async () => {
  await h?.close();
});

describe('playflow credentials rotate-key', () => {
  it('refuses to run without the old key, naming its key id', async () => {
    await expect(rotateKey({ databaseUrl: h.tdb.url, env: { PLAYFLOW_ENCRYPTION_KEY: newB64 } }))
      .rejects.toThrow(`PLAYFLOW_ENCRYPTION_KEY does not decrypt stored credentials (key id ${parseKey(oldB64).id}); set PLAYFLOW_ENCRYPTION_KEY_PREVIOUS to the old key to rotate`);
  });

  it('re-encrypts everything with the old key as previous; verify-key then passes with the new key alone', async () => {
    const batches: number[] = [];
    const res = await rotateKey({ databaseUrl: h.tdb.url, batchSize: 2, env: { PLAYFLOW_ENCRYPTION_KEY: newB64, PLAYFLOW_ENCRYPTION_KEY_PREVIOUS: oldB64 }, onBatch: (_t, n) => batches.push(n) });
    expect(res).toMatchObject({ remaining: 0, total: 6, rotated: { credential: 5, keychain: 1, auth_cache: 0 }, key_id: parseKey(newB64).id, previous_key_ids: [parseKey(oldB64).id] });
    expect(batches).toEqual([2, 2, 1, 1]);
    const status = await keyStatus(h.tdb.url, { PLAYFLOW_ENCRYPTION_KEY: newB64 });
    expect(status.rows.credential).toEqual({ [parseKey(newB64).id]: 5 });
  });

  it('is registered as a command group with rotate-key and verify-key; bad keys exit non-zero with the message', async () => {
    const program = new Command().exitOverride();
    register(program);
    const creds = program.commands.find((c) => c.name() === 'credentials')!;
    expect(creds.commands.map((c) => c.name())).toEqual(['rotate-key', 'verify-key']);
    const saved = { key: process.env.PLAYFLOW_ENCRYPTION_KEY, err: process.stderr.write, code: process.exitCode };
    let stderr = '';
    process.env.PLAYFLOW_ENCRYPTION_KEY = 'c2hvcnQ=';
    process.stderr.write = ((s: string) => { stderr += s; return true; }) as typeof process.stderr.write;
    try {
      await program.parseAsync(['node', 'playflow', 'credentials', 'verify-key', '--database-url', h.tdb.url]);
      expect(process.exitCode).toBe(1);
    } finally {
      process.stderr.write = saved.err;
      process.exitCode = saved.code;
      if (saved.key === undefined) delete process.env.PLAYFLOW_ENCRYPTION_KEY;
      else process.env.PLAYFLOW_ENCRYPTION_KEY = saved.key;
    }
    expect(stderr).toBe('error: PLAYFLOW_ENCRYPTION_KEY must decode to 32 bytes for AES-256-GCM, got 5\n');
  });
});
