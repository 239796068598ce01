/**
 * Test set-up shared by the credentials/keychain/vars suites: a fresh database with every
 * migration applied, the services, and a bare fastify app with the three plugins mounted behind
 * an error handler that renders AppError as `{error: {code, message, details?}}` (the app's
 * contract, server/errors.ts). Not used by production code.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { createDb, type ClosableDb } from '../db.js';
import { migrate } from '../store/migrate.js';
import { AppError } from '../errors.js';
import { Cipher, parseKey } from '../crypto.js';
import { randomBytes } from 'node:crypto';
import { CredentialService } from './credentials.js';
import { KeychainService, type KeychainServiceOptions } from './keychain.js';
import { VarsService } from './vars.js';
import { credentialsPlugin } from '../app/credentials.js';
import { keychainPlugin } from '../app/keychain.js';
import { varsPlugin } from '../app/vars.js';
import type { SecretsLogger } from './common.js';

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

export function renderErrors(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, _req, reply) => {
    if (err instanceof AppError) {
      return reply.code(err.statusCode).send({ error: { code: err.code, message: err.message, ...(err.details === undefined ? {} : { details: err.details }) } });
    }
    const e = err as { validation?: unknown; statusCode?: number; message?: string };
    if (e.validation || e.statusCode === 400) return reply.code(400).send({ error: { code: 'bad_request', message: e.message ?? 'bad request' } });
    return reply.code(500).send({ error: { code: 'internal', message: 'internal error' } });
  });
}

export async function createHarness(opts: { cipher?: Cipher; keychain?: KeychainServiceOptions } = {}): Promise<SecretsHarness> {
  const tdb = await createTestDatabase('pf_secrets');
  const db = createDb(tdb.url, { max: 4 });
  await migrate(db.pool);
  const cipher = opts.cipher ?? new Cipher(newKey());
  const warnings: Array<{ obj: object; msg: string }> = [];
  const logger: SecretsLogger = { warn: (obj, msg) => warnings.push({ obj, msg }) };
  const credentials = new CredentialService(db, cipher);
  const keychain = new KeychainService(db, cipher, { logger, ...opts.keychain });
  const vars = new VarsService(db);
  const app = Fastify({ logger: false });
  renderErrors(app);
  await app.register(credentialsPlugin, { credentials });
  await app.register(keychainPlugin, { keychain });
  await app.register(varsPlugin, { vars });
  await app.ready();
  return {
    tdb, db, cipher, credentials, keychain, vars, app, warnings,
    async close() {
      await app.close();
      await db.close();
      await tdb.drop();
    },
  };
}
