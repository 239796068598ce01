/**
 * The CLI as users run it: `node dist/cli/index.js …` subprocesses against a real server —
 * `startServer` (what `playflow server start` runs: core, credentials/keychain/vars services,
 * the HTTP app) on a fresh PostgreSQL database, the in-process broker, a bearer token and an
 * encryption key, listening on a free port.
 *
 * Needs the compiled CLI (`npx tsc -p .`, which `npm test` runs first).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../common/logger.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = join(ROOT, 'dist/cli/index.js');
export const TOKEN = 'cli-test-token';
export const ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64');

export interface Run { code: number; stdout: string; stderr: string }

/** Runs the CLI; SERVER_API_URL and PLAYFLOW_API_TOKEN are cleared unless given. */
export function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], {
      env: { ...process.env, SERVER_API_URL: '', PLAYFLOW_API_TOKEN: '', ...env },
      timeout: 30_000,
    }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: unknown }).code ?? 1) : 0;
      // A run killed by the timeout says so (stderr is what failing assertions show).
      const killed = (err as { killed?: boolean; signal?: string } | null)?.killed ? `\n[cli killed after 30 s: ${(err as { signal?: string }).signal}]` : '';
      resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr: stderr + killed });
    });
  });
}

export interface CliServer {
  url: string;
  db: TestDatabase;
  server: RunningServer;
  /** `--server <url> --token <token>` */
  auth: string[];
  /** A direct API call with the token (to compare the CLI's output with the API body). */
  api<T = any>(method: string, path: string, body?: unknown): Promise<T>;
  close(): Promise<void>;
}

export async function startCliServer(prefix = 'pfcli'): Promise<CliServer> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first with \`npx tsc -p .\` (npm test does)`);
  const db = await createTestDatabase(prefix);
  let server: RunningServer;
  try {
    const config = loadConfig({
      DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent',
      PLAYFLOW_API_TOKEN: TOKEN, PLAYFLOW_ENCRYPTION_KEY: ENCRYPTION_KEY,
    });
    server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'silent' }) });
  } catch (err) {
    await db.drop();
    throw err;
  }
  const url = server.address;
  return {
    url,
    db,
    server,
    auth: ['--server', url, '--token', TOKEN],
    async api(method, path, body) {
      const res = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text);
    },
    async close() {
      await server.stop().catch(() => {});
      await db.drop();
    },
  };
}

/** A local port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}
