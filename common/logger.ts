/**
 * The processes' logger: pino, JSON lines on stdout. Secrets never reach a log line: the
 * Authorization header and any `data`, `stringData` (a Kubernetes Secret's), `token_data`,
 * `password`, `token` or `secret` field (at any of the first levels of nesting, which covers
 * credential bodies, keychain entries and tool auth blocks) are replaced by "[redacted]". URLs in a
 * line's message and string fields have their userinfo, query values and fragment masked
 * (common/redact-url.ts).
 */
import { pino, type Logger as PinoLogger, type LoggerOptions } from 'pino';
import type { LogLevel } from './config.js';
import { redactUrlsDeep, redactUrlsIn } from './redact-url.js';

const SECRET_KEYS = ['data', 'stringData', 'token_data', 'password', 'token', 'secret', 'api_key', 'client_secret'];

/** pino redact paths: each secret key at depth 0..3, plus request/response headers. */
export const REDACT_PATHS: string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  'res.headers["set-cookie"]',
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]),
];

/**
 * The one logger type of every package: pino's argument order (fields first, then the message).
 * pino and fastify's logger satisfy it; tests pass `silentLogger` or a recording object.
 */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** JSON lines on stderr: the fallback of library code used without a logger (never secrets). */
export const stderrLogger: Logger = {
  debug() {},
  info() {},
  warn: (obj, msg) => void process.stderr.write(`${JSON.stringify({ level: 'warn', msg, ...obj })}\n`),
  error: (obj, msg) => void process.stderr.write(`${JSON.stringify({ level: 'error', msg, ...obj })}\n`),
};

export function createLogger(opts: { level?: LogLevel; name?: string; destination?: NodeJS.WritableStream } = {}): PinoLogger {
  const options: LoggerOptions = {
    name: opts.name ?? 'playflow-server',
    level: opts.level ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    hooks: {
      // A URL anywhere in a line (an error message, a `url` field) may carry a credential.
      logMethod(args, method) {
        const out = (args as unknown[]).map((a) => (typeof a === 'string' ? redactUrlsIn(a) : redactUrlsDeep(a)));
        return method.apply(this, out as Parameters<typeof method>);
      },
    },
  };
  return opts.destination ? pino(options, opts.destination as pino.DestinationStream) : pino(options);
}

export type { PinoLogger };
