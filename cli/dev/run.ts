/**
 * `playflow dev` as a library: the embedded PostgreSQL (embedded-db.ts), the API server
 * (server/main.ts `startServer`) and a worker runtime (worker/runtime.ts) in ONE process, on ONE
 * in-process broker — the MemoryBroker built here and handed to both: to the server core through
 * `ServerCoreConfig.brokerInstance` (startServer passes its config on to createServerCore) and to
 * the worker through `WorkerRuntimeOptions.broker`. The worker still claims commands and reports
 * events over HTTP, exactly like a worker pod, so dev exercises the production protocol.
 *
 * Stop order: worker (calls in flight finish within the grace), server (requests in flight
 * finish), broker, database.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { PlayflowClient } from '../../client/http.js';
import { loadConfig, type ServerConfig } from '../../server/config.js';
import { MemoryBroker } from '../../common/broker/index.js';
import { createLogger, type PinoLogger as Logger } from '../../common/logger.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { WorkerRuntime } from '../../worker/runtime.js';
import { ensureDataDir, freePort, startEmbeddedDb, type EmbeddedDb } from './embedded-db.js';
import { KEY_FILE, loadOrCreateDevKey } from './key.js';
import { humanLogStream } from './log.js';

export const DEFAULT_DEV_PORT = 8082;

/** `--data-dir`, else PLAYFLOW_DEV_DIR, else ~/.playflow/dev. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.PLAYFLOW_DEV_DIR?.trim();
  return path.resolve(fromEnv || path.join(homedir(), '.playflow', 'dev'));
}

export interface DevOptions {
  dataDir: string;
  /** undefined: 8082; 0: any free port. */
  port?: number;
  /** When the default port is taken, take a free one instead of failing. */
  portFallback?: boolean;
  verbose?: boolean;
  /** Worker concurrency (default 8). */
  concurrency?: number;
}

export interface DevKeyInfo {
  source: 'env' | 'generated' | 'file';
  /** The key file: the key in use, or (source env) the earlier generated key, still accepted for decryption. */
  file?: string;
}

export interface DevInstance {
  /** http://127.0.0.1:<port> */
  url: string;
  client: PlayflowClient;
  db: EmbeddedDb;
  server: RunningServer;
  worker: WorkerRuntime;
  broker: MemoryBroker;
  key: DevKeyInfo;
  logger: Logger;
  /** Stops everything; idempotent. */
  stop(): Promise<void>;
}

const isLoopback = (host: string) => host === '127.0.0.1' || host === 'localhost' || host === '::1';

async function choosePort(opts: DevOptions): Promise<number> {
  if (opts.port === 0) return freePort(0);
  const wanted = opts.port ?? DEFAULT_DEV_PORT;
  const got = await freePort(wanted);
  if (got === wanted || opts.portFallback) return got;
  throw new Error(`port ${wanted} is in use (another playflow server?): pass --port <n>, or --port 0 for any free port`);
}

export async function startDev(opts: DevOptions): Promise<DevInstance> {
  const env = process.env;
  const verbose = opts.verbose ?? false;
  const level = env.LOG_LEVEL?.trim() ? loadConfig({ LOG_LEVEL: env.LOG_LEVEL }).logLevel : verbose ? 'info' : 'warn';
  const host = env.HOST?.trim() || '127.0.0.1';
  // Listening on loopback only, an open API is the expected dev set-up: not worth a warning each run.
  const drop = (line: string) => !verbose && isLoopback(host) && line.includes('PLAYFLOW_API_TOKEN is not set');
  const logger = createLogger({ level, name: 'playflow-server', destination: humanLogStream({ drop }) });

  ensureDataDir(opts.dataDir);
  let key: DevKeyInfo;
  let keyValue: string | undefined;
  if (env.PLAYFLOW_ENCRYPTION_KEY?.trim()) {
    key = { source: 'env' };
    // Rows sealed by earlier runs with the generated key keep decrypting: it joins the previous
    // keys (the current one seals everything new; `reencryptAll` can move old rows over).
    const file = path.join(opts.dataDir, KEY_FILE);
    if (existsSync(file)) {
      const old = readFileSync(file, 'utf8').trim();
      const previous = (env.PLAYFLOW_ENCRYPTION_KEY_PREVIOUS ?? '').split(',').map((k) => k.trim()).filter(Boolean);
      if (old && old !== env.PLAYFLOW_ENCRYPTION_KEY.trim() && !previous.includes(old)) {
        process.env.PLAYFLOW_ENCRYPTION_KEY_PREVIOUS = [...previous, old].join(',');
      }
      key.file = file;
    }
  } else {
    const k = loadOrCreateDevKey(opts.dataDir);
    key = { source: k.created ? 'generated' : 'file', file: k.file };
    keyValue = k.key;
  }

  // The port first: a taken port is reported before PostgreSQL starts.
  const port = await choosePort(opts);
  const db = await startEmbeddedDb(opts.dataDir, { log: verbose ? (l) => logger.debug({ postgres: l.trim() }, 'postgres') : undefined });
  const broker = new MemoryBroker({ pool: '*' }, logger);
  let server: RunningServer | undefined;
  let worker: WorkerRuntime | undefined;
  const cleanup = async () => {
    // With nothing in flight, closing the broker at once ends the worker's pending long-poll
    // fetches (up to 1 s otherwise). Nothing is lost: commands live in the queue table, and the
    // sweeper republishes what a notification never delivered.
    const idle = (worker?.inFlightCount ?? 0) === 0;
    // A terminal's Ctrl-C reached the embedded PostgreSQL too: it is shutting down already, so the
    // server's lost connections from here on are expected, not warnings.
    await server?.core.quiesce().catch(() => {});
    await Promise.all([
      worker?.stop().catch((err: Error) => logger.error({ err: err.message }, 'worker stop failed')),
      idle ? broker.close().catch(() => {}) : undefined,
    ]);
    await server?.stop().catch((err: Error) => logger.error({ err: err.message }, 'server stop failed'));
    await broker.close().catch(() => {});
    await db.stop().catch((err: Error) => logger.error({ err: err.message }, 'database stop failed'));
  };
  try {
    const url = `http://${host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
    const base = loadConfig({ ...env, DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: String(port), HOST: host, LOG_LEVEL: level });
    const config: ServerConfig & { brokerInstance: MemoryBroker } = {
      ...base,
      serverUrl: url,
      ...(keyValue ? { encryptionKey: keyValue } : {}),
      brokerInstance: broker,
    };
    server = await startServer({ config, logger, handleSignals: false });
    if ((server.core as { broker?: unknown }).broker !== broker) {
      throw new Error('the server core did not take the shared in-process broker (ServerCoreConfig.brokerInstance)');
    }
    const client = new PlayflowClient({ baseUrl: url, token: config.apiToken });
    worker = new WorkerRuntime({
      broker,
      client: new PlayflowClient({ baseUrl: url, token: config.apiToken, headers: { 'user-agent': 'playflow-dev-worker' } }),
      workerId: `dev-${process.pid}`,
      concurrency: opts.concurrency ?? 8,
      // Two warm interpreters for a laptop (python calls beyond two wait for a free one).
      python: { size: 2 },
      graceSeconds: 10,
      logger: logger.child({ name: 'playflow-worker' }),
    });
    await worker.start();
    let stopping: Promise<void> | undefined;
    return {
      url, client, db, server, worker, broker, key, logger,
      stop: () => (stopping ??= cleanup()),
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
