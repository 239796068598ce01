/**
 * `playflow operator start`: informers for Playbooks, Credentials, WorkerPools and Secrets, three
 * controllers, leader election, and a side HTTP port with /metrics, /healthz and /readyz.
 *
 * Informers run on every instance (a warm cache makes failover fast); only the leader's
 * controllers run, so only the leader writes. Losing the lease stops the controllers at once.
 *
 * Environment (see `operatorConfigFromEnv`): KUBECONFIG or the in-cluster service account,
 * SERVER_API_URL (also SERVER_URL_FOR_WORKERS, FLOW_SERVER_URL), PLAYFLOW_API_TOKEN,
 * OPERATOR_METRICS_PORT (default 8081), WATCH_NAMESPACES (comma-separated; empty = all),
 * POD_NAME (leader identity), POD_NAMESPACE / OPERATOR_LEASE_NAMESPACE (where the Lease lives),
 * OPERATOR_LEASE_NAME, LEADER_ELECT (default true), OPERATOR_LEASE_DURATION_SECONDS (15),
 * OPERATOR_RENEW_DEADLINE_SECONDS (10), OPERATOR_RETRY_PERIOD_SECONDS (2),
 * OPERATOR_RESYNC_SECONDS (300), OPERATOR_VERIFY_SECONDS (300: how often an in-sync Playbook or
 * Credential is checked against the server, to repair drift), WORKERPOOL_POLL_SECONDS (15).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { PlayflowClient } from '../client/http.js';
import { serverUrlFromEnv } from '../common/config.js';
import { serverApi, type OperatorServerApi } from './api.js';
import { worthReconciling } from './predicates.js';
import { Controller } from './controller.js';
import { EventRecorder } from './events.js';
import { Informer, stripForCache, type KubeObjectLike, type ListPage } from './informer.js';
import { yieldIfBusy } from './yield.js';
import { listCustom, listSecrets, makeClients, resourcePath } from './kube.js';
import { LeaderElector } from './leader.js';
import { createOperatorLogger, type Logger } from './log.js';
import { OperatorMetrics } from './metrics.js';
import { PATH_INDEX, PLAYBOOK_PLURAL, playbookPathIndex, playbookReconciler } from './controllers/playbook.js';
import {
  CREDENTIAL_PLURAL, NAME_INDEX, SECRET_INDEX, credentialNameIndex, credentialReconciler, credentialSecretIndex,
} from './controllers/credential.js';
import { sweepPlaybookDrift } from './controllers/drift.js';
import { SCHEDULE_PLURAL, scheduleReconciler } from './controllers/schedule.js';
import { DEFAULT_WORKERPOOL, STATEFULSET_INDEX, statefulSetKey, WORKERPOOL_PLURAL, workerPoolReconciler } from './controllers/workerpool.js';
import type { ControllerContext } from './controllers/common.js';
import { GROUP, VERSION, type CredentialResource, type PlaybookResource, type ScheduleResource, type WorkerPoolResource } from './types.js';

// Node compiles its fetch implementation (undici, ~1.5 MB of JavaScript) on first use: 50–150 ms
// of synchronous work that landed in the first reconcile, with watches and lease renewals waiting
// (seen in a CPU profile of bench/operator.ts). Load it with the operator's modules instead.
new Headers();

export interface OperatorOptions {
  kubeConfig: k8s.KubeConfig;
  /** The Playflow server API (tests may pass their own); else built from serverUrl/apiToken. */
  api?: OperatorServerApi;
  serverUrl?: string;
  apiToken?: string;
  /** Namespaces to watch; empty = all namespaces. */
  namespaces?: string[];
  identity?: string;
  leaderElection?: {
    enabled?: boolean;
    namespace?: string;
    name?: string;
    leaseDurationMs?: number;
    renewDeadlineMs?: number;
    retryPeriodMs?: number;
  };
  /** Port for /metrics, /healthz, /readyz; 0 = random; undefined = no HTTP server. */
  metricsPort?: number;
  metricsHost?: string;
  resyncMs?: number;
  /** How often an in-sync object is checked against the server (drift repair). Default 5 min. */
  verifyIntervalMs?: number;
  /** How long a finalizer waits for an unreachable server before releasing anyway. Default 5 min. */
  finalizerTimeoutMs?: number;
  /** Concurrent reconciles per controller. Default 4. */
  workers?: number;
  /** Retries per second over all keys of a controller (token bucket). Default 10. */
  queueQps?: number;
  /** Retries at once before the bucket paces them. Default 100. */
  queueBurst?: number;
  workerPoolPollMs?: number;
  /** Watch Schedule resources (default true; OPERATOR_SCHEDULES=off where the RBAC has no schedules). */
  schedules?: boolean;
  /** Longest wait before a Schedule's status (next/last run) is refreshed (default 60 s). */
  scheduleStatusRefreshMs?: number;
  /** Work queue backoff (tests shorten it). */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  /** Informer list/watch retry backoff. */
  informerBackoffMs?: number;
  watchTimeoutSeconds?: number;
  log?: Logger;
  defaultMetrics?: boolean;
}

