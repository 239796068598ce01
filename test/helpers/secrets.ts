/**
 * Test set-up shared by the credentials/keychain/vars suites: a fresh database with every
 * migration applied, the services, and the real HTTP app (`buildApp`) with these services in its
 * deps (the core services are not needed by these routes and are left out). Not used by
 * production code.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../server/app/index.js';
import type { ServerDeps } from '../../server/services.js';
import { createTestDatabase, type TestDatabase } from './pg.js';
import { createDb, type ClosableDb } from '../../server/db.js';
import { migrate } from '../../server/store/migrate.js';
import { Cipher, parseKey } from '../../server/crypto.js';
import { randomBytes } from 'node:crypto';
import { CredentialService } from '../../server/secrets/credentials.js';
import { KeychainService, type KeychainServiceOptions } from '../../server/secrets/keychain.js';
import { VarsService } from '../../server/secrets/vars.js';
import { type Logger, silentLogger } from '../../common/logger.js';

export const newKey = () => parseKey(randomBytes(32).toString('base64'));

export interface SecretsHarness {
  tdb: TestDatabase;
  db: ClosableDb;
  cipher: Cipher;
  credentials: CredentialService;
  keychain: KeychainService;
  vars: VarsService;
  app: FastifyInstance;
  warnings: Array<{ obj: object; msg: string }>;
  close(): Promise<void>;
}

export async function createHarness(opts: { cipher?: Cipher; keychain?: KeychainServiceOptions } = {}): Promise<SecretsHarness> {
  const tdb = await createTestDatabase('pf_secrets');
  const db = createDb(tdb.url, { max: 4 });
  await migrate(db.pool);
  const cipher = opts.cipher ?? new Cipher(newKey());
  const warnings: Array<{ obj: object; msg: string }> = [];
  const logger: Logger = { ...silentLogger, warn: (obj, msg) => void warnings.push({ obj, msg: msg ?? '' }) };
  const credentials = new CredentialService(db, cipher);
  const keychain = new KeychainService(db, cipher, { logger, ...opts.keychain });
  const vars = new VarsService(db);
  const deps = { db, serverUrl: 'http://127.0.0.1:0', credentials, keychain, vars } as unknown as ServerDeps;
  const app = await buildApp(deps, { logger: false });
  return {
    tdb, db, cipher, credentials, keychain, vars, app, warnings,
    async close() {
      await app.close();
      await db.close();
      await tdb.drop();
    },
  };
}
