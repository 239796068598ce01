/**
 * The server's settings, read once from the environment (DESIGN.md §3). `loadConfig` never
 * throws for a missing optional value; it throws `ConfigError` naming the variable for a value
 * that is present but malformed, so `playflow server start` fails with a clear message.
 *
 * | Variable | Default | Meaning |
 * |---|---|---|
 * | DATABASE_URL | postgres://postgres@127.0.0.1:5432/playflow | PostgreSQL of the server |
 * | BROKER_URL | nats://127.0.0.1:4222 | NATS with JetStream (credentials inside the URL); `memory` = in-process broker |
 * | BROKER_STREAM / BROKER_SUBJECT / BROKER_CONSUMER | FLOW_COMMANDS / flow.commands / worker-pool | broker names |
 * | SERVER_API_URL (else SERVER_URL_FOR_WORKERS, else FLOW_SERVER_URL) | http://localhost:<PORT> | base URL workers use to reach this server |
 * | PORT | 8082 | listening port |
 * | HOST | 0.0.0.0 | listening address |
 * | PLAYFLOW_API_TOKEN | (none) | bearer token required on every endpoint but /health, /healthz, /readyz |
 * | PLAYFLOW_PUBLIC_ENDPOINTS | metrics | comma list of `metrics`, `docs` served without the token (scrapers, browsers); `none` protects them too |
 * | PLAYFLOW_SQL_API | off | `on` enables POST /api/postgres/execute (read-only, needs PLAYFLOW_API_TOKEN); off it answers 403 `sql_api_disabled` |
 * | PLAYFLOW_SQL_API_URL | (none) | the SQL API connects as this (read-only, non-superuser) role instead of playflow_sql_reader |
 * | PLAYFLOW_ALLOW_ANONYMOUS | false | `true` lets the server listen on a non-loopback HOST without PLAYFLOW_API_TOKEN |
 * | PLAYFLOW_TEMPLATE_MAX_OUTPUT / _MAX_STRING / _MAX_ITEMS / _MAX_DEPTH / _MAX_STEPS / _MAX_MS | see playbook/template/budget.ts | budgets of one template render |
 * | PLAYFLOW_MAX_BODY_BYTES | 10485760 (10 MiB) | largest request body (413 beyond); it caps what a step can return, since a worker reports its result in one request |
 * | PLAYFLOW_ENCRYPTION_KEY | (none) | read here, validated by the credential store |
 * | LOG_LEVEL | info | pino level (trace, debug, info, warn, error, fatal, silent) |
 * | PLAYFLOW_SPECULATIVE_WRITES | on | `off`: every step takes the execution's lock before deciding (three round trips instead of one; see executions/lazy-tx.ts), and a start takes two (executions/start-ahead.ts) |
 */

import type { TemplateLimits } from '../playbook/template/budget.js';
import { ConfigError, DEFAULT_BROKER, DEFAULT_BROKER_URL, envValue as get, parseBool, parsePort, parseUrl, serverUrlFromEnv, type BrokerConfig, type Env, type LogLevel, LOG_LEVELS } from '../common/config.js';

export { ConfigError, LOG_LEVELS, DEFAULT_BROKER, DEFAULT_BROKER_URL, parsePort, type BrokerConfig, type LogLevel } from '../common/config.js';

export type PublicEndpointGroup = 'metrics' | 'docs';

export interface ServerConfig {
  databaseUrl: string;
  broker: BrokerConfig;
  /** Base URL workers use to reach this server; goes into every command notification. */
  serverUrl: string;
  port: number;
  host: string;
  apiToken?: string;
  publicEndpoints: PublicEndpointGroup[];
  sqlApi: boolean;
  /** PLAYFLOW_SQL_API_URL: the role the SQL API connects as (default playflow_sql_reader). */
  sqlApiUrl?: string;
  /** PLAYFLOW_ALLOW_ANONYMOUS: serve a non-loopback address without a token. */
  allowAnonymous: boolean;
  /** PLAYFLOW_TEMPLATE_*: budgets of one template render (unset: the defaults of budget.ts). */
  templateLimits: Partial<TemplateLimits>;
  /** PLAYFLOW_MAX_BODY_BYTES: largest request body, so also the largest step result a worker can report. */
  maxBodyBytes: number;
  /** Raw value; the credential store validates it (32 bytes, base64). */
  encryptionKey?: string;
  logLevel: LogLevel;
  /** Run the schedule ticker in this process (PLAYFLOW_SCHEDULER, default on; every replica may). */
  scheduler: boolean;
  /** Decide a worker's event on cached state and write it in one round trip (PLAYFLOW_SPECULATIVE_WRITES, default on). */
  speculativeWrites: boolean;
  /** Pass period of the schedule ticker (PLAYFLOW_SCHEDULE_INTERVAL_MS, default 500). */
  scheduleIntervalMs: number;
  /** Delete executions that ended more than this many days ago (PLAYFLOW_RETENTION_DAYS; unset: keep all). */
  retentionDays?: number;
}

