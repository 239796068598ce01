import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Cipher, EncryptionKeyError, cipherFromEnv, keyId, parseKey, reencryptAll, verifyKey } from './crypto.js';
import { createHarness, newKey, type SecretsHarness } from '../test/helpers/secrets.js';
import { CredentialService } from './secrets/credentials.js';
import { KeychainService } from './secrets/keychain.js';
import { silentLogger } from '../common/logger.js';

const b64 = (n: number) => randomBytes(n).toString('base64');

describe('keys and configuration', () => {
  it('missing key is an error outside dev, one random key per process in dev', () => {
    expect(() => cipherFromEnv({})).toThrow(EncryptionKeyError);
    expect(() => cipherFromEnv({})).toThrow(/PLAYFLOW_ENCRYPTION_KEY is not set/);
    expect(() => cipherFromEnv({ PLAYFLOW_ENCRYPTION_KEY: '  ' })).toThrow(/is not set/);
    const dev = cipherFromEnv({}, { dev: true });
    expect(dev.current.id).toMatch(/^[0-9a-f]{8}$/);
    const sealed = dev.encrypt({ token: 'x' }, 'credential');
    expect(cipherFromEnv({}, { dev: true }).decrypt(sealed, 'credential')).toEqual({ token: 'x' }); // same key within the process
    // not a key anyone knows: the fixed development key of earlier versions does not open it
    const fixed = new Cipher(parseKey(Buffer.alloc(32, 7).toString('base64')));
    expect(dev.current.id).not.toBe(fixed.current.id);
    expect(() => fixed.decrypt(sealed, 'credential')).toThrow();
  });

  it('a key that is not base64 or not 32 bytes is refused with a clear message', () => {
    expect(() => cipherFromEnv({ PLAYFLOW_ENCRYPTION_KEY: 'not base64 !!' })).toThrow('PLAYFLOW_ENCRYPTION_KEY is not valid base64');
    expect(() => cipherFromEnv({ PLAYFLOW_ENCRYPTION_KEY: b64(16) })).toThrow('PLAYFLOW_ENCRYPTION_KEY must decode to 32 bytes for AES-256-GCM, got 16');
    expect(() => cipherFromEnv({ PLAYFLOW_ENCRYPTION_KEY: b64(32), PLAYFLOW_ENCRYPTION_KEY_PREVIOUS: `${b64(32)},${b64(31)}` }))
      .toThrow('PLAYFLOW_ENCRYPTION_KEY_PREVIOUS[1] must decode to 32 bytes for AES-256-GCM, got 31');
  });

  it('key id is the first 8 hex of sha256(key); previous keys are comma-separated', () => {
    const cur = b64(32);
    const p1 = b64(32);
    const p2 = b64(32);
    const c = cipherFromEnv({ PLAYFLOW_ENCRYPTION_KEY: cur, PLAYFLOW_ENCRYPTION_KEY_PREVIOUS: ` ${p1} ,${p2},` });
    expect(c.current.id).toBe(keyId(Buffer.from(cur, 'base64')));
    expect(c.keyIds).toEqual([parseKey(cur).id, parseKey(p1).id, parseKey(p2).id]);
  });
});

describe('AES-256-GCM', () => {
  const k1 = newKey();
  const k2 = newKey();

  it('round-trips JSON, with a fresh IV each time, and records the key id', () => {
    const c = new Cipher(k1);
    const a = c.encrypt({ password: 'CANARY-x', n: 1 }, 'credential');
    const b = c.encrypt({ password: 'CANARY-x', n: 1 }, 'credential');
    expect(a).not.toBe(b);
    expect(a).not.toContain('CANARY');
    expect(Cipher.keyIdOf(a)).toBe(k1.id);
    expect(c.decrypt(a, 'credential')).toEqual({ password: 'CANARY-x', n: 1 });
  });

  it('decrypt picks the key by id; an unknown id names it', () => {
    const old = new Cipher(k1).encrypt({ v: 1 }, 'keychain');
    expect(new Cipher(k2, [k1]).decrypt(old, 'keychain')).toEqual({ v: 1 });
    expect(() => new Cipher(k2).decrypt(old, 'keychain')).toThrow(
      `PLAYFLOW_ENCRYPTION_KEY does not decrypt stored credentials (key id ${k1.id}); set PLAYFLOW_ENCRYPTION_KEY_PREVIOUS to the old key to rotate`,
    );
  });

  it('tampering or another purpose fails authentication', () => {
    const c = new Cipher(k1);
    const sealed = c.encrypt({ v: 1 }, 'credential');
    expect(() => c.decrypt(sealed, 'keychain')).toThrow(/failed authentication/);
    const parts = sealed.split(':');
    const ct = Buffer.from(parts[4], 'base64');
    ct[0] ^= 1;
    parts[4] = ct.toString('base64');
    expect(() => c.decrypt(parts.join(':'), 'credential')).toThrow(/failed authentication/);
  });
});

