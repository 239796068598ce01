/**
 * Configuration parsing shared by every process (server, worker, operator, cli): the error that
 * names the variable, log levels, the broker's names and the small parsers. Each process keeps
 * its own `loadConfig`; this module holds what they have in common so none imports another's.
 */

export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface BrokerConfig {
  /** nats://… (credentials inside), or `memory` for the in-process broker. */
  url: string;
  stream: string;
  subject: string;
  consumer: string;
}

export const DEFAULT_BROKER_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_BROKER = { stream: 'FLOW_COMMANDS', subject: 'flow.commands', consumer: 'worker-pool' } as const;

export type Env = Record<string, string | undefined>;

/** The variable's trimmed value; unset and blank are both `undefined`. */
export function envValue(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

/** The variables naming the server's base URL, first set wins (DESIGN §3; the others are the reference implementation's names). */
export const SERVER_URL_VARIABLES = ['SERVER_API_URL', 'SERVER_URL_FOR_WORKERS', 'FLOW_SERVER_URL'] as const;

/** The first of SERVER_URL_VARIABLES that is set (not blank), with its trimmed value. */
export function serverUrlFromEnv(env: Env): { variable: string; url: string } | undefined {
  for (const variable of SERVER_URL_VARIABLES) {
    const url = envValue(env, variable);
    if (url !== undefined) return { variable, url };
  }
  return undefined;
}

export function parsePort(value: string | number, variable = 'PORT'): number {
  const s = String(value).trim();
  const n = Number(s);
  if (!/^\d+$/.test(s) || !Number.isInteger(n) || n < 0 || n > 65535) {
    throw new ConfigError(variable, `expected a port number 0-65535, got ${JSON.stringify(String(value))}`);
  }
  return n;
}

export function parseBool(value: string | undefined, variable: string, dflt: boolean): boolean {
  if (value === undefined) return dflt;
  const v = value.toLowerCase();
  if (['on', 'true', '1', 'yes', 'enabled'].includes(v)) return true;
  if (['off', 'false', '0', 'no', 'disabled'].includes(v)) return false;
  throw new ConfigError(variable, `expected on/off (true/false), got ${JSON.stringify(value)}`);
}

export function parseUrl(value: string, variable: string, protocols: string[]): string {
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

/**
 * Sampling interval of the process metrics' event-loop delay (prom-client's default is 10 ms: a
 * timer that wakes an idle process 100 times a second). At 100 ms the lag percentiles a scrape
 * every 15 s reads still rest on 150 samples.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;