export const DEFAULT_PORT = 8082;
/**
 * /metrics is public by default: Prometheus scrapes it from pod annotations, which carry no
 * credentials, and it holds counts and route patterns only (no ids, payloads or secrets).
 */
export const DEFAULT_PUBLIC_ENDPOINTS: PublicEndpointGroup[] = ['metrics'];
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/playflow';

function parseInterval(value: string | undefined, variable: string, dflt: number): number {
  if (value === undefined) return dflt;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 50 || n > 3_600_000) throw new ConfigError(variable, `expected milliseconds from 50 to 3600000, got ${JSON.stringify(value)}`);
  return n;
}

export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

function parseBytes(value: string | undefined, variable: string, dflt: number): number {
  if (value === undefined) return dflt;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1024 || n > 1024 ** 3) throw new ConfigError(variable, `expected bytes from 1024 to 1073741824, got ${JSON.stringify(value)}`);
  return n;
}

function parseDays(value: string | undefined, variable: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new ConfigError(variable, `expected a positive number of days, got ${JSON.stringify(value)}`);
  return n;
}

const TEMPLATE_LIMIT_VARS: Record<keyof TemplateLimits, string> = {
  maxOutput: 'PLAYFLOW_TEMPLATE_MAX_OUTPUT',
  maxString: 'PLAYFLOW_TEMPLATE_MAX_STRING',
  maxItems: 'PLAYFLOW_TEMPLATE_MAX_ITEMS',
  maxDepth: 'PLAYFLOW_TEMPLATE_MAX_DEPTH',
  maxSteps: 'PLAYFLOW_TEMPLATE_MAX_STEPS',
  maxMs: 'PLAYFLOW_TEMPLATE_MAX_MS',
};

function parseTemplateLimits(env: Env): Partial<TemplateLimits> {
  const out: Partial<TemplateLimits> = {};
  for (const [key, variable] of Object.entries(TEMPLATE_LIMIT_VARS) as [keyof TemplateLimits, string][]) {
    const raw = get(env, variable);
    if (raw === undefined) continue;
    const n = Number(raw.replace(/_/g, ''));
    if (!/^[\d_]+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) {
      throw new ConfigError(variable, `expected a positive integer, got ${JSON.stringify(raw)}`);
    }
    out[key] = n;
  }
  return out;
}

