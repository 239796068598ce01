/**
 * Shared set-up for the end-to-end benchmarks: a fresh PostgreSQL database, the real server
 * (in this process) on JetStream with stream names of its own, and worker processes started with
 * the built CLI — the same parts as production, on one machine. Figures only; nothing asserts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PlayflowClient } from '../client/http.js';
import { startServer, type RunningServer } from '../server/main.js';
import { loadConfig } from '../server/config.js';
import { createLogger } from '../server/logger.js';
import { freePort } from '../cli/dev/embedded-db.js';
import { createServerFetch } from '../worker/server-fetch.js';

const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const CLI = fileURLToPath(new URL('../cli/index.js', import.meta.url));

export interface BenchStack {
  client: PlayflowClient;
  url: string;
  server: RunningServer;
  /** CPU time used so far (ms): this process (server and the benchmark's client) and the worker processes (Linux /proc; NaN elsewhere). */
  cpu(): { server: number; workers: number };
  close(): Promise<void>;
}

/** utime + stime of a process in ms (Linux), NaN when unknown. */
function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}
const CLOCK_TICKS = 100;

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
  // The benchmark's client (run + status polling) lives in the server's process: give it the
  // worker's cheap keep-alive transport so it takes as little of the server's CPU as it can.
  const http = createServerFetch();
  const client = new PlayflowClient({ baseUrl: url, fetch: http.fetch });
  // Let the workers connect and warm their python interpreters before anything is timed.
  await new Promise((r) => setTimeout(r, 1500));
  return {
    client,
    url,
    server,
    cpu() {
      const own = process.cpuUsage();
      return { server: (own.user + own.system) / 1000, workers: workers.reduce((sum, w) => sum + processCpuMs(w.pid), 0) };
    },
    async close() {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => new Promise((r) => (w.exitCode !== null ? r(null) : w.once('exit', r)))));
      await http.close();
      await server.stop();
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * Polling interval of runToEnd (BENCH_POLL_MS, default 10 ms). The poll runs in the server's own
 * process and each one is an HTTP request and a query: at 2 ms it doubled the server process's CPU
 * per fibo step (~16–19 ms instead of ~7–9 ms, measured) and slowed what it measured. 10 ms bounds
 * the wall-time error to 10 ms; `created_at → finished_at` is printed as well.
 */
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 10);

/** Runs a registered playbook and waits for its end, polling every POLL_MS. Returns wall ms. */
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
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

export const here = path.dirname(fileURLToPath(import.meta.url));
