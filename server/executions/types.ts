/** Shared types of the execution core. */

/** pino-compatible subset. */
export interface CoreLogger {
  debug?(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const silentCoreLogger: CoreLogger = { info() {}, warn() {}, error() {}, debug() {} };
