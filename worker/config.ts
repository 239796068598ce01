/**
 * Worker settings, from the environment (names shared with the server where they overlap) and
 * the command line. Everything has a default, so `playflow worker start --v2` works against a
 * local server and NATS.
 *
 * | Setting            | Environment                                              | Default |
 * |--------------------|----------------------------------------------------------|---------|
 * | serverUrl          | SERVER_API_URL, SERVER_URL_FOR_WORKERS, FLOW_SERVER_URL  | http://localhost:8082 |
 * | apiToken           | PLAYFLOW_API_TOKEN                                       | none |
 * | broker.url         | BROKER_URL (`memory` only inside `playflow dev`)          | nats://127.0.0.1:4222 |
 * | broker names       | BROKER_STREAM, BROKER_SUBJECT, BROKER_CONSUMER           | FLOW_COMMANDS, flow.commands, worker-pool |
 * | concurrency        | WORKER_CONCURRENCY                                       | 8 |
 * | workerId           | WORKER_ID (a StatefulSet pod name is a good one)         | <hostname>-<pid> |
 * | leaseSeconds       | WORKER_LEASE_SECONDS                                     | 60 |
 * | heartbeatSeconds   | WORKER_HEARTBEAT_SECONDS (lease + broker working())      | 10 |
 * | graceSeconds       | WORKER_SHUTDOWN_GRACE_SECONDS                            | 30 |
 * | metricsPort        | WORKER_METRICS_PORT (0 = off)                            | 9090 |
 * | pythonPoolSize     | WORKER_PYTHON_POOL_SIZE                                  | min(concurrency, 4) |
 * | pythonMaxCalls     | WORKER_PYTHON_MAX_CALLS (recycle an interpreter after)   | 200 |
 * | fileRoot           | WORKER_FILE_ROOT (confine the file tool)                 | none |
 * | eagerDispatch      | WORKER_EAGER_DISPATCH (on/off: take the next command      | on |
 * |                    | with call.done, see ClaimNextRequest)                    |    |
 * | logLevel           | LOG_LEVEL                                                | info |
 *
 * Read directly by the tools: PLAYFLOW_PYTHON (interpreter, default python3), SMTP_HOST,
 * SMTP_PORT, SMTP_USER, SMTP_PASSWORD, SMTP_SECURE, SMTP_FROM (email fallback server). The
 * python interpreters get only PATH, HOME, LANG/LC_*, TZ, TMPDIR, VIRTUAL_ENV, PYENV_*,
 * SSL_CERT_*, proxies, CA bundles, PYTHON* and the names listed in WORKER_PYTHON_ENV (comma
 * separated) from the worker's environment — never its tokens or broker URL.
 */
import { hostname } from 'node:os';
import { ConfigError, DEFAULT_BROKER, DEFAULT_BROKER_URL, LOG_LEVELS, parsePort, type LogLevel } from '../server/config.js';

export interface WorkerConfig {
  serverUrl: string;
  apiToken?: string;
  broker: { url: string; stream: string; subject: string; consumer: string };
  concurrency: number;
  workerId: string;
  leaseSeconds: number;
  heartbeatSeconds: number;
  graceSeconds: number;
  metricsPort: number;
  pythonPoolSize: number;
  pythonMaxCalls: number;
  fileRoot?: string;
  eagerDispatch: boolean;
  logLevel: LogLevel;
}

type Env = Record<string, string | undefined>;

function get(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function positive(env: Env, name: string, dflt: number, { integer = true, min = 1 } = {}): number {
  const raw = get(env, name);
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
    throw new ConfigError(name, `expected ${integer ? 'an integer' : 'a number'} >= ${min}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

function onOff(env: Env, name: string, dflt: boolean): boolean {
  const raw = get(env, name)?.toLowerCase();
  if (raw === undefined) return dflt;
  if (['on', 'true', '1', 'yes'].includes(raw)) return true;
  if (['off', 'false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(name, `expected on or off, got ${JSON.stringify(raw)}`);
}

export function loadWorkerConfig(env: Env = process.env, overrides: Partial<WorkerConfig> = {}): WorkerConfig {
  const serverVar = ['SERVER_API_URL', 'SERVER_URL_FOR_WORKERS', 'FLOW_SERVER_URL'].find((n) => get(env, n) !== undefined);
  const serverUrl = (overrides.serverUrl ?? (serverVar ? get(env, serverVar)! : 'http://localhost:8082')).replace(/\/+$/, '');
  try {
    const u = new URL(serverUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
  } catch {
    throw new ConfigError(serverVar ?? '--server', `expected an http(s) URL, got ${JSON.stringify(serverUrl)}`);
  }
  const concurrency = overrides.concurrency ?? positive(env, 'WORKER_CONCURRENCY', 8);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new ConfigError('--concurrency', `expected a positive integer, got ${concurrency}`);
  const logLevel = (get(env, 'LOG_LEVEL') ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) throw new ConfigError('LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}`);
  const cfg: WorkerConfig = {
    serverUrl,
    apiToken: get(env, 'PLAYFLOW_API_TOKEN'),
    broker: {
      url: get(env, 'BROKER_URL') ?? DEFAULT_BROKER_URL,
      stream: get(env, 'BROKER_STREAM') ?? DEFAULT_BROKER.stream,
      subject: get(env, 'BROKER_SUBJECT') ?? DEFAULT_BROKER.subject,
      consumer: get(env, 'BROKER_CONSUMER') ?? DEFAULT_BROKER.consumer,
    },
    concurrency,
    workerId: get(env, 'WORKER_ID') ?? `${hostname()}-${process.pid}`,
    leaseSeconds: positive(env, 'WORKER_LEASE_SECONDS', 60, { min: 5 }),
    heartbeatSeconds: positive(env, 'WORKER_HEARTBEAT_SECONDS', 10, { integer: false, min: 0.1 }),
    graceSeconds: positive(env, 'WORKER_SHUTDOWN_GRACE_SECONDS', 30, { integer: false, min: 0 }),
    metricsPort: get(env, 'WORKER_METRICS_PORT') !== undefined ? parsePort(get(env, 'WORKER_METRICS_PORT')!, 'WORKER_METRICS_PORT') : 9090,
    pythonPoolSize: positive(env, 'WORKER_PYTHON_POOL_SIZE', Math.min(concurrency, 4)),
    pythonMaxCalls: positive(env, 'WORKER_PYTHON_MAX_CALLS', 200),
    fileRoot: get(env, 'WORKER_FILE_ROOT'),
    eagerDispatch: onOff(env, 'WORKER_EAGER_DISPATCH', true),
    logLevel: logLevel as LogLevel,
    ...overrides,
  };
  if (overrides.concurrency !== undefined && get(env, 'WORKER_PYTHON_POOL_SIZE') === undefined && overrides.pythonPoolSize === undefined) {
    cfg.pythonPoolSize = Math.min(cfg.concurrency, 4);
  }
  return cfg;
}
