/**
 * Shared set-up for the end-to-end benchmarks: a fresh PostgreSQL database, the real server
 * (in this process) on JetStream with stream names of its own, and worker processes started with
 * the built CLI — the same parts as production, on one machine. Figures only; nothing asserts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PlayflowClient } from '../client/http.js';
import { startServer, type RunningServer } from '../server/main.js';
import { loadConfig } from '../server/config.js';
import { createLogger } from '../server/logger.js';
import { freePort } from '../cli/dev/embedded-db.js';

const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const CLI = fileURLToPath(new URL('../cli/index.js', import.meta.url));

export interface BenchStack {
  client: PlayflowClient;
  url: string;
  server: RunningServer;
  close(): Promise<void>;
}

export async function startStack(opts: { workers?: number; concurrency?: number } = {}): Promise<BenchStack> {
  const dbName = `pfbench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${dbName}"`);
  await admin.end();
  const dbUrl = new URL(ADMIN_URL);
  dbUrl.pathname = `/${dbName}`;
  const id = randomBytes(3).toString('hex').toUpperCase();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: dbUrl.toString(),
    BROKER_URL: process.env.BROKER_URL ?? 'nats://127.0.0.1:4222',
    BROKER_STREAM: `FLOW_COMMANDS_BENCH_${id}`,
    BROKER_SUBJECT: `flow.commands.bench.${id.toLowerCase()}`,
    BROKER_CONSUMER: `worker-pool-bench-${id.toLowerCase()}`,
    PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    SERVER_API_URL: url,
    LOG_LEVEL: 'warn',
  };
  const config = { ...loadConfig({ ...env, PORT: String(port) }), host: '127.0.0.1' };
  const server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'warn' }) });
  const workers: ChildProcess[] = [];
  for (let i = 0; i < (opts.workers ?? 1); i++) {
    workers.push(spawn(process.execPath, [CLI, 'worker', 'start', '--v2', '--concurrency', String(opts.concurrency ?? 8)], {
      env: { ...env, WORKER_METRICS_PORT: '0' },
      stdio: 'ignore',
    }));
  }
  const client = new PlayflowClient({ baseUrl: url });
  // Let the workers connect and warm their python interpreters before anything is timed.
  await new Promise((r) => setTimeout(r, 1500));
  return {
    client,
    url,
    server,
    async close() {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => new Promise((r) => (w.exitCode !== null ? r(null) : w.once('exit', r)))));
      await server.stop();
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Runs a registered playbook and waits for its end, polling every 2 ms. Returns wall ms. */
export async function runToEnd(client: PlayflowClient, playbookPath: string, payload: Record<string, unknown> = {}) {
  const t0 = performance.now();
  const started = await client.run({ path: playbookPath, payload: payload as never });
  for (;;) {
    const x = await client.getExecution(started.execution_id);
    if (['completed', 'failed', 'cancelled'].includes(x.status)) {
      const wall = performance.now() - t0;
      const serverMs = x.finished_at ? Date.parse(x.finished_at) - Date.parse(x.created_at) : NaN;
      return { wall, serverMs, execution: x };
    }
    await new Promise((r) => setTimeout(r, 2));
  }
}

export const here = path.dirname(fileURLToPath(import.meta.url));