export interface RunningOperator {
  readonly identity: string;
  isLeader(): boolean;
  /** True once every informer has listed. */
  ready(): boolean;
  metrics: OperatorMetrics;
  /** Bound address of the metrics server (when started). */
  metricsUrl?: string;
  informers: {
    playbooks: Informer<PlaybookResource>;
    credentials: Informer<CredentialResource>;
    workerPools: Informer<WorkerPoolResource>;
    secrets: Informer<k8s.V1Secret>;
  }[];
  stop(): Promise<void>;
}

/** A cache view over one informer per namespace. */
function multi<T extends KubeObjectLike>(informers: Informer<T>[], namespaced: boolean) {
  return {
    get(ns: string, name: string): T | undefined {
      for (const i of informers) {
        const o = i.get(ns, name);
        if (o) return o;
      }
      return undefined;
    },
    list(): T[] {
      return informers.flatMap((i) => i.list());
    },
    /** Every cached object, without copying the caches into an array. */
    *values(): Iterable<T> {
      for (const i of informers) yield* i.values();
    },
    byIndex(index: string, value: string): T[] {
      return informers.length === 1 ? informers[0]!.byIndex(index, value) : informers.flatMap((i) => i.byIndex(index, value));
    },
    namespaced,
  };
}

export async function startOperator(opts: OperatorOptions): Promise<RunningOperator> {
  const log = opts.log ?? createOperatorLogger();
  const identity = opts.identity ?? `${hostname()}_${randomBytes(4).toString('hex')}`;
  const clients = makeClients(opts.kubeConfig);
  const metrics = new OperatorMetrics({ defaultMetrics: opts.defaultMetrics });
  const api = opts.api ?? serverApi(new PlayflowClient({
    baseUrl: opts.serverUrl ?? 'http://localhost:8082',
    token: opts.apiToken,
    timeoutMs: 10_000,
    headers: { 'user-agent': `playflow-operator/${identity}` },
  }));
  const ctx: ControllerContext = {
    clients, api, events: new EventRecorder(clients, identity, log), log, metrics, verifyIntervalMs: opts.verifyIntervalMs,
    finalizerTimeoutMs: opts.finalizerTimeoutMs,
  };
  const namespaces = opts.namespaces?.length ? opts.namespaces : [''];
  const resyncMs = opts.resyncMs ?? 300_000;

  const mk = <T extends KubeObjectLike>(name: string, path: string, list: (page: ListPage) => Promise<any>) =>
    new Informer<T>({
      name, path, list, watch: clients.watch, log, resyncMs, transform: stripForCache,
      minBackoffMs: opts.informerBackoffMs ?? 200,
      watchTimeoutSeconds: opts.watchTimeoutSeconds,
    });
  const sets = namespaces.map((ns) => ({
    playbooks: mk<PlaybookResource>(`playbooks${ns ? `@${ns}` : ''}`, resourcePath(GROUP, VERSION, PLAYBOOK_PLURAL, ns), listCustom(clients, PLAYBOOK_PLURAL, ns)),
    credentials: mk<CredentialResource>(`credentials${ns ? `@${ns}` : ''}`, resourcePath(GROUP, VERSION, CREDENTIAL_PLURAL, ns), listCustom(clients, CREDENTIAL_PLURAL, ns)),
    workerPools: mk<WorkerPoolResource>(`workerpools${ns ? `@${ns}` : ''}`, resourcePath(GROUP, VERSION, WORKERPOOL_PLURAL, ns), listCustom(clients, WORKERPOOL_PLURAL, ns)),
    secrets: mk<k8s.V1Secret>(`secrets${ns ? `@${ns}` : ''}`, resourcePath('', 'v1', 'secrets', ns), listSecrets(clients, ns)),
    schedules: opts.schedules === false ? undefined
      : mk<ScheduleResource>(`schedules${ns ? `@${ns}` : ''}`, resourcePath(GROUP, VERSION, SCHEDULE_PLURAL, ns), listCustom(clients, SCHEDULE_PLURAL, ns)),
  }));
  for (const s of sets) {
    s.playbooks.addIndex(PATH_INDEX, playbookPathIndex);
    s.credentials.addIndex(NAME_INDEX, credentialNameIndex);
    s.credentials.addIndex(SECRET_INDEX, credentialSecretIndex);
    s.workerPools.addIndex(STATEFULSET_INDEX, statefulSetKey);
  }
  const playbooks = multi(sets.map((s) => s.playbooks), true);
  const credentials = multi(sets.map((s) => s.credentials), true);
  const workerPools = multi(sets.map((s) => s.workerPools), true);
  const secrets = multi(sets.map((s) => s.secrets), true);
  const schedules = multi(sets.flatMap((s) => (s.schedules ? [s.schedules] : [])), true);

  const qopts = {
    baseDelayMs: opts.baseBackoffMs ?? 500, maxDelayMs: opts.maxBackoffMs ?? 5 * 60_000, qps: opts.queueQps, burst: opts.queueBurst,
    workers: opts.workers ?? 4,
  };
  const reconcilePlaybook = playbookReconciler(ctx, { get: playbooks.get, byPath: (p) => playbooks.byIndex(PATH_INDEX, p) });
  const playbookCtl = new Controller('playbook', reconcilePlaybook, metrics, log, qopts);
  const credentialCtl = new Controller('credential', credentialReconciler(ctx, {
    credentials: { get: credentials.get, byName: (n) => credentials.byIndex(NAME_INDEX, n) },
    secrets,
  }), metrics, log, qopts);
  const poolsOf = (stsKey: string) => workerPools.byIndex(STATEFULSET_INDEX, stsKey);
  const poolCtl = new Controller('workerpool', workerPoolReconciler(ctx, { get: workerPools.get, byStatefulSet: poolsOf }, {
    ...DEFAULT_WORKERPOOL,
    pollIntervalMs: opts.workerPoolPollMs ?? DEFAULT_WORKERPOOL.pollIntervalMs,
  }), metrics, log, qopts);

  const scheduleCtl = new Controller('schedule', scheduleReconciler(ctx, schedules, { statusRefreshMs: opts.scheduleStatusRefreshMs }), metrics, log, qopts);

  const keyOf = (o: KubeObjectLike) => `${o.metadata?.namespace}/${o.metadata?.name}`;
  for (const s of sets) {
    // A controller's own status writes come back as updates; worthReconciling drops them, so a
    // failing key waits out its backoff. Schedules and WorkerPools refresh their status on a requeue.
    s.schedules?.on('add', (o) => scheduleCtl.enqueue(keyOf(o)));
    s.schedules?.on('update', (o, old) => {
      if (worthReconciling(o, old)) scheduleCtl.enqueue(keyOf(o));
    });
    s.schedules?.on('delete', (o) => scheduleCtl.enqueue(keyOf(o)));
    s.playbooks.on('add', (o) => playbookCtl.enqueue(keyOf(o)));
    s.playbooks.on('update', (o, old) => {
      if (worthReconciling(o, old)) playbookCtl.enqueue(keyOf(o));
    });
    s.playbooks.on('delete', (o) => playbookCtl.enqueue(keyOf(o)));
    s.credentials.on('add', (o) => credentialCtl.enqueue(keyOf(o)));
    s.credentials.on('update', (o, old) => {
      if (worthReconciling(o, old)) credentialCtl.enqueue(keyOf(o));
    });
    s.credentials.on('delete', (o) => credentialCtl.enqueue(keyOf(o)));
    s.workerPools.on('add', (o) => poolCtl.enqueue(keyOf(o)));
    s.workerPools.on('update', (o, old) => {
      if (worthReconciling(o, old)) {
        poolCtl.enqueue(keyOf(o));
        if (old && old !== o) {
          for (const k of statefulSetKey(old)) for (const p of poolsOf(k)) if (keyOf(p) !== keyOf(o)) poolCtl.enqueue(keyOf(p));
        }
      }
    });
    // A pool that goes away (or retargets) hands its StatefulSet to the next one at once.
    s.workerPools.on('delete', (o) => {
      poolCtl.enqueue(keyOf(o));
      for (const k of statefulSetKey(o)) for (const p of poolsOf(k)) poolCtl.enqueue(keyOf(p));
    });
    const secretChanged = (sec: k8s.V1Secret) => {
      for (const c of credentials.byIndex(SECRET_INDEX, `${sec.metadata?.namespace}/${sec.metadata?.name}`)) credentialCtl.enqueue(keyOf(c));
    };
    s.secrets.on('add', secretChanged);
    s.secrets.on('update', (o, old) => {
      if (o !== old) secretChanged(o);
    });
    s.secrets.on('delete', secretChanged);
  }
  const allInformers = sets.flatMap((s) => [s.playbooks, s.credentials, s.workerPools, s.secrets, ...(s.schedules ? [s.schedules] : [])]);

  const controllers = [playbookCtl, credentialCtl, poolCtl, ...(opts.schedules === false ? [] : [scheduleCtl])];
  let leading = false;
  // The drift sweep (controllers/drift.ts) runs on the leader, one sweep at a time.
  const verifyMs = Math.max(opts.verifyIntervalMs ?? 5 * 60_000, 100);
  let driftTimer: NodeJS.Timeout | undefined;
  let sweepGeneration = 0;
  const scheduleSweep = (generation = sweepGeneration) => {
    driftTimer = setTimeout(() => {
      sweepPlaybookDrift({
        api, log, playbooks: () => playbooks.values(),
        onDrift: (key) => {
          reconcilePlaybook.markDrifted(key);
          playbookCtl.enqueue(key);
        },
      }).catch((err: unknown) => log.warn({ err: String((err as Error)?.message ?? err) }, 'drift sweep failed; retrying at the next interval'))
        .finally(() => {
          if (leading && generation === sweepGeneration) scheduleSweep(generation);
        });
    }, verifyMs);
    driftTimer.unref?.();
  };
  const startControllers = async () => {
    await Promise.all(allInformers.map((i) => i.waitForSync()));
    if (!leading) return;
    for (const c of controllers) c.start();
    // Tens of thousands of keys: enqueue in slices, so the first reconciles and the lease renewals
    // run meanwhile.
    const enqueueAll = async <T extends KubeObjectLike>(objs: Iterable<T>, ctl: Controller) => {
      for (const o of [...objs]) {
        if (!leading) return;
        ctl.enqueue(keyOf(o));
        const y = yieldIfBusy();
        if (y) await y;
      }
    };
    await enqueueAll(playbooks.values(), playbookCtl);
    await enqueueAll(credentials.values(), credentialCtl);
    await enqueueAll(workerPools.values(), poolCtl);
    await enqueueAll(schedules.values(), scheduleCtl);
    if (!driftTimer && leading) scheduleSweep();
  };
  const stopControllers = async () => {
    clearTimeout(driftTimer);
    driftTimer = undefined;
    sweepGeneration += 1;
    await Promise.all(controllers.map((c) => c.stop()));
  };

  for (const i of allInformers) i.start();

  const le = opts.leaderElection ?? {};
  let elector: LeaderElector | undefined;
  if (le.enabled === false) {
    leading = true;
    metrics.leader.set(1);
    void startControllers();
  } else {
    elector = new LeaderElector(clients, {
      namespace: le.namespace ?? 'default',
      name: le.name ?? 'playflow-operator',
      identity,
      leaseDurationMs: le.leaseDurationMs,
      renewDeadlineMs: le.renewDeadlineMs,
      retryPeriodMs: le.retryPeriodMs,
      onStartedLeading: () => {
        leading = true;
        metrics.leader.set(1);
        void startControllers();
      },
      onStoppedLeading: () => {
        leading = false;
        metrics.leader.set(0);
        void stopControllers();
      },
      onNewLeader: (who) => log.info({ leader: who }, 'another instance leads'),
    }, log);
    elector.start();
  }

  const ready = () => allInformers.every((i) => i.hasSynced);
  let server: http.Server | undefined;
  let metricsUrl: string | undefined;
  if (opts.metricsPort !== undefined) {
    server = http.createServer((req, res) => {
      const url = (req.url ?? '/').split('?')[0];
      if (url === '/healthz') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      } else if (url === '/readyz') {
        const ok = ready();
        res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok' : 'informers not synced');
      } else if (url === '/metrics') {
        metrics.registry.metrics().then(
          (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
          (err: unknown) => res.writeHead(500).end(String(err)),
        );
      } else res.writeHead(404).end('not found');
    });
    await new Promise<void>((resolve) => server!.listen(opts.metricsPort, opts.metricsHost ?? '0.0.0.0', resolve));
    const addr = server.address() as AddressInfo;
    metricsUrl = `http://127.0.0.1:${addr.port}`;
  }
  log.info({ identity, namespaces: namespaces.filter(Boolean), metricsUrl }, 'operator started');

  return {
    identity,
    isLeader: () => leading,
    ready,
    metrics,
    metricsUrl,
    informers: sets,
    async stop() {
      // Finish in-flight reconciliations before giving the lease away, so the next leader never
      // overlaps with our last writes.
      leading = false;
      await stopControllers();
      await elector?.stop();
      await Promise.all(allInformers.map((i) => i.stop()));
      if (server) {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server!.close(() => resolve()));
      }
    },
  };
}

