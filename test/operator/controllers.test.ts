/**
 * The operator (informers, work queues, controllers, leader election) against the fake
 * Kubernetes API server through the real client-node, with a stub Playflow server whose answers
 * the tests steer exactly (queue depth, validation failures, outages). The same behaviour against
 * the real Playflow server is in operator.acceptance.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeServer, loadCrds } from '../fake-k8s/server.js';
import { startOperator, type RunningOperator } from '../../operator/main.js';
import { silentLogger } from '../../operator/log.js';
import { FINALIZER } from '../../operator/types.js';
import { StubPlayflowServer } from './stub-server.js';
import { FaultProxy } from './fault-proxy.js';
import { condition, eventsFor, eventually, merge, sleep, statefulSet } from './helpers.js';

const fast = {
  workerPoolPollMs: 150,
  baseBackoffMs: 50,
  maxBackoffMs: 500,
  informerBackoffMs: 50,
  resyncMs: 0,
  log: silentLogger,
};

describe('operator controllers (fake API server + stub Playflow server)', { timeout: 120_000 }, () => {
  const kube = new FakeKubeServer({
    bookmarkIntervalMs: 200, crds: loadCrds(),
    // The namespaces the tests write to exist, as on a real cluster (creating into a missing one is 404).
    namespaces: ['playflow-system', 'pb', 'down', 'cred', 'wp', 'relist', 'le', 'conf-a', 'conf-b', 'drift', 'only-a', 'only-b', 'other', 'flap'],
  });
  const stub = new StubPlayflowServer();
  let proxy: FaultProxy;
  const running: RunningOperator[] = [];

  async function operator(token: string, extra: Record<string, unknown> = {}): Promise<RunningOperator> {
    const op = await startOperator({
      kubeConfig: kube.kubeConfig(token),
      serverUrl: proxy.url,
      identity: token,
      leaderElection: { namespace: 'playflow-system', leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 200 },
      ...fast,
      ...extra,
    });
    running.push(op);
    return op;
  }

  /** Over one second, `attempts` grows as a backoff of 50 ms doubling (capped at 500 ms here) allows. */
  async function expectBackoff(attempts: () => number): Promise<void> {
    const t0 = Date.now();
    const n0 = attempts();
    await sleep(1000);
    expect(attempts() - n0).toBeLessThanOrEqual(Math.ceil((Date.now() - t0) / 50));
    expect(attempts() - n0).toBeLessThan(12);
  }

  beforeAll(async () => {
    await kube.start();
    await stub.start();
    proxy = new FaultProxy(stub.url);
    await proxy.start();
  });
  afterEach(async () => {
    while (running.length) await running.pop()!.stop();
    proxy.down = false;
    proxy.failing.clear();
  });
  afterAll(async () => {
    await proxy.stop();
    await stub.stop();
    await kube.stop();
  });

  it('registers a Playbook, re-registers on change only, reports an invalid one without retrying, and cleans up on delete', async () => {
    const ns = 'pb';
    const op = await operator('op-pb');
    await eventually(() => expect(op.isLeader()).toBe(true));
    kube.putObject('playbooks', {
      apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook',
      metadata: { name: 'hello', namespace: ns },
      spec: { workload: { who: 'world' }, workflow: [{ step: 'start', next: 'end' }, { step: 'end' }] },
    });
    const ready = await eventually(() => {
      const o = kube.getObject('playbooks', ns, 'hello')!;
      expect(condition(o, 'Ready')?.status).toBe('True');
      return o;
    });
    expect(ready.metadata.finalizers).toContain(FINALIZER);
    expect(ready.status).toMatchObject({ catalogPath: 'pb/hello', catalogVersion: 1, observedGeneration: 1 });
    expect(condition(ready, 'Valid')?.status).toBe('True');
    const content = stub.catalog.get('pb/hello')![0]!.content;
    expect(content).toContain('apiVersion: playflow.io/v2');
    expect(content).toContain('path: pb/hello');

    // change → new version
    /** Reconciliations the playbook controller finished (op.metrics). */
    const reconciled = async () => (await op.metrics.reconciles.get()).values.filter((v) => v.labels.controller === 'playbook').reduce((n, v) => n + v.value, 0);
    const beforeChange = await reconciled();
    kube.putObject('playbooks', { ...ready, spec: { ...ready.spec, workload: { who: 'k8s' } } });
    await eventually(() => expect(kube.getObject('playbooks', ns, 'hello')!.status).toMatchObject({ catalogVersion: 2, observedGeneration: 2 }));
    await eventually(async () => expect(await reconciled()).toBeGreaterThan(beforeChange));

    // same spec again (labels only, a resync, a re-apply) → no registration
    const posts = () => stub.calls.filter((c) => c === 'POST /api/catalog/playbook').length;
    const before = posts();
    const cur = kube.getObject('playbooks', ns, 'hello')!;
    kube.putObject('playbooks', { ...cur, metadata: { ...cur.metadata, labels: { team: 'a' } } });
    kube.putObject('playbooks', { ...cur, spec: structuredClone(cur.spec) });
    await sleep(400);
    expect(posts()).toBe(before);
    expect(stub.catalog.get('pb/hello')).toHaveLength(2);
    // the controller does reconcile the re-applied object (a resync once the informer holds it),
    // and registers nothing
    await eventually(() => expect(op.informers[0]!.playbooks.get(ns, 'hello')?.metadata.labels).toEqual({ team: 'a' }));
    const beforeResync = await reconciled();
    await op.informers[0]!.playbooks.resync();
    await eventually(async () => expect(await reconciled()).toBeGreaterThan(beforeResync));
    expect(posts()).toBe(before);
    expect(stub.catalog.get('pb/hello')).toHaveLength(2);

    // invalid → Valid=False with the problems' paths, and no hot loop
    const c2 = kube.getObject('playbooks', ns, 'hello')!;
    kube.putObject('playbooks', { ...c2, spec: { workflow: [{ step: 'start', next: 'nowhere' }] } });
    const invalid = await eventually(() => {
      const o = kube.getObject('playbooks', ns, 'hello')!;
      expect(condition(o, 'Valid')?.status).toBe('False');
      return o;
    });
    expect(condition(invalid, 'Valid')!.message).toContain('workflow[0].next[0]');
    expect(condition(invalid, 'Ready')).toMatchObject({ status: 'False', reason: 'Invalid' });
    expect(invalid.status.catalogVersion).toBe(2); // the last good version stays registered
    const afterInvalid = posts();
    await sleep(500);
    expect(posts()).toBe(afterInvalid);
    await eventually(() => expect(eventsFor(kube, ns, 'hello').map((e) => e.reason)).toContain('InvalidPlaybook'));
    // a reconcile of the unchanged invalid spec (a resync, once the informer holds the Invalid
    // status) sends nothing either
    await eventually(() => expect(condition(op.informers[0]!.playbooks.get(ns, 'hello'), 'Valid')?.status).toBe('False'));
    const beforeInvalidResync = await reconciled();
    await op.informers[0]!.playbooks.resync();
    await eventually(async () => expect(await reconciled()).toBeGreaterThan(beforeInvalidResync));
    expect(posts()).toBe(afterInvalid);

    // fix it, then delete (deletionPolicy Delete; the default Retain is tested below) → removed
    // from the catalog, finalizer released, object gone
    kube.putObject('playbooks', { ...invalid, spec: { workflow: [{ step: 'start' }], deletionPolicy: 'Delete' } });
    await eventually(() => expect(kube.getObject('playbooks', ns, 'hello')!.status.catalogVersion).toBe(3));
    await op.informers[0]!.playbooks.waitForSync();
    const kc = kube.kubeConfig('user');
    const { CustomObjectsApi } = await import('@kubernetes/client-node');
    await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ group: 'playflow.io', version: 'v1alpha1', plural: 'playbooks', namespace: ns, name: 'hello' });
    await eventually(() => expect(kube.getObject('playbooks', ns, 'hello')).toBeUndefined());
    expect(stub.deleted.has('pb/hello')).toBe(true);
  });

  it('reports ServerUnavailable while the server cannot be reached, retries with backoff, and recovers', async () => {
    const ns = 'down';
    proxy.down = true;
    const op = await operator('op-down');
    kube.putObject('playbooks', { metadata: { name: 'p', namespace: ns }, spec: { path: 'ops/p', workflow: [{ step: 'start' }] } });
    await eventually(() => expect(condition(kube.getObject('playbooks', ns, 'p'), 'Ready')).toMatchObject({ status: 'False', reason: 'ServerUnavailable' }));
    const attempts = () => proxy.log.filter((l) => l.startsWith('POST /api/catalog/playbook')).length;
    const tries = attempts();
    await eventually(() => expect(attempts()).toBeGreaterThan(tries)); // retried…
    await expectBackoff(attempts); // …with backoff, not in a hot loop
    expect(op.isLeader()).toBe(true);
    proxy.down = false;
    await eventually(() => expect(kube.getObject('playbooks', ns, 'p')!.status).toMatchObject({ catalogPath: 'ops/p', catalogVersion: 1 }), 20_000);
    await eventually(() => expect(condition(kube.getObject('playbooks', ns, 'p'), 'Ready')?.status).toBe('True'));
  });

  it('keeps backing off when each failure reads differently: its own status writes do not retrigger it', async () => {
    // Every failed registration writes Ready=False with the error's message. When the messages
    // differ (here each 503 is numbered), each write is a real change, so a controller that
    // reconciled on its own status updates would retry at once, past its backoff.
    const ns = 'flap';
    proxy.failing.set('/api/catalog/playbook', 503);
    const op = await operator('op-flap');
    kube.putObject('playbooks', { metadata: { name: 'p', namespace: ns }, spec: { path: 'ops/flap', workflow: [{ step: 'start' }] } });
    await eventually(() => expect(condition(kube.getObject('playbooks', ns, 'p'), 'Ready')).toMatchObject({ status: 'False', reason: 'ServerUnavailable' }));
    const attempts = () => proxy.log.filter((l) => l.startsWith('POST /api/catalog/playbook')).length;
    const first = condition(kube.getObject('playbooks', ns, 'p'), 'Ready')!.message;
    await eventually(() => expect(condition(kube.getObject('playbooks', ns, 'p'), 'Ready')!.message).not.toBe(first)); // the status did change
    await expectBackoff(attempts);
    expect(op.isLeader()).toBe(true);
    proxy.failing.clear();
    await eventually(() => expect(kube.getObject('playbooks', ns, 'p')!.status).toMatchObject({ catalogPath: 'ops/flap', catalogVersion: 1 }), 20_000);
  });

  it('syncs a Credential from its Secret, re-syncs on rotation, reports a missing Secret or key, and deletes', async () => {
    const ns = 'cred';
    await operator('op-cred');
    kube.putObject('credentials', {
      metadata: { name: 'pg-main', namespace: ns },
      spec: {
        type: 'postgres', description: 'main db', tags: ['db'], deletionPolicy: 'Delete', scope: { namespaces: ['cred'] },
        schema: { required: ['db_host', 'db_password'], types: { db_port: 'integer' } },
        secretRef: { name: 'pg-secret', keys: [{ key: 'host', field: 'db_host' }, { key: 'port', field: 'db_port' }, { key: 'password', field: 'db_password' }] },
      },
    });
    await eventually(() => expect(condition(kube.getObject('credentials', ns, 'pg-main'), 'Ready')).toMatchObject({ status: 'False', reason: 'SecretNotFound' }));
    kube.putObject('secrets', { metadata: { name: 'pg-secret', namespace: ns }, stringData: { host: 'db', port: '5432', password: 's3cret' } }, '');
    await eventually(() => expect(condition(kube.getObject('credentials', ns, 'pg-main'), 'Ready')?.status).toBe('True'));
    expect(stub.credentials.get('pg-main')).toMatchObject({ type: 'postgres', description: 'main db', tags: ['db'], scope: { namespaces: ['cred'] }, data: { db_host: 'db', db_port: 5432, db_password: 's3cret' } });
    // the custom resource never carries the data
    expect(JSON.stringify(kube.getObject('credentials', ns, 'pg-main'))).not.toContain('s3cret');

    kube.putObject('secrets', { metadata: { name: 'pg-secret', namespace: ns }, stringData: { host: 'db', port: '5432', password: 'rotated' } }, '');
    await eventually(() => expect(stub.credentials.get('pg-main').data.db_password).toBe('rotated'));

    kube.putObject('secrets', { metadata: { name: 'pg-secret', namespace: ns }, data: { host: Buffer.from('db').toString('base64') } }, '');
    await eventually(() => expect(condition(kube.getObject('credentials', ns, 'pg-main'), 'Ready')).toMatchObject({ status: 'False', reason: 'SecretKeyNotFound' }));
    expect(condition(kube.getObject('credentials', ns, 'pg-main'), 'Ready')!.message).toContain("'password'");

    const { CustomObjectsApi } = await import('@kubernetes/client-node');
    await kube.kubeConfig('user').makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ group: 'playflow.io', version: 'v1alpha1', plural: 'credentials', namespace: ns, name: 'pg-main' });
    await eventually(() => expect(kube.getObject('credentials', ns, 'pg-main')).toBeUndefined());
    expect(stub.credentials.has('pg-main')).toBe(false);
  });

  it('scales a WorkerPool from queue depth: up at once, down after the window, unchanged when stats fail', async () => {
    const ns = 'wp';
    kube.putObject('statefulsets', { ...statefulSet('workers', 1), metadata: { name: 'workers', namespace: ns } }, 'apps');
    stub.stats = { queued: 200, leased: 0, delayed: 50, oldest_age_seconds: 3 };
    await operator('op-wp');
    kube.putObject('workerpools', {
      metadata: { name: 'pool', namespace: ns },
      spec: { statefulSetName: 'workers', minReplicas: 1, maxReplicas: 10, targetQueueDepthPerReplica: 20, scaleDownStabilizationSeconds: 1 },
    });
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(10));
    await eventually(() => expect(kube.getObject('workerpools', ns, 'pool')!.status).toMatchObject({ desiredReplicas: 10, queueDepth: 200 }));
    await eventually(() => expect(eventsFor(kube, ns, 'pool').map((e) => e.reason)).toContain('ScaledUp'));

    // bounded by max
    stub.stats = { queued: 500, leased: 100, delayed: 0, oldest_age_seconds: 3 };
    const pool = kube.getObject('workerpools', ns, 'pool')!;
    kube.putObject('workerpools', { ...pool, spec: { ...pool.spec, maxReplicas: 12 } });
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(12));
    await eventually(() => expect(condition(kube.getObject('workerpools', ns, 'pool'), 'ScalingLimited')).toMatchObject({ status: 'True', reason: 'TooManyReplicas' }));

    // drained: not before the window, then down to min
    stub.stats = { queued: 0, leased: 0, delayed: 0, oldest_age_seconds: 0 };
    const drainedAt = Date.now();
    await sleep(300);
    if (Date.now() - drainedAt < 700) expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(12);
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(1), 20_000);
    expect(Date.now() - drainedAt).toBeGreaterThanOrEqual(900);
    await eventually(() => expect(eventsFor(kube, ns, 'pool').map((e) => e.reason)).toContain('ScaledDown'));

    // stats endpoint down → replicas unchanged, QueueReadFailed, Ready=False
    stub.stats = { queued: 100, leased: 0, delayed: 0, oldest_age_seconds: 0 };
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(5));
    proxy.failing.set('/api/queue/stats', 503);
    await eventually(() => expect(condition(kube.getObject('workerpools', ns, 'pool'), 'Ready')).toMatchObject({ status: 'False', reason: 'ServerUnavailable' }));
    await sleep(400);
    expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(5);
    await eventually(() => expect(eventsFor(kube, ns, 'pool').map((e) => e.reason)).toContain('QueueReadFailed'));

    // …or fallbackReplicas when set
    const p2 = kube.getObject('workerpools', ns, 'pool')!;
    kube.putObject('workerpools', { ...p2, spec: { ...p2.spec, fallbackReplicas: 3 } });
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(3));
    proxy.failing.clear();
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(5));
    await eventually(() => expect(condition(kube.getObject('workerpools', ns, 'pool'), 'Ready')?.status).toBe('True'));

    // `kubectl scale workerpool pool --replicas=4` (the WorkerPool's scale subresource) pins the count
    const { CustomObjectsApi } = await import('@kubernetes/client-node');
    const kubectl = kube.kubeConfig('kubectl').makeApiClient(CustomObjectsApi);
    await kubectl.patchNamespacedCustomObjectScale({ group: 'playflow.io', version: 'v1alpha1', plural: 'workerpools', namespace: ns, name: 'pool', body: { spec: { replicas: 4 } } }, merge);
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(4));
    await eventually(() => expect(condition(kube.getObject('workerpools', ns, 'pool'), 'Ready')?.reason).toBe('ManualReplicas'));
    const p3 = kube.getObject('workerpools', ns, 'pool')!;
    kube.putObject('workerpools', { ...p3, spec: { ...p3.spec, replicas: undefined } });
    await eventually(() => expect(kube.getObject('statefulsets', ns, 'workers', 'apps')!.spec.replicas).toBe(5));
  });

  it('relists after the watch drops and its history expires (410), and converges', async () => {
    const ns = 'relist';
    const op = await operator('op-relist');
    kube.putObject('playbooks', { metadata: { name: 'keep', namespace: ns }, spec: { workflow: [{ step: 'start' }] } });
    kube.putObject('playbooks', { metadata: { name: 'gone', namespace: ns }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(() => {
      expect(kube.getObject('playbooks', ns, 'keep')?.status?.catalogVersion).toBe(1);
      expect(kube.getObject('playbooks', ns, 'gone')?.status?.catalogVersion).toBe(1);
    });
    const relists = op.informers[0]!.playbooks.relists;
    kube.setWatchesEnabled(false);
    // while nobody watches: a change, a new object, and a deletion (finalizer removed by hand)
    const keep = kube.getObject('playbooks', ns, 'keep')!;
    kube.putObject('playbooks', { ...keep, spec: { workflow: [{ step: 'start', desc: 'changed' }] } });
    kube.putObject('playbooks', { metadata: { name: 'new', namespace: ns }, spec: { workflow: [{ step: 'start' }] } });
    const gone = kube.getObject('playbooks', ns, 'gone')!;
    kube.putObject('playbooks', { ...gone, metadata: { ...gone.metadata, finalizers: [] } });
    const { CustomObjectsApi } = await import('@kubernetes/client-node');
    await kube.kubeConfig('user').makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ group: 'playflow.io', version: 'v1alpha1', plural: 'playbooks', namespace: ns, name: 'gone' });
    kube.compact();
    kube.setWatchesEnabled(true);
    await eventually(() => {
      expect(kube.getObject('playbooks', ns, 'keep')?.status?.catalogVersion).toBe(2);
      expect(kube.getObject('playbooks', ns, 'new')?.status?.catalogVersion).toBe(1);
    }, 8000);
    expect(op.informers[0]!.playbooks.relists).toBeGreaterThan(relists);
    expect(op.informers[0]!.playbooks.get(ns, 'gone')).toBeUndefined();
    expect(kube.requests.some((r) => r.status === 200 && r.query.includes('resourceVersion') && r.query.includes('watch=true'))).toBe(true);
  });

  it('only the leader writes; the other takes over when it stops', async () => {
    const ns = 'le';
    const a = await operator('op-a');
    await eventually(() => expect(a.isLeader()).toBe(true));
    const b = await operator('op-b');
    await sleep(400);
    expect(b.isLeader()).toBe(false);
    kube.putObject('playbooks', { metadata: { name: 'x', namespace: ns }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(() => expect(kube.getObject('playbooks', ns, 'x')?.status?.catalogVersion).toBe(1));
    const isLeaseWrite = (path: string) => path.includes('/leases/');
    expect(kube.writes('op-b').filter((r) => !isLeaseWrite(r.path) && r.status < 400)).toEqual([]);
    expect(kube.writes('op-a').some((r) => r.path.includes('/playbooks/x'))).toBe(true);

    await running.splice(running.indexOf(a), 1)[0]!.stop(); // releases the lease
    await eventually(() => expect(b.isLeader()).toBe(true), 20_000);
    kube.putObject('playbooks', { metadata: { name: 'y', namespace: ns }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(() => expect(kube.getObject('playbooks', ns, 'y')?.status?.catalogVersion).toBe(1));
    expect(kube.writes('op-b').some((r) => r.path.includes('/playbooks/y'))).toBe(true);
    const lease = kube.getObject('leases', 'playflow-system', 'playflow-operator', 'coordination.k8s.io')!;
    expect(lease.spec.holderIdentity).toBe('op-b');
    expect(lease.spec.leaseTransitions).toBeGreaterThanOrEqual(1);
  });

  it('a leader that cannot renew steps down before the lease expires, and the other instance takes over', async () => {
    const a = await operator('op-c');
    await eventually(() => expect(a.isLeader()).toBe(true));
    const b = await operator('op-d');
    // op-c's lease updates now fail (an API server partition for that pod only)
    kube.failNext((m, p, token) => token === 'op-c' && m === 'PUT' && p.includes('/leases/'), 500, 100_000);
    const lostAt = Date.now();
    await eventually(() => expect(a.isLeader()).toBe(false), 15_000);
    expect(b.isLeader()).toBe(false);
    await eventually(() => expect(b.isLeader()).toBe(true), 15_000);
    // never two leaders: op-d took over only after op-c had stepped down and the lease had expired
    expect(Date.now() - lostAt).toBeGreaterThanOrEqual(3000);
    expect(a.isLeader()).toBe(false);
    kube.clearFailures();
  });

  it('the oldest resource owns a catalog path or credential name; a second claimant reports a conflict', async () => {
    const ns1 = 'conf-a';
    const ns2 = 'conf-b';
    await operator('op-conflict');
    kube.putObject('playbooks', { metadata: { name: 'p', namespace: ns1 }, spec: { path: 'shared/path', workflow: [{ step: 'start' }] } });
    await eventually(() => expect(kube.getObject('playbooks', ns1, 'p')?.status?.catalogVersion).toBe(1));
    kube.putObject('playbooks', { metadata: { name: 'p', namespace: ns2 }, spec: { path: 'shared/path', workflow: [{ step: 'start', desc: 'other' }] } });
    await eventually(() => expect(condition(kube.getObject('playbooks', ns2, 'p'), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' }));
    expect(condition(kube.getObject('playbooks', ns2, 'p'), 'Ready')!.message).toContain('conf-a/p');
    expect(stub.catalog.get('shared/path')).toHaveLength(1);

    kube.putObject('secrets', { metadata: { name: 's', namespace: ns1 }, stringData: { token: 'one' } }, '');
    kube.putObject('secrets', { metadata: { name: 's', namespace: ns2 }, stringData: { token: 'two' } }, '');
    kube.putObject('credentials', { metadata: { name: 'c', namespace: ns1 }, spec: { name: 'shared-cred', type: 'bearer', secretRef: { name: 's' } } });
    await eventually(() => expect(stub.credentials.get('shared-cred')?.data.token).toBe('one'));
    kube.putObject('credentials', { metadata: { name: 'c', namespace: ns2 }, spec: { name: 'shared-cred', type: 'bearer', secretRef: { name: 's' } } });
    await eventually(() => expect(condition(kube.getObject('credentials', ns2, 'c'), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' }));
    expect(stub.credentials.get('shared-cred')?.data.token).toBe('one');
  });

  it('repairs drift: a catalog entry or credential removed behind its back is registered again', async () => {
    const ns = 'drift';
    await operator('op-drift', { resyncMs: 200, verifyIntervalMs: 0 });
    kube.putObject('playbooks', { metadata: { name: 'd', namespace: ns }, spec: { workflow: [{ step: 'start' }] } });
    kube.putObject('secrets', { metadata: { name: 's', namespace: ns }, stringData: { api_key: 'k' } }, '');
    kube.putObject('credentials', { metadata: { name: 'd', namespace: ns }, spec: { type: 'api_key', secretRef: { name: 's' } } });
    await eventually(() => {
      expect(kube.getObject('playbooks', ns, 'd')?.status?.catalogVersion).toBe(1);
      expect(stub.credentials.has('d')).toBe(true);
    });
    stub.deleted.add('drift/d');
    stub.credentials.delete('d');
    await eventually(() => {
      expect(stub.deleted.has('drift/d')).toBe(false);
      expect(stub.credentials.get('d')?.data).toEqual({ api_key: 'k' });
    }, 5000);
  });

  it('watches only the namespaces it is given', async () => {
    await operator('op-ns', { namespaces: ['only-a', 'only-b'], leaderElection: { enabled: false } });
    kube.putObject('playbooks', { metadata: { name: 'in-a', namespace: 'only-a' }, spec: { workflow: [{ step: 'start' }] } });
    kube.putObject('playbooks', { metadata: { name: 'in-b', namespace: 'only-b' }, spec: { workflow: [{ step: 'start' }] } });
    kube.putObject('playbooks', { metadata: { name: 'elsewhere', namespace: 'other' }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(() => {
      expect(kube.getObject('playbooks', 'only-a', 'in-a')?.status?.catalogVersion).toBe(1);
      expect(kube.getObject('playbooks', 'only-b', 'in-b')?.status?.catalogVersion).toBe(1);
    });
    await sleep(300);
    expect(kube.getObject('playbooks', 'other', 'elsewhere')?.status).toBeUndefined();
    expect(kube.requests.some((r) => r.token === 'op-ns' && (r.path === '/apis/playflow.io/v1alpha1/playbooks' || r.path === '/api/v1/secrets'))).toBe(false);
  });
});
