/**
 * `playflow credentials …`: maintenance of encrypted credential storage (runs against the
 * database directly, like the server; needs DATABASE_URL and the keys).
 *
 * (Credential CRUD through the server's API is `playflow credential …`, cli/commands/credential.ts.)
 *
 *   playflow credentials rotate-key [--batch-size N] [--database-url URL] [-o json]
 *       Re-encrypts every credential, keychain and authentication-cache row under the current
 *       PLAYFLOW_ENCRYPTION_KEY. Put the old key in PLAYFLOW_ENCRYPTION_KEY_PREVIOUS (comma-
 *       separated for several); servers keep reading old rows during the rotation; afterwards the
 *       previous key can be removed.
 *   playflow credentials verify-key [--database-url URL] [-o json]
 *       Checks that the configured keys decrypt every stored row's key id (what the server checks
 *       at start).
 *
 * Rotation procedure: 1) set the new key as PLAYFLOW_ENCRYPTION_KEY and the old one as
 * PLAYFLOW_ENCRYPTION_KEY_PREVIOUS on every server and restart them; 2) run rotate-key;
 * 3) drop PLAYFLOW_ENCRYPTION_KEY_PREVIOUS.
 */
import type { Command } from 'commander';
import type { ReencryptResult } from '../../server/crypto.js';
import { action, CliError, outputFormat, outputOption, printBody, println, wholeNumber } from './common.js';

/** The database driver and the cipher: loaded by these commands, not by every CLI start. */
const database = () => import('../../server/db.js');
const crypto = () => import('../../server/crypto.js');

export interface RotateOptions {
  databaseUrl: string;
  env?: Record<string, string | undefined>;
  batchSize?: number;
  onBatch?: (table: string, count: number) => void;
}

/** Verifies the keys, then re-encrypts; the library part of the command (tests call it). */
export async function rotateKey(o: RotateOptions): Promise<ReencryptResult & { previous_key_ids: string[] }> {
  const [{ createDb }, { cipherFromEnv, reencryptAll, verifyKey }] = await Promise.all([database(), crypto()]);
  const cipher = cipherFromEnv(o.env ?? process.env);
  const db = createDb(o.databaseUrl, { max: 2, applicationName: 'playflow-rotate-key' });
  try {
    await verifyKey(db.pool, cipher);
    const result = await reencryptAll(db.pool, cipher, { batchSize: o.batchSize, onBatch: o.onBatch });
    return { ...result, previous_key_ids: cipher.keyIds.filter((k) => k !== cipher.current.id) };
  } finally {
    await db.close();
  }
}

export async function keyStatus(databaseUrl: string, env: Record<string, string | undefined> = process.env): Promise<{ key_id: string; rows: Record<string, Record<string, number>> }> {
  const [{ createDb }, { cipherFromEnv, verifyKey, ENCRYPTED_TABLES }] = await Promise.all([database(), crypto()]);
  const cipher = cipherFromEnv(env);
  const db = createDb(databaseUrl, { max: 1, applicationName: 'playflow-verify-key' });
  try {
    await verifyKey(db.pool, cipher);
    const rows: Record<string, Record<string, number>> = {};
    for (const { table } of ENCRYPTED_TABLES) {
      const r = await db.pool.query<{ key_id: string; n: string }>(`SELECT key_id, count(*)::text AS n FROM ${table} GROUP BY key_id ORDER BY key_id`);
      rows[table] = Object.fromEntries(r.rows.map((x) => [x.key_id, Number(x.n)]));
    }
    return { key_id: cipher.current.id, rows };
  } finally {
    await db.close();
  }
}

function databaseUrl(opts: { databaseUrl?: string }): string {
  const url = opts.databaseUrl || process.env.DATABASE_URL;
  if (!url) throw new CliError('no database: set DATABASE_URL or pass --database-url');
  return url;
}

function wrapKeyErrors<A extends unknown[]>(fn: (...a: A) => Promise<void>) {
  return async (...a: A) => {
    try {
      await fn(...a);
    } catch (err) {
      if (err instanceof (await crypto()).EncryptionKeyError) throw new CliError(err.message);
      throw err;
    }
  };
}

export function register(program: Command): void {
  const creds = program.command('credentials').description('Encrypted credential storage: key verification and rotation (for create/list/get/delete see `credential`)');

  outputOption(creds.command('rotate-key'))
    .description('Re-encrypt every credential and keychain row under PLAYFLOW_ENCRYPTION_KEY (old key in PLAYFLOW_ENCRYPTION_KEY_PREVIOUS)')
    .option('--database-url <url>', 'PostgreSQL URL (env DATABASE_URL)')
    .option('--batch-size <n>', 'rows per transaction', '100')
    .action(action(wrapKeyErrors(async (opts: { databaseUrl?: string; batchSize: string; output?: string }) => {
      const batchSize = wholeNumber(opts.batchSize, '--batch-size', 1) as number;
      const human = outputFormat(opts) === 'table';
      const res = await rotateKey({
        databaseUrl: databaseUrl(opts),
        batchSize,
        onBatch: human ? (table, n) => println(`  ${table}: ${n} rows re-encrypted`) : undefined,
      });
      if (!printBody(opts, res)) println(`rotated ${res.total} rows to key ${res.key_id} (credential ${res.rotated.credential}, keychain ${res.rotated.keychain}, auth_cache ${res.rotated.auth_cache})`);
      if (res.remaining > 0) throw new CliError(`${res.remaining} rows are still under an old key (held by other transactions, or written by a server without the new key); run rotate-key again once every server has PLAYFLOW_ENCRYPTION_KEY set to the new key`);
      if (human && res.previous_key_ids.length) println('PLAYFLOW_ENCRYPTION_KEY_PREVIOUS is no longer needed once every server runs with the new key.');
    })));

  outputOption(creds.command('verify-key'))
    .description('Check that the configured keys decrypt the stored credentials')
    .option('--database-url <url>', 'PostgreSQL URL (env DATABASE_URL)')
    .action(action(wrapKeyErrors(async (opts: { databaseUrl?: string; output?: string }) => {
      const res = await keyStatus(databaseUrl(opts));
      if (printBody(opts, res)) return;
      println(`ok: current key ${res.key_id}`);
      for (const [table, byKey] of Object.entries(res.rows)) {
        const parts = Object.entries(byKey).map(([k, n]) => `${k}${k === res.key_id ? ' (current)' : ''}: ${n}`);
        println(`  ${table}: ${parts.length ? parts.join(', ') : 'no rows'}`);
      }
    })));
}
