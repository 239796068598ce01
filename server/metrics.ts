/**
 * Prometheus metrics of the server, on one registry served at GET /metrics. The HTTP layer
 * records requests; the core (executions, queue, broker) imports the metrics it updates:
 *
 *   import { metrics } from '../metrics.js';
 *   const end = metrics.eventHandling.startTimer({ event: ev.name }); … end();
 *   metrics.executions.inc({ status: 'retried' });
 *
 * What a transaction counts (commands issued, claimed, finished; executions started and ended) it
 * lists in its context instead, and the execution service adds it once the transaction committed
 * (executions/tx-types.ts `TxCtx.counts`): a transaction redone counts once.
 *
 * Queue depth gauges are refreshed from QueueService.stats() at each scrape (server/app/health.ts),
 * so they are right on every replica without the core touching them.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EVENT_LOOP_SAMPLE_MS } from '../common/config.js';

export const registry = new Registry();

export const metrics = {
  httpRequests: new Counter({
    name: 'playflow_http_requests_total',
    help: 'HTTP requests handled, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  }),
  httpDuration: new Histogram({
    name: 'playflow_http_request_duration_seconds',
    help: 'HTTP request latency by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  }),
  queueDepth: new Gauge({
    name: 'playflow_queue_depth',
    help: 'Commands in the queue by state (queued: due and waiting, leased: held by a worker, delayed: not due yet)',
    labelNames: ['state'] as const,
    registers: [registry],
  }),
  queueOldestAge: new Gauge({
    name: 'playflow_queue_oldest_age_seconds',
    help: 'Age of the oldest due command not yet claimed',
    registers: [registry],
  }),
  commandsIssued: new Counter({
    name: 'playflow_commands_issued_total',
    help: 'Commands written to the queue by the engine',
    registers: [registry],
  }),
  commandsClaimed: new Counter({
    name: 'playflow_commands_claimed_total',
    help: 'Commands claimed by workers',
    registers: [registry],
  }),
  commandsFinished: new Counter({
    name: 'playflow_commands_finished_total',
    help: 'Commands finished, by outcome (ok, error, expired, cancelled)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  eventHandling: new Histogram({
    name: 'playflow_event_handling_seconds',
    help: 'Time to apply one inbound event (lock, fold, engine, write) by event name',
    labelNames: ['event'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  }),
  executions: new Counter({
    name: 'playflow_executions_total',
    help: 'Executions that reached a status (started, completed, failed, cancelled)',
    labelNames: ['status'] as const,
    registers: [registry],
  }),
  notificationsPublished: new Counter({
    name: 'playflow_notifications_published_total',
    help: 'Command notifications published to the broker, by result (ok, error)',
    labelNames: ['result'] as const,
    registers: [registry],
  }),
};

let defaultsOn = false;
/** Process metrics (CPU, memory, event loop lag, GC) under the `playflow_` prefix; idempotent. */
export function enableDefaultMetrics(): void {
  if (defaultsOn) return;
  defaultsOn = true;
  collectDefaultMetrics({ register: registry, prefix: 'playflow_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}
