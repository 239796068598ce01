/**
 * The worker's Prometheus metrics (own registry) and its side HTTP server: `/healthz` and
 * `/metrics` on WORKER_METRICS_PORT — the worker's only HTTP surface.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EVENT_LOOP_SAMPLE_MS } from '../common/config.js';

export function createWorkerMetrics() {
  const registry = new Registry();
  return {
    registry,
    calls: new Counter({ name: 'playflow_worker_calls_total', help: 'Tool calls run, by kind and outcome (ok, error)', labelNames: ['kind', 'outcome'] as const, registers: [registry] }),
    callDuration: new Histogram({
      name: 'playflow_worker_call_duration_seconds', help: 'Tool call duration by kind', labelNames: ['kind'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300], registers: [registry],
    }),
    inFlight: new Gauge({ name: 'playflow_worker_in_flight', help: 'Commands being handled now', registers: [registry] }),
    messages: new Counter({ name: 'playflow_worker_messages_total', help: 'Broker notifications settled, by how (ack, nak, term)', labelNames: ['result'] as const, registers: [registry] }),
    claims: new Counter({ name: 'playflow_worker_claims_total', help: 'Claim attempts by result (claimed, already_claimed, finished, not_found, not_due, unreachable, error)', labelNames: ['result'] as const, registers: [registry] }),
    leaseReleases: new Counter({
      name: 'playflow_worker_lease_releases_total',
      help: 'Leases of unanswered claims this worker asked the server to end, by outcome (released; none: it held none; dropped: a claim or call of the command took over; failed)',
      labelNames: ['outcome'] as const, registers: [registry],
    }),
    serverDown: new Gauge({ name: 'playflow_worker_server_unreachable', help: '1 while the server does not answer (no notifications are taken)', registers: [registry] }),
    reportRequests: new Counter({
      name: 'playflow_worker_report_requests_total', help: 'call.done report requests sent, by how many reports each carried (one, several: coalesced while others were out)',
      labelNames: ['reports'] as const, registers: [registry],
    }),
    reports: new Counter({ name: 'playflow_worker_reports_total', help: 'call.done reports sent (a report sent again counts again)', registers: [registry] }),
    children: new Counter({ name: 'playflow_worker_child_playbooks_total', help: 'Child playbooks started for playbook tools', registers: [registry] }),
    enableDefault() {
      collectDefaultMetrics({ register: registry, prefix: 'playflow_worker_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    },
  };
}
export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

export interface SideServer {
  port: number;
  close(): Promise<void>;
}

/** Starts the side server; `health()` says whether the worker is healthy and what to show. */
export function startSideServer(port: number, registry: Registry, health: () => { ok: boolean; body: object }, host = '0.0.0.0'): Promise<SideServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/healthz') {
      const h = health();
      res.writeHead(h.ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(h.body));
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(err.message),
      );
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
      });
    });
  });
}
