/**
 * Credentials, keychain and execution variables: everything the server needs, in one place.
 *
 *   const secrets = createSecretsServices(db, { env: process.env, dev });
 *   await secrets.verify();                    // start-up key check
 *   deps = { ...deps, ...secrets.deps };        // credentials, keychain, vars for the plugins
 *   hooks = secrets.hooks;                      // ExecutionHooks for the execution service
 *   sweeper: every N seconds `sweepExpired(db)`
 */
import type { Db } from '../services.js';
import { cipherFromEnv, verifyKey, type Cipher, type CipherEnv } from '../crypto.js';
import { CredentialService, type CredentialServiceOptions } from './credentials.js';
import { KeychainService, type KeychainServiceOptions } from './keychain.js';
import { VarsService } from './vars.js';
import { createSecretsHooks } from './hooks.js';
import type { SecretsLogger } from './common.js';

export { CredentialService, CredentialValidationError, CREDENTIAL_TYPES } from './credentials.js';
export { KeychainService, DEFAULT_TTL, cacheKeyFor, withRenewDefaults } from './keychain.js';
export { VarsService, VAR_TYPES } from './vars.js';
export { createSecretsHooks, secretsHooks } from './hooks.js';
export { sweepExpired } from './sweep.js';
export { validateData } from './schema.js';

export interface SecretsOptions extends CredentialServiceOptions, KeychainServiceOptions {
  cipher?: Cipher;
  env?: CipherEnv;
  dev?: boolean;
  logger?: SecretsLogger;
}

export function createSecretsServices(db: Db, opts: SecretsOptions = {}) {
  const cipher = opts.cipher ?? cipherFromEnv(opts.env ?? process.env, { dev: opts.dev });
  const credentials = new CredentialService(db, cipher, opts);
  const keychain = new KeychainService(db, cipher, opts);
  const vars = new VarsService(db);
  return {
    cipher,
    deps: { credentials, keychain, vars },
    hooks: createSecretsHooks({ logger: opts.logger }),
    /** Throws EncryptionKeyError when stored rows were sealed with a key we do not have. */
    verify: () => verifyKey(db.pool, cipher),
  };
}