export function loadConfig(env: Env = process.env, overrides: Partial<ServerConfig> = {}): ServerConfig {
  const port = overrides.port ?? (get(env, 'PORT') !== undefined ? parsePort(get(env, 'PORT')!) : DEFAULT_PORT);

  const databaseUrl = parseUrl(get(env, 'DATABASE_URL') ?? DEFAULT_DATABASE_URL, 'DATABASE_URL', ['postgres:', 'postgresql:']);

  const brokerUrlRaw = get(env, 'BROKER_URL') ?? DEFAULT_BROKER_URL;
  const brokerUrl = brokerUrlRaw === 'memory' ? 'memory' : parseUrl(brokerUrlRaw, 'BROKER_URL', ['nats:', 'tls:', 'ws:', 'wss:']);

  const serverUrlVar = serverUrlFromEnv(env);
  const serverUrl = serverUrlVar
    ? parseUrl(serverUrlVar.url, serverUrlVar.variable, ['http:', 'https:']).replace(/\/+$/, '')
    : `http://localhost:${port}`;

  const publicRaw = get(env, 'PLAYFLOW_PUBLIC_ENDPOINTS') ?? DEFAULT_PUBLIC_ENDPOINTS.join(',');
  const publicEndpoints = (publicRaw.toLowerCase() === 'none' ? '' : publicRaw)
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean)
    .map((s) => {
      if (s !== 'metrics' && s !== 'docs') {
        throw new ConfigError('PLAYFLOW_PUBLIC_ENDPOINTS', `unknown group ${JSON.stringify(s)} (expected metrics, docs or none)`);
      }
      return s as PublicEndpointGroup;
    });

  const logLevel = (get(env, 'LOG_LEVEL') ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }

  return {
    databaseUrl,
    broker: {
      url: brokerUrl,
      stream: get(env, 'BROKER_STREAM') ?? DEFAULT_BROKER.stream,
      subject: get(env, 'BROKER_SUBJECT') ?? DEFAULT_BROKER.subject,
      consumer: get(env, 'BROKER_CONSUMER') ?? DEFAULT_BROKER.consumer,
    },
    serverUrl,
    port,
    host: get(env, 'HOST') ?? '0.0.0.0',
    apiToken: get(env, 'PLAYFLOW_API_TOKEN'),
    publicEndpoints,
    sqlApi: parseBool(get(env, 'PLAYFLOW_SQL_API'), 'PLAYFLOW_SQL_API', false),
    sqlApiUrl: get(env, 'PLAYFLOW_SQL_API_URL') === undefined ? undefined : parseUrl(get(env, 'PLAYFLOW_SQL_API_URL')!, 'PLAYFLOW_SQL_API_URL', ['postgres:', 'postgresql:']),
    allowAnonymous: parseBool(get(env, 'PLAYFLOW_ALLOW_ANONYMOUS'), 'PLAYFLOW_ALLOW_ANONYMOUS', false),
    templateLimits: parseTemplateLimits(env),
    maxBodyBytes: parseBytes(get(env, 'PLAYFLOW_MAX_BODY_BYTES'), 'PLAYFLOW_MAX_BODY_BYTES', DEFAULT_MAX_BODY_BYTES),
    encryptionKey: get(env, 'PLAYFLOW_ENCRYPTION_KEY'),
    logLevel: logLevel as LogLevel,
    scheduler: parseBool(get(env, 'PLAYFLOW_SCHEDULER'), 'PLAYFLOW_SCHEDULER', true),
    speculativeWrites: parseBool(get(env, 'PLAYFLOW_SPECULATIVE_WRITES'), 'PLAYFLOW_SPECULATIVE_WRITES', true),
    scheduleIntervalMs: parseInterval(get(env, 'PLAYFLOW_SCHEDULE_INTERVAL_MS'), 'PLAYFLOW_SCHEDULE_INTERVAL_MS', 500),
    retentionDays: parseDays(get(env, 'PLAYFLOW_RETENTION_DAYS'), 'PLAYFLOW_RETENTION_DAYS'),
    ...overrides,
  };
}

export function isLoopback(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Settings that must not be combined, checked before anything starts: an open API on a
 * reachable address needs an explicit yes, and the SQL API is only served behind the token.
 */
export function checkExposure(c: ServerConfig): void {
  if (!c.apiToken && !c.allowAnonymous && !isLoopback(c.host)) {
    throw new ConfigError('PLAYFLOW_API_TOKEN', `not set, and HOST=${c.host} is not a loopback address: anyone who reaches it could run playbooks and read credentials. Set PLAYFLOW_API_TOKEN, listen on 127.0.0.1 (HOST), or set PLAYFLOW_ALLOW_ANONYMOUS=true to serve the API without a token`);
  }
  if (c.sqlApi && !c.apiToken) {
    throw new ConfigError('PLAYFLOW_SQL_API', 'on requires PLAYFLOW_API_TOKEN: the SQL endpoint is never served without the token');
  }
}

/** The config with secrets masked, for the start-up log line. */
export function describeConfig(c: ServerConfig): Record<string, unknown> {
  const mask = (url: string) => {
    try {
      const u = new URL(url);
      if (u.password) u.password = '***';
      if (u.username && url.startsWith('nats')) u.username = '***';
      return u.toString();
    } catch {
      return url;
    }
  };
  return {
    databaseUrl: mask(c.databaseUrl),
    broker: { ...c.broker, url: c.broker.url === 'memory' ? 'memory' : mask(c.broker.url) },
    serverUrl: c.serverUrl,
    port: c.port,
    host: c.host,
    apiToken: c.apiToken ? 'set' : 'not set',
    publicEndpoints: c.publicEndpoints,
    sqlApi: c.sqlApi,
    ...(c.sqlApiUrl ? { sqlApiUrl: mask(c.sqlApiUrl) } : {}),
    allowAnonymous: c.allowAnonymous,
    templateLimits: c.templateLimits,
    maxBodyBytes: c.maxBodyBytes,
    encryptionKey: c.encryptionKey ? 'set' : 'not set',
    logLevel: c.logLevel,
    scheduler: c.scheduler,
    speculativeWrites: c.speculativeWrites,
    scheduleIntervalMs: c.scheduleIntervalMs,
    retentionDays: c.retentionDays ?? 'keep all',
  };
}
