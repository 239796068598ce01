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
 * | pool               | WORKER_POOL (the worker pool whose commands it runs;     | default |
 * |                    | a DNS-1123 label, see the playbook's `pool`)             |         |
 * | workerId           | WORKER_ID (a StatefulSet pod name is a good one)         | <hostname>-<pid> |
 * | leaseSeconds       | WORKER_LEASE_SECONDS                                     | 20 |
 * | heartbeatSeconds   | WORKER_HEARTBEAT_SECONDS (lease + broker working())      | 5 |
 * | graceSeconds       | WORKER_SHUTDOWN_GRACE_SECONDS                            | 30 |
 * | metricsPort        | WORKER_METRICS_PORT (0 = off)                            | 9090 |
 * | pythonPoolSize     | WORKER_PYTHON_POOL_SIZE                                  | min(concurrency, 4) |
 * | pythonMaxCalls     | WORKER_PYTHON_MAX_CALLS (interpreter retired after       | 1000 |
 * |                    | exactly this many calls)                                 |     |
 * | pythonUser         | WORKER_PYTHON_USER (name, uid or uid:gid; `off`) — the   | nobody when root, |
 * |                    | interpreters' user, so they cannot read the worker's     | else off |
 * |                    | /proc/<pid>/environ or memory                            |     |
 * | maxResultBytes     | WORKER_MAX_RESULT_BYTES (python answer, http body)       | 67108864 (64 MiB) |
 * | httpAllow          | WORKER_HTTP_ALLOW (host or host:port, comma separated):  | none |
 * |                    | targets the http tool may reach although they are the    |      |
 * |                    | worker's server or link-local / metadata addresses       |      |
 * | fileRoot           | WORKER_FILE_ROOT (confine the file tool)                 | none |
 * | eagerDispatch      | WORKER_EAGER_DISPATCH (on/off: take the next command      | on |
 * |                    | with call.done, see ClaimNextRequest)                    |    |
 * | logLevel           | LOG_LEVEL                                                | info |
 *
 * Read directly by the tools: PLAYFLOW_PYTHON (interpreter, default python3), WORKER_SCRIPT_ROOT
 * (where `script: {path}` files of python/postgres tools are read; none: refused), SMTP_HOST,
 * SMTP_PORT, SMTP_USER, SMTP_PASSWORD, SMTP_SECURE, SMTP_FROM (email fallback server). The
 * python interpreters get only PATH, HOME, LANG/LC_*, TZ, TMPDIR, VIRTUAL_ENV, PYENV_*,
 * SSL_CERT_*, proxies, CA bundles, PYTHON* and the names listed in WORKER_PYTHON_ENV (comma
 * separated) from the worker's environment — never its tokens or broker URL.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { ConfigError, DEFAULT_BROKER, DEFAULT_BROKER_URL, LOG_LEVELS, parsePort, serverUrlFromEnv, type LogLevel } from '../common/config.js';
import { DEFAULT_POOL } from '../playbook/types.js';
import { POOL_NAME_PATTERN } from '../playbook/schema.js';
import { workerIdProblem } from '../common/contract/worker-id.js';
import { DEFAULT_MAX_CALLS } from './python/pool.js';

function poolName(v: string): string {
  if (!new RegExp(POOL_NAME_PATTERN).test(v)) throw new ConfigError('WORKER_POOL', `expected a pool name (lower-case letters, digits and '-', at most 63), got ${JSON.stringify(v)}`);
  return v;
}

export interface WorkerConfig {
  serverUrl: string;
  apiToken?: string;
  broker: { url: string; stream: string; subject: string; consumer: string };
  /** The worker pool whose commands this worker runs (its broker consumer and eager claims). */
  pool: string;
  concurrency: number;
  workerId: string;
  leaseSeconds: number;
  heartbeatSeconds: number;
  graceSeconds: number;
  metricsPort: number;
  pythonPoolSize: number;
  pythonMaxCalls: number;
  /** Interpreters run as this user (null: the worker's own). */
  pythonUser: { uid: number; gid: number } | null;
  maxResultBytes: number;
  httpAllow: string[];
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

/**
 * WORKER_PYTHON_USER: `off`, a user name (looked up in /etc/passwd), `uid` or `uid:gid`. Unset: as
 * root, `nobody`; otherwise off (the interpreters share the worker's user — see the README on
 * what then holds).
 */
export function pythonUser(raw: string | undefined, isRoot = process.getuid?.() === 0): { uid: number; gid: number } | null {
  if (raw === undefined) {
    if (!isRoot) return null;
    raw = 'nobody';
  }
  if (['off', 'none', 'false', 'no'].includes(raw.toLowerCase())) return null;
  const ids = /^(\d+)(?::(\d+))?$/.exec(raw);
  let user: { uid: number; gid: number };
  if (ids) user = { uid: Number(ids[1]), gid: Number(ids[2] ?? ids[1]) };
  else {
    let passwd = '';
    try {
      passwd = readFileSync('/etc/passwd', 'utf8');
    } catch {
      // no passwd file: only numeric ids work
    }
    const line = passwd.split('\n').find((l) => l.split(':')[0] === raw);
    if (!line) throw new ConfigError('WORKER_PYTHON_USER', `no user '${raw}' in /etc/passwd (give uid:gid, or off)`);
    const f = line.split(':');
    user = { uid: Number(f[2]), gid: Number(f[3]) };
  }
  if (user.uid === 0) return null;
  if (!isRoot) throw new ConfigError('WORKER_PYTHON_USER', 'running the interpreters as another user needs a worker running as root (or set it to off)');
  return user;
}

export function loadWorkerConfig(env: Env = process.env, overrides: Partial<WorkerConfig> = {}): WorkerConfig {
  const serverVar = serverUrlFromEnv(env);
  const serverUrl = (overrides.serverUrl ?? serverVar?.url ?? 'http://localhost:8082').replace(/\/+$/, '');
  try {
    const u = new URL(serverUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
  } catch {
    throw new ConfigError(overrides.serverUrl === undefined && serverVar ? serverVar.variable : '--server', `expected an http(s) URL, got ${JSON.stringify(serverUrl)}`);
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
    pool: poolName(get(env, 'WORKER_POOL') ?? DEFAULT_POOL),
    concurrency,
    workerId: get(env, 'WORKER_ID') ?? `${hostname()}-${process.pid}`,
    leaseSeconds: positive(env, 'WORKER_LEASE_SECONDS', 20, { min: 5 }),
    heartbeatSeconds: positive(env, 'WORKER_HEARTBEAT_SECONDS', 5, { integer: false, min: 0.1 }),
    graceSeconds: positive(env, 'WORKER_SHUTDOWN_GRACE_SECONDS', 30, { integer: false, min: 0 }),
    metricsPort: get(env, 'WORKER_METRICS_PORT') !== undefined ? parsePort(get(env, 'WORKER_METRICS_PORT')!, 'WORKER_METRICS_PORT') : 9090,
    pythonPoolSize: positive(env, 'WORKER_PYTHON_POOL_SIZE', Math.min(concurrency, 4)),
    pythonMaxCalls: positive(env, 'WORKER_PYTHON_MAX_CALLS', DEFAULT_MAX_CALLS),
    pythonUser: pythonUser(get(env, 'WORKER_PYTHON_USER')),
    maxResultBytes: positive(env, 'WORKER_MAX_RESULT_BYTES', 64 * 1024 * 1024, { min: 1024 }),
    httpAllow: (get(env, 'WORKER_HTTP_ALLOW') ?? '').split(',').map((x) => x.trim()).filter(Boolean),
    fileRoot: get(env, 'WORKER_FILE_ROOT'),
    eagerDispatch: onOff(env, 'WORKER_EAGER_DISPATCH', true),
    logLevel: logLevel as LogLevel,
    ...overrides,
  };
  const badId = workerIdProblem(cfg.workerId);
  if (badId) throw new ConfigError('WORKER_ID', `${badId}, got ${JSON.stringify(cfg.workerId)}`);
  if (overrides.concurrency !== undefined && get(env, 'WORKER_PYTHON_POOL_SIZE') === undefined && overrides.pythonPoolSize === undefined) {
    cfg.pythonPoolSize = Math.min(cfg.concurrency, 4);
  }
  return cfg;
}
