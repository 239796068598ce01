/**
 * The conformance harness: everything real. A fresh PostgreSQL database, the real server
 * (startServer: core + app + sweeper) listening on a free port, real NATS JetStream with stream
 * names of its own, worker processes started with the built CLI (`playflow worker start --v2`),
 * local HTTP servers for the external APIs, and the CLI as a subprocess for register and run.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, type RunningServer } from '../../server/main.js';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../common/logger.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { freePort } from '../../cli/dev/embedded-db.js';
import { BROKER_URL, deleteStream, uniqueBrokerNames } from '../helpers/nats.js';
import { stopProcesses } from '../helpers/processes.js';

const twoUp = fileURLToPath(new URL('../..', import.meta.url));
/** The repository, whether this module runs from the sources (tests) or from dist/ (benchmarks). */
export const ROOT = path.basename(path.resolve(twoUp)) === 'dist' ? path.dirname(path.resolve(twoUp)) : twoUp;
export const CLI = path.join(ROOT, 'dist', 'cli', 'index.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface Harness {
  server: RunningServer;
  db: TestDatabase;
  url: string;
  env: NodeJS.ProcessEnv;
  tmp: string;
  workers: ChildProcess[];
  startWorker(extraEnv?: NodeJS.ProcessEnv): Promise<ChildProcess>;
  /** Another server process on this database and broker (`playflow server start`), once it answers /healthz; close() stops it. */
  startServer(port: number): Promise<ChildProcess>;
  cli(args: string[], opts?: { timeoutMs?: number }): Promise<CliResult>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  workers?: number;
  /** `--concurrency` of each worker process (default 8). */
  concurrency?: number;
  sweeperIntervalMs?: number;
  workerEnv?: NodeJS.ProcessEnv;
  /** Settings of the in-process server beyond the harness's own (e.g. PLAYFLOW_MAX_BODY_BYTES). */
  serverEnv?: NodeJS.ProcessEnv;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const db = await createTestDatabase('pfconf');
  const names = uniqueBrokerNames('CONF');
  const encryptionKey = randomBytes(32).toString('base64');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: db.url,
    BROKER_URL,
    BROKER_STREAM: names.stream,
    BROKER_SUBJECT: names.subject,
    BROKER_CONSUMER: names.consumer,
    PLAYFLOW_ENCRYPTION_KEY: encryptionKey,
    LOG_LEVEL: 'warn',
  };
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  env.SERVER_API_URL = url;
  const config = { ...loadConfig({ ...env, ...opts.serverEnv, PORT: String(port) }), host: '127.0.0.1', sweeperIntervalMs: opts.sweeperIntervalMs ?? 500 };
  const server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'warn' }) });
  const tmp = mkdtempSync(path.join(tmpdir(), 'pfconf-'));
  // Python steps write marker files here; run as root, the worker starts its interpreters as
  // another user (WORKER_PYTHON_USER, default nobody), which must be able to write them.
  chmodSync(tmp, 0o1777);
  const workers: ChildProcess[] = [];
  /** Other server processes (startServer): stopped with the workers by close(). */
  const servers: ChildProcess[] = [];
  // A process that exits without close() (an uncaught error in a test or a bench) takes its
  // children with it: left running, they pulled from their consumers and took CPU from every
  // later run on the machine.
  const killChildren = () => {
    for (const c of [...workers, ...servers]) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  process.once('exit', killChildren);

  const startWorker = async (extraEnv: NodeJS.ProcessEnv = {}) => {
    // PLAYFLOW_WORKER_NODE_ARGS: node flags for the worker processes, e.g. `--cpu-prof` when
    // profiling a benchmark (NODE_OPTIONS refuses --cpu-prof).
    const nodeArgs = (process.env.PLAYFLOW_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, CLI, 'worker', 'start', '--v2', '--concurrency', String(opts.concurrency ?? 8)], {
      env: { ...env, WORKER_METRICS_PORT: '0', ...opts.workerEnv, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout!.on('data', (d) => (log += d));
    child.stderr!.on('data', (d) => (log += d));
    child.on('exit', (code, signal) => {
      if (code && code !== 0 && !signal) process.stderr.write(`worker exited ${code}:\n${log.slice(-2000)}\n`);
    });
    workers.push(child);
    return child;
  };
  for (let i = 0; i < (opts.workers ?? 1); i++) await startWorker();

  const cli = (args: string[], o: { timeoutMs?: number } = {}) =>
    new Promise<CliResult>((resolve) => {
      execFile(process.execPath, [CLI, ...args], { env, timeout: o.timeoutMs ?? 90_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
    });

  const startServerProcess = (serverPort: number) => {
    const serverUrl = `http://127.0.0.1:${serverPort}`;
    const child = spawn(process.execPath, [CLI, 'server', 'start'], {
      env: { ...env, PORT: String(serverPort), HOST: '127.0.0.1', SERVER_API_URL: serverUrl },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    servers.push(child);
    return new Promise<ChildProcess>((resolve, reject) => {
      const deadline = Date.now() + 60_000;
      const poll = async () => {
        try {
          if ((await fetch(`${serverUrl}/healthz`)).ok) return resolve(child);
        } catch {
          // not listening yet
        }
        if (child.exitCode !== null) return reject(new Error(`server on port ${serverPort} exited ${child.exitCode}`));
        if (Date.now() > deadline) return reject(new Error(`server on port ${serverPort} did not start`));
        setTimeout(poll, 100);
      };
      void poll();
    });
  };

  return {
    server,
    db,
    url,
    env,
    tmp,
    workers,
    startWorker,
    startServer: startServerProcess,
    cli,
    async close() {
      process.off('exit', killChildren);
      await stopProcesses([...workers, ...servers]);
      await server.stop();
      await db.drop();
      await deleteStream(names.stream);
    },
  };
}
