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
 * | PLAYFLOW_SQL_API | on | `off` disables POST /api/postgres/execute (answers 403 `sql_api_disabled`) |
 * | PLAYFLOW_ENCRYPTION_KEY | (none) | read here, validated by the credential store |
 * | LOG_LEVEL | info | pino level (trace, debug, info, warn, error, fatal, silent) |
 */

export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

export type PublicEndpointGroup = 'metrics' | 'docs';
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface BrokerConfig {
  /** nats://… (credentials inside), or `memory` for the in-process broker. */
  url: string;
  stream: string;
  subject: string;
  consumer: string;
}

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
  /** Raw value; the credential store validates it (32 bytes, base64). */
  encryptionKey?: string;
  logLevel: LogLevel;
}

export const DEFAULT_PORT = 8082;
/**
 * /metrics is public by default: Prometheus scrapes it from pod annotations, which carry no
 * credentials, and it holds counts and route patterns only (no ids, payloads or secrets).
 */
export const DEFAULT_PUBLIC_ENDPOINTS: PublicEndpointGroup[] = ['metrics'];
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/playflow';
export const DEFAULT_BROKER_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_BROKER = { stream: 'FLOW_COMMANDS', subject: 'flow.commands', consumer: 'worker-pool' } as const;

type Env = Record<string, string | undefined>;

function get(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

export function parsePort(value: string | number, variable = 'PORT'): number {
  const s = String(value).trim();
  const n = Number(s);
  if (!/^\d+$/.test(s) || !Number.isInteger(n) || n < 0 || n > 65535) {
    throw new ConfigError(variable, `expected a port number 0-65535, got ${JSON.stringify(String(value))}`);
  }
  return n;
}

function parseBool(value: string | undefined, variable: string, dflt: boolean): boolean {
  if (value === undefined) return dflt;
  const v = value.toLowerCase();
  if (['on', 'true', '1', 'yes', 'enabled'].includes(v)) return true;
  if (['off', 'false', '0', 'no', 'disabled'].includes(v)) return false;
  throw new ConfigError(variable, `expected on/off (true/false), got ${JSON.stringify(value)}`);
}

function parseUrl(value: string, variable: string, protocols: string[]): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(variable, 'not a valid URL');
  }
  if (!protocols.includes(u.protocol)) {
    throw new ConfigError(variable, `expected a ${protocols.join(' or ')} URL, got ${u.protocol}`);
  }
  return value;
}

export function loadConfig(env: Env = process.env, overrides: Partial<ServerConfig> = {}): ServerConfig {
  const port = overrides.port ?? (get(env, 'PORT') !== undefined ? parsePort(get(env, 'PORT')!) : DEFAULT_PORT);

  const databaseUrl = parseUrl(get(env, 'DATABASE_URL') ?? DEFAULT_DATABASE_URL, 'DATABASE_URL', ['postgres:', 'postgresql:']);

  const brokerUrlRaw = get(env, 'BROKER_URL') ?? DEFAULT_BROKER_URL;
  const brokerUrl = brokerUrlRaw === 'memory' ? 'memory' : parseUrl(brokerUrlRaw, 'BROKER_URL', ['nats:', 'tls:', 'ws:', 'wss:']);

  const serverUrlVar = ['SERVER_API_URL', 'SERVER_URL_FOR_WORKERS', 'FLOW_SERVER_URL'].find((n) => get(env, n) !== undefined);
  const serverUrl = serverUrlVar
    ? parseUrl(get(env, serverUrlVar)!, serverUrlVar, ['http:', 'https:']).replace(/\/+$/, '')
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
    sqlApi: parseBool(get(env, 'PLAYFLOW_SQL_API'), 'PLAYFLOW_SQL_API', true),
    encryptionKey: get(env, 'PLAYFLOW_ENCRYPTION_KEY'),
    logLevel: logLevel as LogLevel,
    ...overrides,
  };
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
    encryptionKey: c.encryptionKey ? 'set' : 'not set',
    logLevel: c.logLevel,
  };
}
