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
import { createBroker, type Broker, type BrokerSettings } from '../common/broker/index.js';
import { createDb, type ClosableDb } from './db.js';
import { engine as defaultEngine } from './engine/index.js';
import type { Engine } from './engine/contract.js';
import { Outbox } from './executions/outbox.js';
import { PgQueueService, PgRuntimeService } from './executions/queue-runtime.js';
import { PgExecutionService } from './executions/service.js';
import { ExecutionWaiters } from './executions/waiters.js';
import { VALUES_BESIDE_FEATURE } from './executions/values-gate.js';
import type { Db, ExecutionHooks, ServerDeps } from './services.js';
import { PgCatalogService } from './store/catalog-service.js';
import { migrate } from './store/migrate.js';
import { ScheduleService } from './schedules/service.js';
import { ScheduleTicker } from './schedules/ticker.js';
import { Admitter } from './executions/limits.js';
import { sweepRetention } from './store/retention.js';
import { forgetOffline } from './store/runtime.js';
import { Sweeper, type SweeperTask } from './sweeper.js';
import { type Logger, silentLogger } from '../common/logger.js';

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
  /** Period of the sweeper's heartbeat of this server's runtime row (default 15 000 ms). */
  heartbeatMs?: number;
  /** Republish a queued row whose last notification is older than this (default 120 s). */
  republishAfterMs?: number;
  /** false: no sweeper (tests drive `core.sweeper.tick()` themselves). Default true. */
  sweeper?: boolean;
  /** false: no schedule ticker in this process. Default true. */
  scheduler?: boolean;
  /** Pass period of the schedule ticker (default 500 ms). */
  scheduleIntervalMs?: number;
  /** Executions that ended more than this many days ago are deleted by the sweeper (unset: kept). */
  retentionDays?: number;
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
  /** Speculative decisions written in one round trip (default true; executions/group-commit.ts speculate). */
  speculativeWrites?: boolean;
  /** One-round-trip starts (default true, with speculativeWrites; executions/starts.ts startAhead). For A/B benches. */
  startAhead?: boolean;
  defaultLeaseSeconds?: number;
  maxLeaseSeconds?: number;
  engine?: Engine<any>;
  logger?: Logger;
}

export interface ServerCore {
  deps: ServerDeps;
  db: ClosableDb;
  broker: Broker;
  executions: PgExecutionService;
  outbox: Outbox;
  sweeper: Sweeper;
  schedules: ScheduleService;
  ticker: ScheduleTicker;
  /** The LISTEN session that wakes requests waiting for an execution to end. */
  waiters: ExecutionWaiters;
  serverName: string;
  /** Broker ensure (failure logged, retried lazily), runtime registration, sweeper. Idempotent. */
  start(): Promise<void>;
  /**
   * The first step of a stop whose database is going away too (`playflow dev` on Ctrl-C, which the
   * terminal also sends to its embedded PostgreSQL): background work ends and lost connections are
   * expected from now on; requests are still served until stop().
   */
  quiesce(): Promise<void>;
  stop(): Promise<void>;
  /** Same as stop. */
  close(): Promise<void>;
}

export async function createServerCore(config: ServerCoreConfig, opts: { logger?: Logger; hooks?: ExecutionHooks } = {}): Promise<ServerCore> {
  const log = opts.logger ?? config.logger ?? silentLogger;
  const brokerUrl = config.brokerUrl ?? config.broker?.url;
  if (!config.brokerInstance && !brokerUrl) throw new Error('createServerCore: brokerUrl (or broker.url) is required');
  const serverName = config.serverName ?? `${hostname()}-${process.pid}`;

  // Set when stop() begins: a connection the database ends while this server shuts down (playflow
  // dev stops its embedded PostgreSQL right after) is expected, not worth a warning.
  let stopping = false;
  const db = createDb(config.databaseUrl, {
    max: config.poolSize ?? 10,
    applicationName: `playflow-server ${serverName}`.slice(0, 63),
    onConnectionError: (err) => {
      if (stopping) log.debug?.({ err: err.message }, 'database connection ended while the server stops');
      else log.warn({ err: err.message }, 'database connection lost; requests that needed it answer 503 and are retried');
    },
  });
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
    speculation: config.speculativeWrites, startAhead: config.startAhead,
    defaultLeaseSeconds: config.defaultLeaseSeconds, maxLeaseSeconds: config.maxLeaseSeconds, serverName,
  });
  const admitter = new Admitter({
    db, logger: log, admit: (id) => executions.admit(id), limitOfCatalog: (id) => executions.concurrencyLimit(id),
  });
  executions.onWaiting = () => admitter.kick();
  const runtime = new PgRuntimeService(db);
  const waiters = new ExecutionWaiters({ connectionString: config.databaseUrl, applicationName: `playflow-listen ${serverName}`, logger: log });
  executions.onEnded = (id, ended) => waiters.ended(id, ended);
  executions.onEnding = (id) => waiters.ending(id);
  executions.onEndAbandoned = (id) => waiters.notEnded(id);
  const schedules = new ScheduleService(db);
  const ticker = new ScheduleTicker({ db, executions, logger: log, intervalMs: config.scheduleIntervalMs });
  const deps: ServerDeps = {
    stopping: () => stopping,
    schedules,
    db,
    catalog: new PgCatalogService(db),
    executions,
    queue: new PgQueueService(db),
    runtime,
    serverUrl: config.serverUrl,
    broker,
    waiters,
  };
  const sweeper = new Sweeper({
    db, executions, outbox, runtime, serverName, logger: log,
    intervalMs: config.sweeperIntervalMs, republishAfterMs: config.republishAfterMs, heartbeatMs: config.heartbeatMs,
    tasks: [
      ...(config.sweeperTasks?.(db) ?? []),
      { name: 'runtime-prune', intervalMs: 600_000, run: () => forgetOffline(db.pool) },
      ...(config.retentionDays ? [{ name: 'retention', intervalMs: 60_000, run: () => sweepRetention(db.pool, config.retentionDays!) }] : []),
    ],
  });

  let started = false;
  let stopped: Promise<void> | null = null;
  const core: ServerCore = {
    deps, db, broker, executions, outbox, sweeper, schedules, ticker, waiters, serverName,
    async start() {
      if (started) return;
      started = true;
      try {
        await broker.ensure();
      } catch (err) {
        log.warn({ err: String((err as Error)?.message ?? err) }, 'broker not ready at start; notifications wait for the sweeper');
      }
      await waiters.start();
      await runtime.register({ kind: 'server', name: serverName, info: { server_url: config.serverUrl, pid: process.pid, broker: broker.kind, features: [VALUES_BESIDE_FEATURE] } });
      if (config.sweeper !== false) sweeper.start();
      if (config.scheduler !== false) ticker.start();
      admitter.start();
    },
    async quiesce() {
      stopping = true;
      // waits answer now with the state they have (the LISTEN session would be lost anyway)
      await Promise.all([ticker.stop(), sweeper.stop(), waiters.stop(), admitter.stop()]);
    },
    stop() {
      stopping = true;
      stopped ??= (async () => {
        await ticker.stop();
        await waiters.stop();
        await admitter.stop();
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
