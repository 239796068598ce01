import { Writable } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { lazyRequestLogger } from './request-logger.js';

/** A pino logger (the server's, with its redaction) writing JSON lines into `lines`. */
function capturingLogger(level: 'warn' | 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: createLogger({ level, destination }), lines };
}

let apps: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  await Promise.all(apps.map((a) => a.close()));
  apps = [];
});

async function appWith(logger: FastifyBaseLogger) {
  // as the server: no per-request lines of fastify's own (server/app/index.ts)
  const app = Fastify({ loggerInstance: logger, childLoggerFactory: lazyRequestLogger, logController: new LogController({ disableRequestLogging: true }) });
  app.get('/quiet', async (req) => {
    req.log.info({ token: 'secret-value' }, 'below the level');
    req.log.debug('below the level too');
    return { ok: true };
  });
  app.get('/loud', async (req) => {
    req.log.warn({ token: 'secret-value', n: 1 }, 'written');
    req.log.error('written too');
    return { ok: true };
  });
  app.get('/chatty', { logLevel: 'debug' }, async (req) => {
    req.log.debug('a route with its own level');
    return { ok: true };
  });
  apps.push(app);
  await app.ready();
  return app;
}

describe('request loggers made on first use', () => {
  it('a request that logs nothing at the written levels makes no child logger and writes no line', async () => {
    const { logger, lines } = capturingLogger('warn');
    const app = await appWith(logger);
    const child = vi.spyOn(logger, 'child'); // from here: fastify makes one of its own at start
    for (let i = 0; i < 3; i++) expect((await app.inject({ method: 'GET', url: '/quiet' })).statusCode).toBe(200);
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
  });

  it('a line at a written level goes through one child bound to the request id, redacted as any server line', async () => {
    const { logger, lines } = capturingLogger('warn');
    const app = await appWith(logger);
    const child = vi.spyOn(logger, 'child');
    const res = await app.inject({ method: 'GET', url: '/loud', headers: { 'request-id': 'ignored' } });
    expect(res.statusCode).toBe(200);
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines.map((l) => l.msg)).toEqual(['written', 'written too']);
    const [first, second] = lines;
    expect(first).toMatchObject({ level: 'warn', n: 1, token: '[redacted]', reqId: expect.any(String) });
    expect(second).toMatchObject({ level: 'error', reqId: first!.reqId });
    expect(JSON.stringify(lines)).not.toContain('secret-value');
  });

  it('a route with a log level of its own writes at that level', async () => {
    const { logger, lines } = capturingLogger('info');
    const app = await appWith(logger);
    await app.inject({ method: 'GET', url: '/chatty' });
    expect(lines).toEqual([expect.objectContaining({ level: 'debug', msg: 'a route with its own level', reqId: expect.any(String) })]);
  });

  it('answers the level and level checks as the server logger does, and makes children of its own on request', async () => {
    const { logger, lines } = capturingLogger('info');
    const bound = lazyRequestLogger(logger, { reqId: 'r-1' }, {}) as FastifyBaseLogger & { isLevelEnabled(l: string): boolean };
    expect(bound.level).toBe('info');
    expect(bound.isLevelEnabled('debug')).toBe(false);
    expect(bound.isLevelEnabled('info')).toBe(true);
    bound.child({ part: 'x' }).info('from a grandchild');
    expect(lines).toEqual([expect.objectContaining({ reqId: 'r-1', part: 'x', msg: 'from a grandchild' })]);
  });

  it('a logger that cannot tell its level gets its child at once, as fastify makes it', () => {
    const made: unknown[] = [];
    const plain = { info() {}, error() {}, debug() {}, fatal() {}, warn() {}, trace() {}, silent() {}, level: 'info', child: (b: unknown) => (made.push(b), plain) };
    expect(lazyRequestLogger(plain as unknown as FastifyBaseLogger, { reqId: 'r-2' }, {})).toBe(plain);
    expect(made).toEqual([{ reqId: 'r-2' }]);
  });
});
