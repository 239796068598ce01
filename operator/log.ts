/**
 * The operator's logger: pino JSON lines (stdout). Controllers log object keys, reasons and
 * counts — never Secret data (Credential payloads are never passed to a log call).
 */
import { pino } from 'pino';

export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

export function createOperatorLogger(level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name: 'playflow-operator',
    level,
    redact: { paths: ['data', '*.data', 'stringData', '*.stringData', 'token', '*.token'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  }) as unknown as Logger;
}

/** A logger that drops everything (tests that do not care). */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};
