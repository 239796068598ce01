/**
 * WorkerPool validation and fallback, with the real operator against the fake API server and the
 * stub Playflow server (the harness of test/operator/controllers.test.ts): two pools targeting
 * one StatefulSet (the oldest scales it, the other is Conflict/Stalled naming it, and takes over
 * when it goes), and the failure threshold before fallbackReplicas. Pools poll once an hour here,
 * so each spec change is exactly one reconcile: no assertion depends on timing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeServer, loadCrds } from '../test/fake-k8s/server.js';
import { StubPlayflowServer } from '../test/operator/stub-server.js';
import { FaultProxy } from '../test/operator/fault-proxy.js';
import { condition, eventsFor, eventually, sleep, statefulSet } from '../test/operator/helpers.js';
import { silentLogger } from './log.js';
import { startOperator, type RunningOperator } from './main.js';

const HOUR = 3600;

describe('WorkerPool validation (fake API server + stub Playflow server)', { timeout: 120_000 }, () => {
  const kube = new FakeKubeServer({ crds: loadCrds(), namespaces: ['playflow-system', 'two', 'fb'] });
  const stub = new StubPlayflowServer();
  let proxy: FaultProxy;
  let op: RunningOperator;
  const replicas = (ns: string, sts: string) => kube.getObject('statefulsets', ns, sts, 'apps')!.spec.replicas;
  const bump = (ns: string, name: string, spec: Record<string, unknown>) => {
    // A spec change only (no status in the put): one generation, one reconcile.
    const { metadata, spec: old } = kube.getObject('workerpools', ns, name)!;
    kube.putObject('workerpools', { metadata: { name: metadata.name, namespace: metadata.namespace }, spec: { ...old, ...spec } });
  };

  beforeAll(async () => {
    await kube.start();
    await stub.start();
    proxy = new FaultProxy(stub.url);
    await proxy.start();
    op = await startOperator({
      kubeConfig: kube.kubeConfig('op'), serverUrl: proxy.url, identity: 'op',
      leaderElection: { namespace: 'playflow-system', leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 200 },
      workerPoolPollMs: 150, baseBackoffMs: 50, maxBackoffMs: 500, informerBackoffMs: 50, resyncMs: 0, log: silentLogger,
    });
    await eventually(() => expect(op.isLeader()).toBe(true));
  });
  afterAll(async () => {
    await op?.stop();
    await proxy.stop();
    await stub.stop();
    await kube.stop();
  });

  it('refuses a second pool on one StatefulSet: the oldest scales it, the other is Conflict + Stalled naming it, then takes over', async () => {
    const ns = 'two';
    kube.putObject('statefulsets', { ...statefulSet('workers', 1), metadata: { name: 'workers', namespace: ns } }, 'apps');
    stub.stats = { queued: 100, leased: 0, delayed: 0, oldest_age_seconds: 1 };
    const spec = { statefulSetName: 'workers', minReplicas: 1, maxReplicas: 10, targetQueueDepthPerReplica: 20, pollIntervalSeconds: HOUR };
    // "zeta" is created first: age, not the name, decides (creationTimestamp has whole seconds).
    kube.putObject('workerpools', { metadata: { name: 'zeta', namespace: ns }, spec });
    await eventually(() => expect(replicas(ns, 'workers')).toBe(5));
    await sleep(1100);
    kube.putObject('workerpools', { metadata: { name: 'alpha', namespace: ns }, spec: { ...spec, minReplicas: 8, targetQueueDepthPerReplica: 1 } });

    const loser = await eventually(() => {
      const o = kube.getObject('workerpools', ns, 'alpha')!;
      expect(condition(o, 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' });
      return o;
    });
    expect(condition(loser, 'Ready')!.message).toContain(`StatefulSet ${ns}/workers is scaled by WorkerPool ${ns}/zeta`);
    expect(condition(loser, 'Stalled')).toMatchObject({ status: 'True', reason: 'Conflict' });
    expect(loser.status.desiredReplicas).toBeUndefined();
    await eventually(() => expect(eventsFor(kube, ns, 'alpha').map((e) => e.reason)).toContain('Conflict'));
    // alpha would ask for max (100 / 1, min 8): the StatefulSet still follows zeta.
    expect(replicas(ns, 'workers')).toBe(5);
    const winner = kube.getObject('workerpools', ns, 'zeta')!;
    expect(condition(winner, 'Ready')?.status).toBe('True');
    expect(condition(winner, 'Stalled')).toBeUndefined();

    // zeta goes: alpha scales the StatefulSet at once (no poll needed), its Conflict cleared.
    const { CustomObjectsApi } = await import('@kubernetes/client-node');
    await kube.kubeConfig('user').makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ group: 'playflow.io', version: 'v1alpha1', plural: 'workerpools', namespace: ns, name: 'zeta' });
    await eventually(() => expect(replicas(ns, 'workers')).toBe(10));
    // the controller writes the pool's status after it scales: wait for that write too
    const took = await eventually(() => {
      const o = kube.getObject('workerpools', ns, 'alpha')!;
      expect(condition(o, 'Ready')).toMatchObject({ status: 'True' });
      return o;
    });
    expect(condition(took, 'Stalled')).toBeUndefined();
  });

  it("sizes the StatefulSet from its own worker pool's depth (spec.pool), not the whole queue's", async () => {
    const ns = 'two';
    kube.putObject('statefulsets', { ...statefulSet('gpu-workers', 1), metadata: { name: 'gpu-workers', namespace: ns } }, 'apps');
    stub.stats = { queued: 400, leased: 0, delayed: 0, oldest_age_seconds: 1 }; // every pool together
    stub.poolStats = { gpu: { queued: 50, leased: 10, delayed: 0, oldest_age_seconds: 1 } };
    try {
      kube.putObject('workerpools', {
        metadata: { name: 'gpu', namespace: ns },
        spec: { statefulSetName: 'gpu-workers', pool: 'gpu', minReplicas: 1, maxReplicas: 10, targetQueueDepthPerReplica: 20, pollIntervalSeconds: HOUR },
      });
      await eventually(() => expect(replicas(ns, 'gpu-workers')).toBe(3)); // ceil(60 / 20), not ceil(400 / 20)
      await eventually(() => expect(kube.getObject('workerpools', ns, 'gpu')!.status?.queueDepth).toBe(60)); // written after the scale
      expect(proxy.requests.some((r) => r.path === '/api/queue/stats?pool=gpu')).toBe(true);
    } finally {
      stub.stats = { queued: 0, leased: 0, delayed: 0, oldest_age_seconds: 0 };
      stub.poolStats = {};
    }
  });

  it('keeps the count through failed queue reads until fallbackFailureThreshold, then uses fallbackReplicas', async () => {
    const ns = 'fb';
    kube.putObject('statefulsets', { ...statefulSet('workers', 4), metadata: { name: 'workers', namespace: ns } }, 'apps');
    proxy.failing.set('/api/queue/stats', 503);
    try {
      kube.putObject('workerpools', {
        metadata: { name: 'pool', namespace: ns },
        spec: { statefulSetName: 'workers', minReplicas: 1, maxReplicas: 10, fallbackReplicas: 2, fallbackFailureThreshold: 2, pollIntervalSeconds: HOUR },
      });
      const first = await eventually(() => {
        const o = kube.getObject('workerpools', ns, 'pool')!;
        expect(o.status?.queueReadFailures).toBe(1);
        return o;
      });
      expect(condition(first, 'Ready')).toMatchObject({ status: 'False', reason: 'ServerUnavailable' });
      expect(condition(first, 'Ready')!.message).toContain('keeping 4 replicas (fallbackReplicas after 2 failed reads in a row, 1 so far)');
      expect(replicas(ns, 'workers')).toBe(4);

      bump(ns, 'pool', { maxReplicas: 11 }); // one more reconcile: the second failure in a row
      await eventually(() => expect(replicas(ns, 'workers')).toBe(2));
      // the reconcile scales first and writes the pool's status after: wait for that write too
      const second = await eventually(() => {
        const o = kube.getObject('workerpools', ns, 'pool')!;
        expect(o.status.queueReadFailures).toBe(2);
        return o;
      });
      expect(condition(second, 'Ready')!.message).toContain('using fallbackReplicas 2');
    } finally {
      proxy.failing.clear();
    }
    stub.stats = { queued: 60, leased: 0, delayed: 0, oldest_age_seconds: 1 };
    bump(ns, 'pool', { maxReplicas: 12 });
    await eventually(() => expect(replicas(ns, 'workers')).toBe(3));
    const back = await eventually(() => {
      const o = kube.getObject('workerpools', ns, 'pool')!;
      expect(o.status.queueReadFailures).toBe(0);
      return o;
    });
    expect(condition(back, 'Ready')?.status).toBe('True');
  });
});
