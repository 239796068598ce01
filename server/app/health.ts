/**
 * Probes and metrics.
 *
 * - GET /health, GET /readyz: database (`SELECT 1`) and broker (`ping`) reachability. `status` is
 *   `ok` when both answer, `degraded` otherwise. The HTTP status is 503 only when the database is
 *   unreachable: without the broker the API still works (notifications wait in the queue and the
 *   sweeper publishes them when it is back), so pods stay in service. Never behind the token.
 * - GET /healthz: liveness only (the process answers); no dependency is checked, so a database
 *   outage makes pods unready, not restarted. Never behind the token.
 * - GET /metrics: Prometheus text. Public by default (annotation-based scrapers carry no
 *   credentials; the metrics hold counts and route patterns, nothing about executions' data).
 *   With PLAYFLOW_PUBLIC_ENDPOINTS=none (or a list without `metrics`) it is behind the token,
 *   and Prometheus sends it as a bearer token.
 */
import type { FastifyInstance } from 'fastify';
import { HealthResponse, Ref, type HealthCheck } from '../../common/contract/index.js';
import { metrics, registry } from '../metrics.js';
import type { AppContext } from './context.js';
import { errors } from './schemas.js';
import { routeSchema } from './support.js';

const TAG = 'health';
const VERSION = '0.1.0';
const started = Date.now();

async function timed(probe: () => Promise<boolean | void>, timeoutMs: number): Promise<HealthCheck> {
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const ok = await Promise.race([
      probe(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    const latency_ms = Math.round((performance.now() - t0) * 10) / 10;
    return ok === false ? { status: 'error', latency_ms, error: 'not reachable' } : { status: 'ok', latency_ms };
  } catch (err) {
    return { status: 'error', error: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

export async function healthRoutes(app: FastifyInstance, { deps, options }: AppContext) {
  const check = async (): Promise<HealthResponse> => {
    const [database, broker] = await Promise.all([
      timed(async () => {
        await deps.db.pool.query('SELECT 1');
      }, options.healthTimeoutMs),
      deps.broker ? timed(() => deps.broker!.ping(), options.healthTimeoutMs) : Promise.resolve<HealthCheck>({ status: 'skipped' }),
    ]);
    const ok = database.status === 'ok' && broker.status !== 'error';
    return {
      status: ok ? 'ok' : 'degraded',
      version: VERSION,
      uptime_seconds: Math.round((Date.now() - started) / 1000),
      checks: { database, broker },
    };
  };

  const healthSchema = (summary: string) =>
    routeSchema(TAG, summary, {
      security: [],
      response: {
        200: Ref(HealthResponse, { description: 'database reachable (status degraded when the broker is not)' }),
        503: Ref(HealthResponse, { description: 'database unreachable' }),
      },
    });

  for (const url of ['/health', '/readyz']) {
    app.get(url, { schema: healthSchema(url === '/health' ? 'Health: database and broker reachability' : 'Readiness (same as /health)') }, async (_req, reply) => {
      const h = await check();
      return reply.code(h.checks.database.status === 'ok' ? 200 : 503).send(h);
    });
  }

  app.get('/healthz', { schema: routeSchema(TAG, 'Liveness: the process answers (no dependency checks)', { security: [], response: { 200: Ref(HealthResponse) } }) }, async () => ({
    status: 'ok',
    version: VERSION,
    uptime_seconds: Math.round((Date.now() - started) / 1000),
    checks: {},
  }));

  app.get('/metrics', {
    schema: routeSchema(TAG, 'Prometheus metrics (text exposition format)', {
      ...(options.publicEndpoints.includes('metrics') ? { security: [] } : {}),
      response: {
        200: { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } },
        ...errors(),
      },
    }),
  }, async (req, reply) => {
    try {
      const s = await deps.queue.stats();
      metrics.queueDepth.set({ state: 'queued' }, s.queued);
      metrics.queueDepth.set({ state: 'leased' }, s.leased);
      metrics.queueDepth.set({ state: 'delayed' }, s.delayed);
      metrics.queueOldestAge.set(s.oldest_age_seconds);
    } catch (err) {
      req.log.warn({ err }, 'queue stats unavailable for /metrics');
    }
    return reply.type(registry.contentType).send(await registry.metrics());
  });
}
