/**
 * Encryption at rest for credential, keychain and authentication-cache data: AES-256-GCM with
 * `PLAYFLOW_ENCRYPTION_KEY` (32 bytes, base64).
 *
 * Ciphertext format (one text column): `pf1:<key id>:<iv>:<tag>:<ciphertext>` (base64 parts).
 * The key id is the first 8 hex characters of sha256(key), so a row says which key sealed it and
 * keys can be rotated: the cipher is configured with the current key plus any previous keys
 * (`PLAYFLOW_ENCRYPTION_KEY_PREVIOUS`, comma-separated); encryption always uses the current key,
 * decryption picks the key by id. `reencryptAll` then moves every row to the current key in
 * batches while old ciphertext keeps reading.
 *
 * The associated data binds a ciphertext to its purpose (`credential`, `keychain`, `auth_cache`),
 * so a value copied from one table into another does not decrypt.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';

const PREFIX = 'pf1';
const IV_BYTES = 12;
/**
 * The key of `dev: true` when none is configured (tests): random, made once per process, so no
 * known key exists in the code and what it encrypts is unreadable by any other process.
 * `playflow dev` does not use it: it keeps a generated key in its data directory.
 */
let ephemeralDevKey: Buffer | undefined;

export class EncryptionKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EncryptionKeyError';
  }
}

export interface EncryptionKey {
  id: string;
  key: Buffer;
}

export function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/** Parses one base64 key; `name` is the variable it came from (for the error message). */
export function parseKey(value: string, name = 'PLAYFLOW_ENCRYPTION_KEY'): EncryptionKey {
  const trimmed = value.trim();
  if (!/^[A-Za-z0-9+/\-_]+={0,2}$/.test(trimmed) || trimmed.length % 4 === 1) {
    throw new EncryptionKeyError(`${name} is not valid base64 (expected 32 random bytes, base64-encoded; e.g. \`openssl rand -base64 32\`)`);
  }
  const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (key.length !== 32) {
    throw new EncryptionKeyError(`${name} must decode to 32 bytes for AES-256-GCM, got ${key.length}`);
  }
  return { id: keyId(key), key };
}

export type Purpose = 'credential' | 'keychain' | 'auth_cache' | 'hook_secret';

export class Cipher {
  readonly current: EncryptionKey;
  private readonly keys = new Map<string, Buffer>();

  constructor(current: EncryptionKey, previous: EncryptionKey[] = []) {
    this.current = current;
    for (const k of [current, ...previous]) if (!this.keys.has(k.id)) this.keys.set(k.id, k.key);
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  encrypt(plain: unknown, purpose: Purpose): string {
    const iv = randomBytes(IV_BYTES);
    const c = createCipheriv('aes-256-gcm', this.current.key, iv);
    c.setAAD(Buffer.from(purpose));
    const ct = Buffer.concat([c.update(Buffer.from(JSON.stringify(plain ?? null), 'utf8')), c.final()]);
    return [PREFIX, this.current.id, iv.toString('base64'), c.getAuthTag().toString('base64'), ct.toString('base64')].join(':');
  }

  decrypt<T = unknown>(sealed: string, purpose: Purpose): T {
    const parts = sealed.split(':');
    if (parts.length !== 5 || parts[0] !== PREFIX) throw new EncryptionKeyError('stored ciphertext has an unknown format');
    const [, kid, iv, tag, ct] = parts;
    const key = this.keys.get(kid);
    if (!key) {
      throw new EncryptionKeyError(
        `PLAYFLOW_ENCRYPTION_KEY does not decrypt stored credentials (key id ${kid}); set PLAYFLOW_ENCRYPTION_KEY_PREVIOUS to the old key to rotate`,
      );
    }
    try {
      const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
      d.setAAD(Buffer.from(purpose));
      d.setAuthTag(Buffer.from(tag, 'base64'));
      const plain = Buffer.concat([d.update(Buffer.from(ct, 'base64')), d.final()]);
      return JSON.parse(plain.toString('utf8')) as T;
    } catch {
      throw new EncryptionKeyError(`stored ciphertext (key id ${kid}) failed authentication: it was altered or sealed for another purpose`);
    }
  }

  /** Key id recorded in a ciphertext. */
  static keyIdOf(sealed: string): string {
    return sealed.split(':')[1] ?? '';
  }
}

export interface CipherEnv {
  PLAYFLOW_ENCRYPTION_KEY?: string;
  PLAYFLOW_ENCRYPTION_KEY_PREVIOUS?: string;
}

/**
 * Builds the cipher from the environment. Outside dev mode the key is required; in dev mode this
 * process's ephemeral key is used when none is set (and said so by the caller's log).
 */
export function cipherFromEnv(env: CipherEnv = process.env, opts: { dev?: boolean } = {}): Cipher {
  const raw = env.PLAYFLOW_ENCRYPTION_KEY?.trim();
  if (!raw) {
    if (opts.dev) return new Cipher(parseKey((ephemeralDevKey ??= randomBytes(32)).toString('base64')));
    throw new EncryptionKeyError(
      'PLAYFLOW_ENCRYPTION_KEY is not set: the server needs a 32-byte base64 key to encrypt credentials (generate one with `openssl rand -base64 32`)',
    );
  }
  const current = parseKey(raw);
  const previous = (env.PLAYFLOW_ENCRYPTION_KEY_PREVIOUS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s, i) => parseKey(s, `PLAYFLOW_ENCRYPTION_KEY_PREVIOUS[${i}]`));
  return new Cipher(current, previous);
}

