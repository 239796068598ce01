/**
 * Prometheus metrics of the operator, on a registry per operator instance (two instances in one
 * test process must not collide), served at /metrics.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EVENT_LOOP_SAMPLE_MS } from '../common/config.js';

export class OperatorMetrics {
  readonly registry = new Registry();
  readonly reconciles = new Counter({
    name: 'playflow_operator_reconcile_total',
    help: 'Reconciliations by controller and result (success, error, requeue)',
    labelNames: ['controller', 'result'] as const,
    registers: [this.registry],
  });
  readonly reconcileDuration = new Histogram({
    name: 'playflow_operator_reconcile_duration_seconds',
    help: 'Reconciliation latency by controller',
    labelNames: ['controller'] as const,
    buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'playflow_operator_workqueue_depth',
    help: 'Keys waiting in a controller work queue',
    labelNames: ['controller'] as const,
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: 'playflow_operator_workqueue_retries_total',
    help: 'Keys requeued with backoff after a failed reconciliation',
    labelNames: ['controller'] as const,
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: 'playflow_operator_leader',
    help: '1 while this instance holds the leader lease',
    registers: [this.registry],
  });
  readonly poolDesired = new Gauge({
    name: 'playflow_operator_workerpool_desired_replicas',
    help: 'Desired replicas computed for a WorkerPool',
    labelNames: ['namespace', 'name'] as const,
    registers: [this.registry],
  });
  readonly poolQueueDepth = new Gauge({
    name: 'playflow_operator_workerpool_queue_depth',
    help: 'Queue depth (queued + leased) last read for a WorkerPool',
    labelNames: ['namespace', 'name'] as const,
    registers: [this.registry],
  });
  readonly serverErrors = new Counter({
    name: 'playflow_operator_server_errors_total',
    help: 'Calls to the Playflow server API that failed, by controller',
    labelNames: ['controller'] as const,
    registers: [this.registry],
  });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  }
}
