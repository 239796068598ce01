/**
 * Request loggers made on first use (fastify's `childLoggerFactory`).
 *
 * fastify gives every request a child of the server's logger, bound to its request id. pino builds
 * a child's bindings as it is made, through the redaction of common/logger.ts (its wildcard paths
 * run on every binding): about 2% of the server's CPU per request on the worker's hot path
 * (`perf` of bench/fibo.ts), although almost no request logs a line. The stand-in below makes the
 * child when a line is logged at a level the server's logger writes, and forwards to it.
 */
import type { FastifyBaseLogger } from 'fastify';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;
/** pino's loggers tell whether they write a level; a logger that cannot say gets its child at once. */
type LevelAware = FastifyBaseLogger & { isLevelEnabled(level: string): boolean };

class RequestLogger {
  private made: LevelAware | undefined;

  constructor(private readonly parent: LevelAware, private readonly bindings: Bindings, private readonly opts: ChildOptions) {}

  private real(): LevelAware {
    return (this.made ??= this.parent.child(this.bindings, this.opts) as LevelAware);
  }

  private write(level: Level, args: unknown[]): void {
    if (this.made === undefined && !this.parent.isLevelEnabled(level)) return;
    (this.real()[level] as (...a: unknown[]) => void)(...args);
  }

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  isLevelEnabled(level: string): boolean {
    return (this.made ?? this.parent).isLevelEnabled(level);
  }

  fatal(...args: unknown[]): void { this.write('fatal', args); }
  error(...args: unknown[]): void { this.write('error', args); }
  warn(...args: unknown[]): void { this.write('warn', args); }
  info(...args: unknown[]): void { this.write('info', args); }
  debug(...args: unknown[]): void { this.write('debug', args); }
  trace(...args: unknown[]): void { this.write('trace', args); }
  silent(): void {}

  child(bindings: Bindings, opts?: ChildOptions): FastifyBaseLogger {
    return this.real().child(bindings, opts);
  }
}

/**
 * The factory for fastify's `childLoggerFactory`. A route with a log level of its own gets its
 * child at once: the server's logger cannot tell which of its lines that child writes.
 */
export function lazyRequestLogger(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildOptions): FastifyBaseLogger {
  const aware = typeof (logger as Partial<LevelAware>).isLevelEnabled === 'function';
  if (opts.level !== undefined || !aware) return logger.child(bindings, opts);
  return new RequestLogger(logger as LevelAware, bindings, opts) as unknown as FastifyBaseLogger;
}
