/**
 * Acceptance: the operator against the fake Kubernetes API server (real client-node, real REST +
 * watch protocol, CRD schemas applied) and the REAL Playflow server (server/main.ts startServer:
 * createServerCore + buildApp on a random port, real PostgreSQL, in-process broker, bearer token).
 * A fault proxy sits between the operator and the server to simulate outages.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { ApiError, PlayflowClient } from '../../client/http.js';
import { loadConfig } from '../../server/config.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createLogger } from '../../common/logger.js';
import { startOperator, type RunningOperator } from '../../operator/main.js';
import { silentLogger } from '../../operator/log.js';
import { FINALIZER } from '../../operator/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { FakeKubeServer, loadCrds } from '../fake-k8s/server.js';
import { FaultProxy } from './fault-proxy.js';
import { condition, eventsFor, eventually, sleep, statefulSet } from './helpers.js';

const TOKEN = `op-${randomBytes(8).toString('hex')}`;
const G = { group: 'playflow.io', version: 'v1alpha1' };

describe('operator acceptance (fake API server + real Playflow server)', { timeout: 120_000 }, () => {
  const kube = new FakeKubeServer({
    bookmarkIntervalMs: 300, crds: loadCrds(),
    // The namespaces the tests write to exist, as on a real cluster (creating into a missing one is 404).
    namespaces: ['playflow-system', 'team-a', 'team-b', 'workers', 'relist', 'ha', 'outage'],
  });
  let db: TestDatabase;
  let server: RunningServer;
  let proxy: FaultProxy;
  let client: PlayflowClient;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  const running: RunningOperator[] = [];

  async function operator(identity: string, extra: Record<string, unknown> = {}): Promise<RunningOperator> {
    const op = await startOperator({
      kubeConfig: kube.kubeConfig(identity),
      serverUrl: proxy.url,
      apiToken: TOKEN,
      identity,
      leaderElection: { namespace: 'playflow-system', leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 200 },
      workerPoolPollMs: 150,
      baseBackoffMs: 50,
      maxBackoffMs: 500,
      informerBackoffMs: 50,
      resyncMs: 0,
      metricsPort: 0,
      metricsHost: '127.0.0.1',
      log: silentLogger,
      ...extra,
    });
    running.push(op);
    return op;
  }

  /** Like `kubectl apply`: create, or replace the spec (retrying when the operator wrote meanwhile: 409). */
  async function apply(plural: string, ns: string, body: any): Promise<any> {
    for (let attempt = 0; ; attempt++) {
      try {
        const cur = await custom.getNamespacedCustomObject({ ...G, plural, namespace: ns, name: body.metadata.name });
        return await custom.replaceNamespacedCustomObject({
          ...G, plural, namespace: ns, name: body.metadata.name,
          body: { ...cur, spec: body.spec, metadata: { ...cur.metadata, labels: body.metadata.labels } },
        });
      } catch (err) {
        const code = (err as { code?: number }).code;
        if (code === 409 && attempt < 20) continue;
        if (code !== 404) throw err;
        return custom.createNamespacedCustomObject({ ...G, plural, namespace: ns, body: { apiVersion: 'playflow.io/v1alpha1', ...body } });
      }
    }
  }

  const get = (plural: string, ns: string, name: string) => kube.getObject(plural, ns, name);

  beforeAll(async () => {
    db = await createTestDatabase('pfop');
    const config = loadConfig({
      DATABASE_URL: db.url,
      BROKER_URL: 'memory',
      PORT: '0',
      HOST: '127.0.0.1',
      PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      PLAYFLOW_API_TOKEN: TOKEN,
      LOG_LEVEL: 'silent',
    });
    server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'silent' }) });
    proxy = new FaultProxy(server.address);
    await proxy.start();
    await kube.start();
    client = new PlayflowClient({ baseUrl: server.address, token: TOKEN });
    const kc = kube.kubeConfig('kubectl');
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  afterEach(async () => {
    while (running.length) await running.pop()!.stop();
    proxy.down = false;
    proxy.failing.clear();
  });
  afterAll(async () => {
    await proxy?.stop();
    await kube.stop();
    await server?.stop();
    await db?.drop();
  });

  it('Playbook: apply → catalog + Ready; change → new version; same spec → no new version; invalid → Valid=False with paths; delete → gone, finalizer removed', async () => {
    const ns = 'team-a';
    const op = await operator('op-1');
    await eventually(() => expect(op.isLeader()).toBe(true));
    const spec = {
      workload: { greeting: 'hello' },
      workflow: [
        { step: 'start', next: 'greet' },
        { step: 'greet', tool: { kind: 'python', code: 'result = {"msg": "hi"}' }, next: 'end' },
        { step: 'end' },
      ],
    };
    await apply('playbooks', ns, { metadata: { name: 'greeter' }, spec });
    const ready = await eventually(() => {
      const o = get('playbooks', ns, 'greeter')!;
      expect(condition(o, 'Ready')?.status).toBe('True');
      return o;
    });
    expect(ready.metadata.finalizers).toEqual([FINALIZER]);
    expect(ready.status).toMatchObject({ catalogPath: 'team-a/greeter', catalogVersion: 1, observedGeneration: 1 });
    const v1 = await client.getPlaybook('team-a/greeter');
    expect(v1.version).toBe(1);
    expect(v1.content).toContain('apiVersion: playflow.io/v2');
    expect(v1.content).toContain('greeting: hello');

    await apply('playbooks', ns, { metadata: { name: 'greeter' }, spec: { ...spec, workload: { greeting: 'bonjour' } } });
    await eventually(() => expect(get('playbooks', ns, 'greeter')!.status).toMatchObject({ catalogVersion: 2, observedGeneration: 2 }));
    expect((await client.getPlaybook('team-a/greeter')).version).toBe(2);

    // the same spec again (kubectl apply of an unchanged file; a label change) → no registration
    const posts = () => proxy.log.filter((l) => l.startsWith('POST /api/catalog/playbook ')).length;
    const before = posts();
    await apply('playbooks', ns, { metadata: { name: 'greeter', labels: { owner: 'a' } }, spec: { ...spec, workload: { greeting: 'bonjour' } } });
    await sleep(500);
    expect(posts()).toBe(before);
    expect((await client.getPlaybook('team-a/greeter')).version).toBe(2);
    expect(get('playbooks', ns, 'greeter')!.metadata.labels).toEqual({ owner: 'a' });

    // invalid: a `next` target that does not exist → the server's 422 problems, with their paths
    await apply('playbooks', ns, { metadata: { name: 'greeter' }, spec: { workflow: [{ step: 'start', next: 'nowhere' }], deletionPolicy: 'Delete' } });
    const invalid = await eventually(() => {
      const o = get('playbooks', ns, 'greeter')!;
      expect(condition(o, 'Valid')?.status).toBe('False');
      return o;
    });
    const validMsg = condition(invalid, 'Valid')!.message;
    expect(validMsg).toMatch(/workflow\[0\]/);
    expect(validMsg).toContain('nowhere');
    expect(condition(invalid, 'Ready')).toMatchObject({ status: 'False', reason: 'Invalid' });
    const afterInvalid = posts();
    await sleep(600);
    expect(posts()).toBe(afterInvalid); // no hot loop until the generation changes
    expect((await client.getPlaybook('team-a/greeter')).version).toBe(2); // the last good version stays
    await eventually(() => expect(eventsFor(kube, ns, 'greeter').map((e) => e.reason)).toContain('InvalidPlaybook'));

    // delete → removed from the catalog, finalizer released, resource gone
    await custom.deleteNamespacedCustomObject({ ...G, plural: 'playbooks', namespace: ns, name: 'greeter' });
    await eventually(() => expect(get('playbooks', ns, 'greeter')).toBeUndefined());
    await expect(client.getPlaybook('team-a/greeter')).rejects.toMatchObject({ status: 404 });
  });

  it('Credential: stored from its Secret; Secret rotation updates it; missing Secret → Ready=False; delete removes it', async () => {
    const ns = 'team-b';
    await operator('op-2', { leaderElection: { enabled: false } });
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'api-secret' }, stringData: { client_id: 'abc', client_secret: 'first', token_url: 'https://auth.example/token' } } });
    await apply('credentials', ns, {
      metadata: { name: 'partner-api' },
      spec: { type: 'oauth2', description: 'partner API', tags: ['partner'], secretRef: { name: 'api-secret' }, deletionPolicy: 'Delete' },
    });
    await eventually(() => expect(condition(get('credentials', ns, 'partner-api'), 'Ready')?.status).toBe('True'));
    const read = () => client.request<{ credential_key: string; credential_type: string; data: Record<string, unknown> }>('GET', '/api/credential/partner-api');
    expect(await read()).toMatchObject({ credential_key: 'partner-api', credential_type: 'oauth2', data: { client_id: 'abc', client_secret: 'first', token_url: 'https://auth.example/token' } });
    expect(JSON.stringify(get('credentials', ns, 'partner-api'))).not.toContain('first');

    // rotate
    await core.patchNamespacedSecret({ namespace: ns, name: 'api-secret', body: { stringData: { client_secret: 'second' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await eventually(async () => expect((await read()).data.client_secret).toBe('second'));

    // a Credential whose Secret is missing
    await apply('credentials', ns, { metadata: { name: 'orphan' }, spec: { type: 'basic', secretRef: { name: 'does-not-exist' } } });
    await eventually(() => expect(condition(get('credentials', ns, 'orphan'), 'Ready')).toMatchObject({ status: 'False', reason: 'SecretNotFound' }));
    expect(condition(get('credentials', ns, 'orphan'), 'Ready')!.message).toContain('does-not-exist');
    await expect(client.request('GET', '/api/credential/orphan')).rejects.toBeInstanceOf(ApiError);
    // …which recovers when the Secret appears
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'does-not-exist' }, stringData: { username: 'u', password: 'p' } } });
    await eventually(() => expect(condition(get('credentials', ns, 'orphan'), 'Ready')?.status).toBe('True'));

    // schema validation failure from the server → Ready=False reason Invalid with its messages
    await apply('credentials', ns, { metadata: { name: 'orphan' }, spec: { type: 'basic', schema: { required: ['username', 'password', 'realm'] }, secretRef: { name: 'does-not-exist' } } });
    await eventually(() => expect(condition(get('credentials', ns, 'orphan'), 'Ready')).toMatchObject({ status: 'False', reason: 'Invalid' }));
    expect(condition(get('credentials', ns, 'orphan'), 'Ready')!.message).toContain('realm');

    await custom.deleteNamespacedCustomObject({ ...G, plural: 'credentials', namespace: ns, name: 'partner-api' });
    await eventually(() => expect(get('credentials', ns, 'partner-api')).toBeUndefined());
    await expect(read()).rejects.toMatchObject({ status: 404 });
  });

  it('WorkerPool: 200 queued commands, target 20 → 10 replicas; drained → down only after the window; stats down → unchanged', async () => {
    const ns = 'workers';
    // 200 commands queued and no worker running: a loop of 200 items, all in flight at once
    const items = Array.from({ length: 200 }, (_, i) => i);
    await client.registerPlaybook(stringify({
      apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata: { name: 'fanout', path: 'load/fanout' },
      workload: { items },
      workflow: [{ step: 'start', loop: { in: '{{ workload.items }}', iterator: 'item', mode: 'async', max_in_flight: 200 }, tool: { kind: 'python', code: 'result = item' } }],
    }), 'load/fanout');
    const run = await client.run({ path: 'load/fanout', payload: {} });
    const stats = await client.queueStats();
    expect(stats.queued + stats.leased).toBe(200);

    await apps().createNamespacedStatefulSet({ namespace: ns, body: statefulSet('playflow-worker', 1) as k8s.V1StatefulSet });
    const op = await operator('op-3');
    await apply('workerpools', ns, {
      metadata: { name: 'pool' },
      spec: { statefulSetName: 'playflow-worker', minReplicas: 1, maxReplicas: 10, targetQueueDepthPerReplica: 20, scaleDownStabilizationSeconds: 2 },
    });
    const replicas = () => kube.getObject('statefulsets', ns, 'playflow-worker', 'apps')!.spec.replicas;
    await eventually(() => expect(replicas()).toBe(10));
    await eventually(() => expect(get('workerpools', ns, 'pool')!.status).toMatchObject({ desiredReplicas: 10, queueDepth: 200, replicas: 10 }));
    await eventually(() => expect(eventsFor(kube, ns, 'pool').map((e) => e.reason)).toContain('ScaledUp'));
    // bounded by max
    await apply('workerpools', ns, {
      metadata: { name: 'pool' },
      spec: { statefulSetName: 'playflow-worker', minReplicas: 1, maxReplicas: 6, targetQueueDepthPerReplica: 20, scaleDownStabilizationSeconds: 2 },
    });
    await eventually(() => expect(replicas()).toBe(6));

    // stats endpoint down → replicas unchanged, Warning event, Ready=False
    proxy.failing.set('/api/queue/stats', 503);
    await eventually(() => expect(condition(get('workerpools', ns, 'pool'), 'Ready')).toMatchObject({ status: 'False', reason: 'ServerUnavailable' }));
    await eventually(() => expect(eventsFor(kube, ns, 'pool').map((e) => e.reason)).toContain('QueueReadFailed'));
    await sleep(400);
    expect(replicas()).toBe(6);
    proxy.failing.clear();

    // drain the queue (cancel the execution): scale down only after the 2 s window
    const drainedAt = Date.now();
    await client.cancelExecution(run.execution_id);
    await eventually(async () => {
      const s = await client.queueStats();
      expect(s.queued + s.leased).toBe(0);
    });
    await eventually(() => expect(get('workerpools', ns, 'pool')!.status.queueDepth).toBe(0));
    if (Date.now() - drainedAt < 1500) expect(replicas()).toBe(6); // still inside the window
    await eventually(() => expect(replicas()).toBe(1), 20_000);
    expect(Date.now() - drainedAt).toBeGreaterThanOrEqual(1500);
    await eventually(() => expect(eventsFor(kube, ns, 'pool').map((e) => e.reason)).toContain('ScaledDown'));

    // metrics and probes
    const metrics = await eventually(async () => {
      const text = await (await fetch(`${op.metricsUrl}/metrics`)).text();
      expect(text).toMatch(/playflow_operator_workerpool_desired_replicas\{namespace="workers",name="pool"\} 1\b/);
      return text;
    });
    expect(metrics).toContain('playflow_operator_leader 1');
    expect((await fetch(`${op.metricsUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${op.metricsUrl}/readyz`)).status).toBe(200);
  });

  it('relists and converges after the watch dropped and its history expired (410)', async () => {
    const ns = 'relist';
    const op = await operator('op-4', { leaderElection: { enabled: false } });
    await apply('playbooks', ns, { metadata: { name: 'a' }, spec: { workflow: [{ step: 'start' }] } });
    await apply('playbooks', ns, { metadata: { name: 'b' }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(() => {
      expect(get('playbooks', ns, 'a')?.status?.catalogVersion).toBe(1);
      expect(get('playbooks', ns, 'b')?.status?.catalogVersion).toBe(1);
    });
    const relists = op.informers[0]!.playbooks.relists;
    kube.setWatchesEnabled(false);
    await apply('playbooks', ns, { metadata: { name: 'a' }, spec: { workflow: [{ step: 'start', desc: 'changed while nobody watched' }] } });
    await apply('playbooks', ns, { metadata: { name: 'c' }, spec: { path: 'relist/c-path', workflow: [{ step: 'start' }] } });
    kube.compact();
    kube.setWatchesEnabled(true);
    await eventually(async () => {
      expect(get('playbooks', ns, 'a')?.status?.catalogVersion).toBe(2);
      expect(get('playbooks', ns, 'c')?.status?.catalogPath).toBe('relist/c-path');
    }, 8000);
    expect(op.informers[0]!.playbooks.relists).toBeGreaterThan(relists);
    expect((await client.getPlaybook('relist/a')).version).toBe(2);
    expect((await client.getPlaybook('relist/c-path')).version).toBe(1);
  });

  it('two operator instances: only the leader writes; the follower takes over when the leader stops', async () => {
    const ns = 'ha';
    const a = await operator('op-leader');
    await eventually(() => expect(a.isLeader()).toBe(true));
    const b = await operator('op-follower');
    await sleep(300);
    expect(b.isLeader()).toBe(false);
    await apply('playbooks', ns, { metadata: { name: 'x' }, spec: { workflow: [{ step: 'start' }] } });
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 's' }, stringData: { api_key: 'k' } } });
    await apply('credentials', ns, { metadata: { name: 'k' }, spec: { type: 'api_key', secretRef: { name: 's' } } });
    await eventually(() => {
      expect(get('playbooks', ns, 'x')?.status?.catalogVersion).toBe(1);
      expect(condition(get('credentials', ns, 'k'), 'Ready')?.status).toBe('True');
    });
    const nonLease = (token: string) => kube.writes(token).filter((r) => !r.path.includes('/leases/'));
    expect(nonLease('op-follower')).toEqual([]);
    expect(nonLease('op-leader').length).toBeGreaterThan(0);
    // …and only the leader talks to the Playflow server
    const serverCalls = (id: string) => proxy.requests.filter((r) => r.userAgent === `playflow-operator/${id}`);
    expect(serverCalls('op-follower')).toEqual([]);
    expect(serverCalls('op-leader').map((r) => `${r.method} ${r.path}`)).toEqual(expect.arrayContaining(['POST /api/catalog/playbook', 'POST /api/credentials']));

    await running.splice(running.indexOf(a), 1)[0]!.stop();
    await eventually(() => expect(b.isLeader()).toBe(true), 20_000);
    await apply('playbooks', ns, { metadata: { name: 'x' }, spec: { workflow: [{ step: 'start', desc: 'v2' }] } });
    await eventually(() => expect(get('playbooks', ns, 'x')?.status?.catalogVersion).toBe(2));
    expect(nonLease('op-follower').some((r) => r.path.endsWith('/playbooks/x/status'))).toBe(true);
    expect((await client.getPlaybook('ha/x')).version).toBe(2);
  });

  it('server unreachable → Ready=False ServerUnavailable with backoff, then converges; drift in the catalog is repaired', async () => {
    const ns = 'outage';
    proxy.down = true;
    await operator('op-5', { leaderElection: { enabled: false }, resyncMs: 250, verifyIntervalMs: 0 });
    await apply('playbooks', ns, { metadata: { name: 'p' }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(() => expect(condition(get('playbooks', ns, 'p'), 'Ready')).toMatchObject({ status: 'False', reason: 'ServerUnavailable' }));
    expect(condition(get('playbooks', ns, 'p'), 'Ready')!.message).toMatch(/cannot reach the Playflow server/);
    proxy.down = false;
    await eventually(() => expect(get('playbooks', ns, 'p')?.status?.catalogVersion).toBe(1), 20_000);
    expect(condition(get('playbooks', ns, 'p'), 'Ready')?.status).toBe('True');

    // somebody removes the entry through the API: the operator notices at its next check
    await client.deletePlaybook('outage/p');
    await eventually(async () => expect((await client.getPlaybook('outage/p')).content).toContain('outage/p'), 20_000);
    expect(get('playbooks', ns, 'p')?.status?.catalogVersion).toBeGreaterThanOrEqual(1);
  });

  function apps(): k8s.AppsV1Api {
    return kube.kubeConfig('kubectl').makeApiClient(k8s.AppsV1Api);
  }
});