/** Tables holding ciphertext, with their primary key and purpose. */
export const ENCRYPTED_TABLES: ReadonlyArray<{ table: string; pk: string; purpose: Purpose }> = [
  { table: 'credential', pk: 'id', purpose: 'credential' },
  { table: 'keychain', pk: 'cache_key', purpose: 'keychain' },
  { table: 'auth_cache', pk: 'cache_key', purpose: 'auth_cache' },
  { table: 'hook_secret', pk: 'hook_id', purpose: 'hook_secret' },
];

type Queryable = Pick<pg.Pool, 'query'>;

/**
 * Start-up check: every key id found in stored rows must be known to the cipher, and one row per
 * key id must actually decrypt. Throws an EncryptionKeyError naming the unknown key id.
 */
export async function verifyKey(db: Queryable, cipher: Cipher): Promise<void> {
  for (const { table, purpose } of ENCRYPTED_TABLES) {
    const { rows } = await db.query<{ key_id: string; data_enc: string }>(
      `SELECT DISTINCT ON (key_id) key_id, data_enc FROM ${table} ORDER BY key_id`,
    );
    for (const row of rows) {
      if (!cipher.keyIds.includes(row.key_id)) {
        throw new EncryptionKeyError(
          `PLAYFLOW_ENCRYPTION_KEY does not decrypt stored credentials (key id ${row.key_id}); set PLAYFLOW_ENCRYPTION_KEY_PREVIOUS to the old key to rotate`,
        );
      }
      cipher.decrypt(row.data_enc, purpose);
    }
  }
}

export interface ReencryptResult {
  /** Rows moved to the current key, per table. */
  rotated: Record<string, number>;
  total: number;
  key_id: string;
  /** Rows still under another key at the end (locked throughout, or written by a server without the new key). */
  remaining: number;
}

async function countOld(db: Pick<pg.Pool, 'connect'>, table: string, keyId: string): Promise<number> {
  const client = await db.connect();
  try {
    const { rows } = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table} WHERE key_id <> $1`, [keyId]);
    return Number(rows[0].n);
  } finally {
    client.release();
  }
}

/**
 * Re-encrypts every row not sealed with the current key, `batchSize` rows per transaction
 * (`FOR UPDATE SKIP LOCKED`, so concurrent writers and a second rotator are safe). Readers keep
 * working throughout: a row is either still under an old key (decrypted by id) or already under
 * the new one.
 */
export async function reencryptAll(
  db: Pick<pg.Pool, 'connect'>,
  cipher: Cipher,
  opts: { batchSize?: number; onBatch?: (table: string, count: number) => void | Promise<void>; maxLockedRetries?: number } = {},
): Promise<ReencryptResult> {
  const batchSize = opts.batchSize ?? 100;
  const rotated: Record<string, number> = {};
  let total = 0;
  for (const { table, pk, purpose } of ENCRYPTED_TABLES) {
    rotated[table] = 0;
    let lockedRetries = 0;
    while (true) {
      const client = await db.connect();
      let n: number;
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<{ pk: string; data_enc: string }>(
          `SELECT ${pk}::text AS pk, data_enc FROM ${table} WHERE key_id <> $1 ORDER BY ${pk} LIMIT $2 FOR UPDATE SKIP LOCKED`,
          [cipher.current.id, batchSize],
        );
        for (const row of rows) {
          const sealed = cipher.encrypt(cipher.decrypt(row.data_enc, purpose), purpose);
          // $3 takes the key column's type, so the primary key's index finds the row (a cast of
          // the column instead scanned the table once per row: 20,000 credentials took 70 s)
          await client.query(`UPDATE ${table} SET data_enc = $1, key_id = $2 WHERE ${pk} = $3`, [sealed, cipher.current.id, row.pk]);
        }
        await client.query('COMMIT');
        n = rows.length;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
      if (n > 0) {
        rotated[table] += n;
        total += n;
        await opts.onBatch?.(table, n);
      }
      if (n === batchSize) continue;
      // Rows skipped because another transaction held them: wait for them, a bounded number of times.
      const left = await countOld(db, table, cipher.current.id);
      if (left === 0 || ++lockedRetries > (opts.maxLockedRetries ?? 50)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  let remaining = 0;
  for (const { table } of ENCRYPTED_TABLES) remaining += await countOld(db, table, cipher.current.id);
  return { rotated, total, key_id: cipher.current.id, remaining };
}
