/**
 * `playflow server start`: settings from the environment (server/config.ts), the core
 * (`createServerCore` in server/core.ts: database + migrations, broker, services, sweeper), the
 * HTTP app (server/app) listening on PORT (default 8082).
 *
 * Shutdown on SIGTERM/SIGINT: stop accepting connections (new requests on kept-alive connections
 * get 503), let requests in flight finish, then stop the core (sweeper, outbox, broker, pool).
 * A second signal, or 30 s without finishing, exits at once with status 1; so does an uncaught
 * exception or unhandled rejection (logged first).
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app/index.js';
import { trackConnections, type ConnectionTracker } from './app/connections.js';
import { checkExposure, describeConfig, loadConfig, type ServerConfig } from './config.js';
import { createSqlReader } from './store/sql-reader.js';
import { setTemplateLimits } from '../playbook/template/budget.js';
import { createLogger, type PinoLogger as Logger } from '../common/logger.js';
import { enableDefaultMetrics } from './metrics.js';
import type { ServerDeps } from './services.js';
import { createServerCore } from './core.js';
import { cipherFromEnv } from './crypto.js';
import { HookService } from './hooks/service.js';
import { createSecretsServices, sweepExpired } from './secrets/index.js';

/** What `createServerCore` gives back; only these members are used here. */
export interface ServerCoreHandle {
  deps: ServerDeps;
  /** Background work (broker streams, runtime registration, sweeper), once the app listens. */
  start(): Promise<void>;
  /** Ends background work; lost database connections are expected from now on (see ServerCore). */
  quiesce(): Promise<void>;
  close(): Promise<void>;
}

export interface StartOptions {
  /** Default: loadConfig(process.env). */
  config?: ServerConfig;
  logger?: Logger;
  /** Install SIGTERM/SIGINT handlers (default true; tests pass false and call stop()). */
  handleSignals?: boolean;
  /** Shutdown deadline, ms (default 30000). */
  shutdownTimeoutMs?: number;
  /** Development: without PLAYFLOW_ENCRYPTION_KEY use the fixed dev key (never in production). */
  dev?: boolean;
}

export interface RunningServer {
  app: FastifyInstance;
  core: ServerCoreHandle;
  config: ServerConfig;
  /** http://host:port actually bound (port 0 → the chosen one). */
  address: string;
  /** Graceful stop; idempotent. */
  stop(): Promise<void>;
}

export async function startServer(opts: StartOptions = {}): Promise<RunningServer> {
  const config = opts.config ?? loadConfig();
  setTemplateLimits(config.templateLimits);
  const logger = opts.logger ?? createLogger({ level: config.logLevel });
  enableDefaultMetrics();
  logger.info({ config: describeConfig(config) }, 'starting playflow server');

  // Fail before touching the database when the encryption key is missing or malformed.
  const cipher = cipherFromEnv({ ...process.env, PLAYFLOW_ENCRYPTION_KEY: config.encryptionKey }, { dev: opts.dev });
  // An open API on a reachable address, or the SQL API without the token: refused before the database.
  checkExposure(config);
  let secrets: ReturnType<typeof createSecretsServices> | undefined;
  const core = await createServerCore({
    ...config,
    // Credentials, keychain and vars share the core's pool; their hooks run in the execution
    // transaction and their expiry runs on the core's sweeper.
    hooks: (db) => {
      secrets = createSecretsServices(db, { cipher, logger });
      return secrets.hooks;
    },
    sweeperTasks: (db) => [{ name: 'secrets-expiry', run: () => sweepExpired(db) }],
  }, { logger });
  if (secrets) {
    try {
      await secrets.verify();
    } catch (err) {
      await core.close().catch(() => {});
      throw err;
    }
    Object.assign(core.deps, secrets.deps);
  }
  core.deps.webhooks = new HookService(core.deps.db, cipher, core.deps.executions);
  if (config.sqlApi) {
    try {
      core.deps.sql = await createSqlReader({
        databaseUrl: config.databaseUrl, adminPool: core.deps.db.pool, roleUrl: config.sqlApiUrl,
        secret: config.encryptionKey, timeoutMs: 60_000,
      });
    } catch (err) {
      await core.close().catch(() => {});
      throw err;
    }
  }
  const closeCore = async () => {
    await core.deps.sql?.close().catch(() => {});
    await core.close();
  };
  let app: FastifyInstance;
  try {
    app = await buildApp(core.deps, {
      apiToken: config.apiToken,
      publicEndpoints: config.publicEndpoints,
      sqlApi: config.sqlApi,
      bodyLimit: config.maxBodyBytes,
      logger,
    });
  } catch (err) {
    await closeCore().catch(() => {});
    throw err;
  }

  let address: string;
  let connections: ConnectionTracker | undefined;
  try {
    address = await app.listen({ port: config.port, host: config.host });
    connections = trackConnections(app.server);
    await core.start();
  } catch (err) {
    await app.close().catch(() => {});
    await closeCore().catch(() => {});
    throw err;
  }
  logger.info({ address, serverUrl: config.serverUrl, auth: config.apiToken ? 'bearer token' : 'none' }, 'playflow server listening');
  if (!config.apiToken) {
    logger.warn(
      { host: config.host, allowAnonymous: config.allowAnonymous },
      'PLAYFLOW_API_TOKEN is not set: the API is open to anyone who can reach it',
    );
  }

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      logger.info('shutting down: no new connections, finishing requests in flight');
      // sockets without a request (a browser's preconnect) would hold close() for minutes; those
      // whose request finishes while closing go too (app/connections.ts)
      const closing = app.close();
      connections?.closeUnused();
      const sweep = setInterval(() => connections?.closeUnused(), 200);
      try {
        await closing;
      } finally {
        clearInterval(sweep);
        await closeCore();
      }
      logger.info('server stopped');
    })();
    return stopping;
  };

  if (opts.handleSignals ?? true) {
    const deadline = opts.shutdownTimeoutMs ?? 30_000;
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals += 1;
      if (signals > 1) {
        logger.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      logger.info({ signal }, 'signal received');
      const timer = setTimeout(() => {
        logger.error({ deadline_ms: deadline }, 'shutdown did not finish in time: exiting');
        process.exit(1);
      }, deadline);
      timer.unref();
      stop().then(
        () => {
          clearTimeout(timer);
          process.exit(0);
        },
        (err) => {
          logger.error({ err }, 'error during shutdown');
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // A fault nobody awaited is a bug: log it where the operator looks, then exit non-zero so the
    // orchestrator restarts a clean process (another replica takes the traffic meanwhile).
    const fatal = (kind: string) => (err: unknown) => {
      logger.fatal({ err }, `${kind}: exiting`);
      process.exit(1);
    };
    process.on('uncaughtException', fatal('uncaught exception'));
    process.on('unhandledRejection', fatal('unhandled promise rejection'));
  }

  return { app, core, config, address, stop };
}