/** Options from the environment (DESIGN §3 names, plus the operator's own). */
export function operatorConfigFromEnv(env: NodeJS.ProcessEnv = process.env): Omit<OperatorOptions, 'kubeConfig'> {
  const num = (v: string | undefined, d: number) => (v !== undefined && v !== '' && Number.isFinite(Number(v)) ? Number(v) : d);
  return {
    serverUrl: serverUrlFromEnv(env)?.url ?? 'http://localhost:8082',
    apiToken: env.PLAYFLOW_API_TOKEN || undefined,
    namespaces: (env.WATCH_NAMESPACES ?? env.WATCH_NAMESPACE ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    identity: env.POD_NAME || undefined,
    metricsPort: num(env.OPERATOR_METRICS_PORT, 8081),
    leaderElection: {
      enabled: !['false', '0', 'no'].includes((env.LEADER_ELECT ?? 'true').toLowerCase()),
      namespace: env.OPERATOR_LEASE_NAMESPACE || env.POD_NAMESPACE || 'default',
      name: env.OPERATOR_LEASE_NAME || 'playflow-operator',
      leaseDurationMs: num(env.OPERATOR_LEASE_DURATION_SECONDS, 15) * 1000,
      renewDeadlineMs: num(env.OPERATOR_RENEW_DEADLINE_SECONDS, 10) * 1000,
      retryPeriodMs: num(env.OPERATOR_RETRY_PERIOD_SECONDS, 2) * 1000,
    },
    resyncMs: num(env.OPERATOR_RESYNC_SECONDS, 300) * 1000,
    verifyIntervalMs: num(env.OPERATOR_VERIFY_SECONDS, 300) * 1000,
    finalizerTimeoutMs: num(env.OPERATOR_FINALIZER_TIMEOUT_SECONDS, 300) * 1000,
    workers: num(env.OPERATOR_WORKERS, 4),
    queueQps: num(env.OPERATOR_QUEUE_QPS, 10),
    queueBurst: num(env.OPERATOR_QUEUE_BURST, 100),
    workerPoolPollMs: num(env.WORKERPOOL_POLL_SECONDS, 15) * 1000,
    schedules: !['off', 'false', '0', 'no'].includes((env.OPERATOR_SCHEDULES ?? 'on').toLowerCase()),
    defaultMetrics: true,
  };
}

/** Loads KUBECONFIG / ~/.kube/config, or the in-cluster service account inside a pod. */
export function loadKubeConfig(): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromDefault();
  return kc;
}
