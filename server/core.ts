/**
 * The server core: everything below HTTP, built from settings.
 *
 *   const core = await createServerCore({ databaseUrl, brokerUrl, serverUrl, logger });
 *   app = buildApp(core.deps);   // migrations already applied
 *   await core.start();          // broker streams/consumer, runtime registration, sweeper
 *   …
 *   await core.stop();           // sweeper, broker, pool (`close` is the same)
 *
 * Accepts the HTTP layer's ServerConfig shape too (`broker: {url, stream, subject, consumer}`),
 * with the logger in the second argument. NATS being down does not stop the server: the broker is
 * ensured lazily and notifications are republished by the sweeper once it is back.
 */
import { hostname } from 'node:os';
import { createBroker, type Broker, type BrokerSettings } from './broker/index.js';
import { createDb, type ClosableDb } from './db.js';
import { engine as defaultEngine } from './engine/index.js';
import type { Engine } from './engine/contract.js';
import { Outbox } from './executions/outbox.js';
import { PgQueueService, PgRuntimeService } from './executions/queue-runtime.js';
import { PgExecutionService } from './executions/service.js';
import { silentCoreLogger, type CoreLogger } from './executions/types.js';
import type { Db, ExecutionHooks, ServerDeps } from './services.js';
import { PgCatalogService } from './store/catalog-service.js';
import { migrate } from './store/migrate.js';
import { Sweeper, type SweeperTask } from './sweeper.js';

export interface ServerCoreConfig {
  databaseUrl: string;
  /** nats://… or `memory` (in-process broker). Or give `broker.url`. */
  brokerUrl?: string;
  /** The HTTP layer's shape: url plus names. */
  broker?: Partial<BrokerSettings> & { url?: string };
  /** Names and limits of the stream/consumer (defaults of DESIGN.md §3). */
  brokerSettings?: Partial<BrokerSettings>;
  /** An already built broker (e.g. the one `playflow dev` shares with its in-process worker). */
  brokerInstance?: Broker;
  serverUrl: string;
  /** ExecutionHooks, or a factory given the core's Db (the credentials module needs it). */
  hooks?: ExecutionHooks | ((db: Db) => ExecutionHooks);
  /** Extra sweeper tasks (e.g. keychain/vars expiry), built with the core's Db; each runs at most every `intervalMs` (default 10 s). */
  sweeperTasks?: (db: Db) => SweeperTask[];
  sweeperIntervalMs?: number;
  /** Republish a queued row whose last notification is older than this (default 120 s). */
  republishAfterMs?: number;
  /** false: no sweeper (tests drive `core.sweeper.tick()` themselves). Default true. */
  sweeper?: boolean;
  /** Runtime name of this server, default `<hostname>-<pid>`. */
  serverName?: string;
  poolSize?: number;
  snapshots?: boolean;
  /** Snapshot every N appended events (default 20; always at the end). */
  snapshotEvery?: number;
  /** ...or every fraction of the last snapshot's seq when that is more (default 0.5; see ExecutionServiceOptions). */
  snapshotGrowth?: number;
  /** Executions whose latest state this process keeps in memory (default 1000; 0 disables). */
  stateCacheSize?: number;
  defaultLeaseSeconds?: number;
  maxLeaseSeconds?: number;
  engine?: Engine<any>;
  logger?: CoreLogger;
}

export interface ServerCore {
  deps: ServerDeps;
  db: ClosableDb;
  broker: Broker;
  executions: PgExecutionService;
  outbox: Outbox;
  sweeper: Sweeper;
  serverName: string;
  /** Broker ensure (failure logged, retried lazily), runtime registration, sweeper. Idempotent. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Same as stop. */
  close(): Promise<void>;
}

export async function createServerCore(config: ServerCoreConfig, opts: { logger?: CoreLogger; hooks?: ExecutionHooks } = {}): Promise<ServerCore> {
  const log = opts.logger ?? config.logger ?? silentCoreLogger;
  const brokerUrl = config.brokerUrl ?? config.broker?.url;
  if (!config.brokerInstance && !brokerUrl) throw new Error('createServerCore: brokerUrl (or broker.url) is required');
  const serverName = config.serverName ?? `${hostname()}-${process.pid}`;

  const db = createDb(config.databaseUrl, { max: config.poolSize ?? 10, applicationName: `playflow-server ${serverName}`.slice(0, 63) });
  try {
    await migrate(db.pool, { logger: log });
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }

  const { url: _u, ...brokerNames } = config.broker ?? {};
  const settings: Partial<BrokerSettings> = Object.fromEntries(
    Object.entries({ ...brokerNames, ...config.brokerSettings }).filter(([, v]) => v !== undefined && v !== ''),
  );
  const broker = config.brokerInstance ?? createBroker(brokerUrl!, settings, log);
  const hooksOpt = opts.hooks ?? config.hooks;
  const hooks = typeof hooksOpt === 'function' ? hooksOpt(db) : hooksOpt;

  const outbox = new Outbox(db, broker, config.serverUrl, log);
  const executions = new PgExecutionService({
    db, engine: config.engine ?? defaultEngine, outbox, hooks, logger: log, snapshots: config.snapshots,
    snapshotEvery: config.snapshotEvery, snapshotGrowth: config.snapshotGrowth, stateCacheSize: config.stateCacheSize,
    defaultLeaseSeconds: config.defaultLeaseSeconds, maxLeaseSeconds: config.maxLeaseSeconds,
  });
  const runtime = new PgRuntimeService(db);
  const deps: ServerDeps = {
    db,
    catalog: new PgCatalogService(db),
    executions,
    queue: new PgQueueService(db),
    runtime,
    serverUrl: config.serverUrl,
    broker,
  };
  const sweeper = new Sweeper({
    db, executions, outbox, runtime, serverName, logger: log,
    intervalMs: config.sweeperIntervalMs, republishAfterMs: config.republishAfterMs,
    tasks: config.sweeperTasks?.(db),
  });

  let started = false;
  let stopped: Promise<void> | null = null;
  const core: ServerCore = {
    deps, db, broker, executions, outbox, sweeper, serverName,
    async start() {
      if (started) return;
      started = true;
      try {
        await broker.ensure();
      } catch (err) {
        log.warn({ err: String((err as Error)?.message ?? err) }, 'broker not ready at start; notifications wait for the sweeper');
      }
      await runtime.register({ kind: 'server', name: serverName, info: { server_url: config.serverUrl, pid: process.pid, broker: broker.kind } });
      if (config.sweeper !== false) sweeper.start();
    },
    stop() {
      stopped ??= (async () => {
        await sweeper.stop();
        if (!config.brokerInstance) await broker.close().catch(() => {});
        await db.close();
      })();
      return stopped;
    },
    close() {
      return core.stop();
    },
  };
  return core;
}
