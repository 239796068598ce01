/**
 * `playflow worker start --v2 [--concurrency N] [--server URL]`: a worker of the v2 messaging
 * model (JetStream notifications, commands claimed through the server). Settings: worker/config.ts.
 * `playflow worker list`: the servers and workers registered with the server, online or offline.
 */
import type { Command } from 'commander';
import { ConfigError, parsePort } from '../../common/config.js';
import { applyInterruptBudget, interruptBudget } from '../../common/v8-tiering.js';
import { table } from '../output.js';
import { action, apiOptions, clientFrom, printBody, wholeNumber, type ApiOptions } from './common.js';

interface StartOptions {
  v2?: boolean;
  concurrency?: string;
  pool?: string;
  server?: string;
  broker?: string;
  workerId?: string;
  metricsPort?: string;
  grace?: string;
}

export function register(program: Command): void {
  const worker = program.command('worker').description('Workers: run the tools of queued commands');
  apiOptions(worker.command('list').description('Servers and workers registered with the server: online while they heartbeat (60 s), offline after'))
    .action(action(async (opts: ApiOptions) => {
      const res = await clientFrom(opts).listRuntime();
      if (printBody(opts, res)) return;
      process.stdout.write(table(['kind', 'name', 'status', 'pool', 'last heartbeat'],
        res.runtimes.map((r) => [r.kind, r.name, r.live ? 'online' : 'offline', r.kind === 'worker' ? String(r.info?.pool ?? '') : '', `${Math.round(r.heartbeat_age_seconds)} s ago`]),
        'No servers or workers registered.'));
    }));
  worker
    .command('start')
    .description('Start a worker (env: SERVER_API_URL, BROKER_URL, WORKER_CONCURRENCY, WORKER_METRICS_PORT, …)')
    .option('--v2', 'v2 worker messaging (broker notifications + server claims); the only model, accepted for compatibility', true)
    .option('--concurrency <n>', 'commands handled at once (env WORKER_CONCURRENCY, default 8)')
    .option('--pool <name>', "the worker pool whose commands it runs (env WORKER_POOL, default 'default')")
    .option('--server <url>', 'server base URL (env SERVER_API_URL / SERVER_URL_FOR_WORKERS / FLOW_SERVER_URL)')
    .option('--broker <url>', 'broker URL (env BROKER_URL, default nats://127.0.0.1:4222)')
    .option('--worker-id <id>', 'worker name (env WORKER_ID, default <hostname>-<pid>)')
    .option('--metrics-port <port>', '/healthz and /metrics port (env WORKER_METRICS_PORT, default 9090; 0 disables)')
    .option('--grace <seconds>', 'shutdown grace for calls in flight (env WORKER_SHUTDOWN_GRACE_SECONDS, default 30)')
    .action(async (opts: StartOptions) => {
      try {
        const env = { ...process.env };
        if (opts.broker) env.BROKER_URL = opts.broker;
        if (opts.workerId) env.WORKER_ID = opts.workerId;
        if (opts.pool) env.WORKER_POOL = opts.pool;
        if (opts.grace !== undefined) env.WORKER_SHUTDOWN_GRACE_SECONDS = String(wholeNumber(opts.grace, '--grace'));
        if (opts.metricsPort !== undefined) env.WORKER_METRICS_PORT = String(parsePort(opts.metricsPort, '--metrics-port'));
        // `Number` read `1e1` as 10 and `0x10` as 16: digits only, as every numeric option of the CLI
        if (opts.concurrency !== undefined) env.WORKER_CONCURRENCY = String(wholeNumber(opts.concurrency, '--concurrency', 1));
        const { loadWorkerConfig } = await import('../../worker/config.js');
        const config = loadWorkerConfig(env, opts.server ? { serverUrl: opts.server } : {});
        if (config.metricsPort === 0) (config as { metricsPort?: number }).metricsPort = undefined;
        const budget = interruptBudget(env); // a malformed value fails before anything starts
        const { startWorker } = await import('../../worker/main.js');
        await startWorker({ config });
        applyInterruptBudget(budget); // once consuming: see common/v8-tiering.ts
      } catch (err) {
        const message = err instanceof ConfigError ? `invalid setting ${err.message}` : err instanceof Error ? err.message : String(err);
        process.stderr.write(`error: cannot start the worker: ${message}\n`);
        process.exit(1);
      }
    });
}