describe('verifyKey and rotation against PostgreSQL', () => {
  const oldKey = newKey();
  const newK = newKey();
  let h: SecretsHarness;
  beforeAll(async () => {
    h = await createHarness({ cipher: new Cipher(oldKey) });
    for (let i = 0; i < 7; i++) await h.credentials.upsert({ name: `c${i}`, type: 'basic', data: { username: `u${i}`, password: `CANARY-${i}` } });
    for (let i = 0; i < 5; i++) await h.keychain.set('9', `k${i}`, { token_data: { access_token: `tok-${i}` } });
    await h.credentials.get('c0', { include_data: true, execution_id: '77' });
    await h.credentials.get('c1', { include_data: true });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('verifyKey passes with the sealing key, fails with a clear message under a new key alone', async () => {
    await expect(verifyKey(h.db.pool, new Cipher(oldKey))).resolves.toBeUndefined();
    await expect(verifyKey(h.db.pool, new Cipher(newK))).rejects.toThrow(
      `PLAYFLOW_ENCRYPTION_KEY does not decrypt stored credentials (key id ${oldKey.id}); set PLAYFLOW_ENCRYPTION_KEY_PREVIOUS to the old key to rotate`,
    );
    await expect(verifyKey(h.db.pool, new Cipher(newK, [oldKey]))).resolves.toBeUndefined();
  });

  it('verifyKey detects a key with the right id that does not decrypt (corrupted key material)', async () => {
    const fake = { id: oldKey.id, key: randomBytes(32) };
    await expect(verifyKey(h.db.pool, new Cipher(fake))).rejects.toThrow(EncryptionKeyError);
  });

  it('re-encrypts every credential, keychain and auth-cache row in batches; old ciphertext reads during it', async () => {
    const rotating = new Cipher(newK, [oldKey]);
    const creds = new CredentialService(h.db, rotating);
    const kc = new KeychainService(h.db, rotating, { logger: silentLogger });
    const seen: Array<[string, number]> = [];
    const result = await reencryptAll(h.db.pool, rotating, {
      batchSize: 3,
      onBatch: async (table, n) => {
        seen.push([table, n]);
        // mid-rotation: rows under both keys exist and every one still reads
        for (let i = 0; i < 7; i++) expect((await creds.read(`c${i}`)).data).toEqual({ username: `u${i}`, password: `CANARY-${i}` });
        for (let i = 0; i < 5; i++) expect(await kc.get('9', `k${i}`)).toMatchObject({ status: 'success', token_data: { access_token: `tok-${i}` } });
      },
    });
    expect(result).toEqual({ rotated: { credential: 7, keychain: 5, auth_cache: 2, hook_secret: 0 }, total: 14, key_id: newK.id, remaining: 0 });
    expect(seen).toEqual([['credential', 3], ['credential', 3], ['credential', 1], ['keychain', 3], ['keychain', 2], ['auth_cache', 2]]);
    for (const t of ['credential', 'keychain', 'auth_cache']) {
      const { rows } = await h.db.pool.query(`SELECT DISTINCT key_id FROM ${t}`);
      expect(rows).toEqual([{ key_id: newK.id }]);
    }
    // the old key is no longer needed
    const onlyNew = new Cipher(newK);
    await expect(verifyKey(h.db.pool, onlyNew)).resolves.toBeUndefined();
    expect((await new CredentialService(h.db, onlyNew).read('c3')).data).toEqual({ username: 'u3', password: 'CANARY-3' });
    const { rows } = await h.db.pool.query(`SELECT data_enc FROM auth_cache WHERE cache_key = 'c0:execution:77'`);
    expect(onlyNew.decrypt(rows[0].data_enc, 'auth_cache')).toEqual({ username: 'u0', password: 'CANARY-0' });
    // a second run has nothing to do
    expect((await reencryptAll(h.db.pool, onlyNew)).total).toBe(0);
  });

  it('waits for rows another transaction holds, then rotates them too', async () => {
    const next = newKey();
    const cipher = new Cipher(next, [newK]);
    const holder = await h.db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM credential WHERE name = 'c0' FOR UPDATE`);
      const run = reencryptAll(h.db.pool, cipher, { batchSize: 100 });
      await new Promise((r) => setTimeout(r, 250));
      await holder.query('COMMIT');
      const res = await run;
      expect(res.rotated.credential).toBe(7);
      expect(res.remaining).toBe(0);
    } finally {
      holder.release();
    }
    expect((await new CredentialService(h.db, new Cipher(next)).read('c0')).data).toEqual({ username: 'u0', password: 'CANARY-0' });
  });
});
