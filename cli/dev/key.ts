/**
 * The encryption key of `playflow dev` when PLAYFLOW_ENCRYPTION_KEY is not set: 32 random bytes,
 * generated on the first run and kept in `<dataDir>/encryption.key` (base64, mode 0600), so
 * credentials stored in one dev session still decrypt in the next. Never a key written in the
 * code: anyone could read data sealed with that.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseKey } from '../../server/crypto.js';

export const KEY_FILE = 'encryption.key';

export interface DevKey {
  /** base64 */
  key: string;
  file: string;
  /** true when this call generated it. */
  created: boolean;
}

export function loadOrCreateDevKey(dataDir: string): DevKey {
  const file = path.join(dataDir, KEY_FILE);
  let created = false;
  try {
    // 'wx': never overwrite a key another process wrote in the meantime.
    writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    created = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new Error(`cannot write the dev encryption key ${file}: ${(err as Error).message}`, { cause: err });
  }
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  const key = readFileSync(file, 'utf8').trim();
  parseKey(key, file); // a damaged file: a clear error naming it
  return { key, file, created };
}
