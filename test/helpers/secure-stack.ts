/**
 * The server wired as server/main.ts wires it, in this process: a fresh database, the core on the
 * machine's JetStream with stream names of its own, the credentials/keychain/vars services as the
 * core's hooks, and the HTTP app listening on a free port. For suites that check what happens to
 * secrets end to end (they add a WorkerRuntime and a local API of their own).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { createTestDatabase, type TestDatabase } from './pg.js';
import { BROKER_URL, deleteStream, uniqueBrokerNames } from './nats.js';
import { createServerCore, type ServerCore } from '../../server/core.js';
import { buildApp } from '../../server/app/index.js';
import { createSecretsServices } from '../../server/secrets/index.js';
import { Cipher, parseKey } from '../../server/crypto.js';
import type { PinoLogger } from '../../common/logger.js';

export interface SecureStack {
  tdb: TestDatabase;
  core: ServerCore;
  app: FastifyInstance;
  /** http://127.0.0.1:<port> of the app. */
  base: string;
  names: ReturnType<typeof uniqueBrokerNames>;
  close(): Promise<void>;
}

export async function startSecureStack(opts: { name: string; logger?: PinoLogger; names?: ReturnType<typeof uniqueBrokerNames> }): Promise<SecureStack> {
  const names = opts.names ?? uniqueBrokerNames(opts.name.toUpperCase());
  const tdb = await createTestDatabase(`pf_${opts.name.toLowerCase()}`);
  const cipher = new Cipher(parseKey(randomBytes(32).toString('base64')));
  const logger = opts.logger;
  let secrets: ReturnType<typeof createSecretsServices> | undefined;
  const core = await createServerCore({
    databaseUrl: tdb.url, broker: { url: BROKER_URL, ...names }, serverUrl: 'http://127.0.0.1', sweeper: false, poolSize: 5,
    hooks: (db) => {
      secrets = createSecretsServices(db, { cipher, logger });
      return secrets.hooks;
    },
  }, { logger });
  Object.assign(core.deps, secrets!.deps);
  const app = await buildApp(core.deps, logger ? { logger } : {});
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  await core.start();
  return {
    tdb, core, app, base, names,
    async close() {
      await app.close();
      await core.close();
      await deleteStream(names.stream);
      await tdb.drop();
    },
  };
}
