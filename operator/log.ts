/**
 * The operator's logger: pino JSON lines (stdout). Controllers log object keys, reasons and
 * counts — never Secret data (Credential payloads are never passed to a log call).
 */
import { createLogger, type Logger as BaseLogger } from '../common/logger.js';
import type { LogLevel } from '../common/config.js';

/** The common Logger, plus child loggers (one per controller). */
export interface Logger extends BaseLogger {
  child(bindings: Record<string, unknown>): Logger;
}

/** The processes' one pino set-up (common/logger.ts: secret fields and URLs redacted), named for the operator. */
export function createOperatorLogger(level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return createLogger({ name: 'playflow-operator', level: level as LogLevel });
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
