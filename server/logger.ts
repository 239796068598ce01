/**
 * The server's logger: pino, JSON lines on stdout. Secrets never reach a log line: the
 * Authorization header and any `data`, `token_data`, `password`, `token` or `secret` field (at
 * any of the first levels of nesting, which covers credential bodies, keychain entries and tool
 * auth blocks) are replaced by "[redacted]".
 */
import { pino, type Logger, type LoggerOptions } from 'pino';
import type { LogLevel } from './config.js';

const SECRET_KEYS = ['data', 'token_data', 'password', 'token', 'secret', 'api_key', 'client_secret'];

/** pino redact paths: each secret key at depth 0..3, plus request/response headers. */
export const REDACT_PATHS: string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  'res.headers["set-cookie"]',
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]),
];

export function createLogger(opts: { level?: LogLevel; name?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  const options: LoggerOptions = {
    name: opts.name ?? 'playflow-server',
    level: opts.level ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
  return opts.destination ? pino(options, opts.destination as pino.DestinationStream) : pino(options);
}

export type { Logger };
