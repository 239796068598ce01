/**
 * `playflow worker start --v2`: builds the worker from its settings (worker/config.ts) — the
 * typed client of the server, the broker's durable pull consumer (JetStream, names of DESIGN §3),
 * the runtime — and wires SIGTERM/SIGINT to a graceful stop.
 */
import { PlayflowClient } from '../client/http.js';
import type { ClaimedCommand } from '../common/protocol.js';
import type { JsonObject } from '../playbook/types.js';
import { createBroker } from '../common/broker/index.js';
import { createLogger } from '../common/logger.js';
import type { WorkerConfig } from './config.js';
import { WorkerRuntime, type WorkerRuntimeOptions } from './runtime.js';
import { createServerFetch } from './server-fetch.js';
import type { ResolveAuth } from './tools/types.js';

export interface StartWorkerOptions {
  config: WorkerConfig;
  /** Handle SIGTERM/SIGINT (default true). */
  signals?: boolean;
  /** Overrides for the auth and secret-reference hooks (the credentials/keychain module's). */
  resolveAuthFor?: (cmd: ClaimedCommand) => ResolveAuth;
  prepareTool?: WorkerRuntimeOptions['prepareTool'];
  runtime?: Partial<WorkerRuntimeOptions>;
}

export interface WorkerHandle {
  runtime: WorkerRuntime;
  stop(): Promise<void>;
}

export async function startWorker(opts: StartWorkerOptions): Promise<WorkerHandle> {
  const c = opts.config;
  const logger = createLogger({ name: 'playflow-worker', level: c.logLevel });
  // Keep-alive connections through undici's request API: claim and call.done are on every command's critical path.
  const http = createServerFetch();
  const client = new PlayflowClient({ baseUrl: c.serverUrl, token: c.apiToken, headers: { 'user-agent': `playflow-worker/${c.workerId}` }, fetch: http.fetch });
  const broker = createBroker(c.broker.url, { stream: c.broker.stream, subject: c.broker.subject, consumer: c.broker.consumer, pool: c.pool }, logger);
  const metricsEnabled = c.metricsPort !== undefined;
  const runtime = new WorkerRuntime({
    broker,
    client,
    workerId: c.workerId,
    concurrency: c.concurrency,
    leaseSeconds: c.leaseSeconds,
    eagerDispatch: c.eagerDispatch,
    heartbeatSeconds: c.heartbeatSeconds,
    graceSeconds: c.graceSeconds,
    metricsPort: metricsEnabled && c.metricsPort !== 0 ? c.metricsPort : undefined,
    python: { size: c.pythonPoolSize, maxCallsPerProcess: c.pythonMaxCalls, user: c.pythonUser },
    maxResultBytes: c.maxResultBytes,
    serverUrl: c.serverUrl,
    httpAllow: c.httpAllow,
    fileRoot: c.fileRoot,
    logger,
    resolveAuthFor: opts.resolveAuthFor,
    prepareTool: opts.prepareTool,
    ...opts.runtime,
  });
  runtime.metrics.enableDefault();
  try {
    await runtime.start();
  } catch (err) {
    await runtime.stop().catch(() => {});
    await broker.close().catch(() => {});
    await http.close().catch(() => {});
    throw err;
  }
  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      await runtime.stop();
      await broker.close();
      await http.close().catch(() => {});
    })();
    return stopping;
  };
  if (opts.signals !== false) {
    const onSignal = (sig: NodeJS.Signals) => {
      logger.info({ signal: sig } as JsonObject, 'signal received');
      stop().then(
        () => process.exit(0),
        (err: Error) => {
          logger.error({ err: err.message }, 'worker stop failed');
          process.exit(1);
        },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  }
  return { runtime, stop };
}
