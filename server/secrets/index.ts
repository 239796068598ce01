/**
 * Credentials, keychain and execution variables: everything the server needs, in one place.
 *
 *   const secrets = createSecretsServices(db, { env: process.env, dev });
 *   await secrets.verify();                    // start-up key check
 *   deps = { ...deps, ...secrets.deps };        // credentials, keychain, vars for the plugins
 *   hooks = secrets.hooks;                      // ExecutionHooks for the execution service
 *   sweeper: every N seconds `sweepExpired(db)`
 */
import type { Db } from '../db.js';
import { cipherFromEnv, verifyKey, type Cipher, type CipherEnv } from '../crypto.js';
import { CredentialService, type CredentialServiceOptions } from './credentials.js';
import { KeychainService, type KeychainServiceOptions } from './keychain.js';
import { VarsService } from './vars.js';
import { createSecretsHooks } from './hooks.js';

export { CredentialService, CredentialValidationError, CREDENTIAL_TYPES } from './credentials.js';
export { KeychainService, DEFAULT_TTL, cacheKeyFor, withRenewDefaults } from './keychain.js';
export { VarsService, VAR_TYPES } from './vars.js';
export { createSecretsHooks, secretsHooks } from './hooks.js';
export { sweepExpired } from './sweep.js';
import { sweepExpired, type SweepOptions } from './sweep.js';
import { type Logger } from '../../common/logger.js';
export { validateData } from './schema.js';

export interface SecretsOptions extends CredentialServiceOptions, KeychainServiceOptions {
  cipher?: Cipher;
  /** PLAYFLOW_ENCRYPTION_KEY(_PREVIOUS) and PLAYFLOW_AUTH_CACHE_TTL_SECONDS (default 3600). */
  env?: CipherEnv & { PLAYFLOW_AUTH_CACHE_TTL_SECONDS?: string };
  dev?: boolean;
  logger?: Logger;
}

/** PLAYFLOW_AUTH_CACHE_TTL_SECONDS: lifetime of an authentication-cache entry (default 3600). */
export function authCacheTtl(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const n = Number(value.trim());
  if (!Number.isInteger(n) || n < 1) throw new Error(`PLAYFLOW_AUTH_CACHE_TTL_SECONDS must be a positive integer (seconds), got ${JSON.stringify(value)}`);
  return n;
}

/**
 * Shared scope is keyed by the ROOT execution: a child's id (from an API caller) maps to its root
 * through the core's execution table; an id it does not know is taken as the root itself.
 */
export function rootFromExecutionTable(db: Pick<Db, 'pool'>): (executionId: string) => Promise<string | null> {
  return async (executionId) => {
    try {
      const { rows } = await db.pool.query<{ root: string }>('SELECT root_execution_id::text AS root FROM execution WHERE execution_id = $1', [executionId]);
      return rows[0]?.root ?? null;
    } catch {
      return null; // no execution table (the module used on its own)
    }
  };
}

/** Sweeper task for the core (`sweeperTasks`): expired keychain entries and authentication cache. */
export function secretsSweeperTasks(db: Db, opts?: SweepOptions): Array<{ name: string; run: () => Promise<unknown> }> {
  return [{ name: 'secrets-expiry', run: () => sweepExpired(db, opts) }];
}

export function createSecretsServices(db: Db, opts: SecretsOptions = {}) {
  const env = opts.env ?? process.env;
  const cipher = opts.cipher ?? cipherFromEnv(env, { dev: opts.dev });
  const credentials = new CredentialService(db, cipher, { ...opts, authCacheTtlSeconds: opts.authCacheTtlSeconds ?? authCacheTtl(env.PLAYFLOW_AUTH_CACHE_TTL_SECONDS) });
  const keychain = new KeychainService(db, cipher, { ...opts, resolveRoot: opts.resolveRoot ?? rootFromExecutionTable(db) });
  const vars = new VarsService(db);
  return {
    cipher,
    deps: { credentials, keychain, vars },
    hooks: createSecretsHooks({ logger: opts.logger }),
    /** Throws EncryptionKeyError when stored rows were sealed with a key we do not have. */
    verify: () => verifyKey(db.pool, cipher),
  };
}
