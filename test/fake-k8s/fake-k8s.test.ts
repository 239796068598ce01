/**
 * The fake API server, exercised through the real @kubernetes/client-node: typed APIs, patch
 * content types, the watch protocol (ADDED/MODIFIED/DELETED, BOOKMARK, 410 Expired), finalizers,
 * generation, subresources and optimistic concurrency.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { FakeKubeServer } from './server.js';

const G = { group: 'playflow.io', version: 'v1alpha1' };
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const jsonPatchOpt = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);
const strategic = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
const apply = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply);

function errBody(err: unknown): any {
  const e = err as k8s.ApiException<string>;
  return { code: e.code, body: JSON.parse(e.body) };
}

async function expectApiError(p: Promise<unknown>, code: number): Promise<any> {
  try {
    await p;
  } catch (err) {
    const b = errBody(err);
    expect(b.code).toBe(code);
    return b.body;
  }
  throw new Error(`expected HTTP ${code}`);
}

describe('fake Kubernetes API server with the real client-node', () => {
  const server = new FakeKubeServer({ bookmarkIntervalMs: 100 });
  let kc: k8s.KubeConfig;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let apps: k8s.AppsV1Api;
  let coord: k8s.CoordinationV1Api;
  let events: k8s.EventsV1Api;

  beforeAll(async () => {
    await server.start();
    kc = server.kubeConfig('alice');
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
    apps = kc.makeApiClient(k8s.AppsV1Api);
    coord = kc.makeApiClient(k8s.CoordinationV1Api);
    events = kc.makeApiClient(k8s.EventsV1Api);
    // Objects live in namespaces that exist, as on a real server.
    for (const name of ['ns1', 'gen', 'fin', 'core', 'watch']) await core.createNamespace({ body: { metadata: { name } } });
  });
  afterAll(async () => {
    await server.stop();
  });

  it('creates, gets, lists with a collection resourceVersion, and records the caller', async () => {
    const created = await custom.createNamespacedCustomObject({
      ...G, namespace: 'ns1', plural: 'playbooks',
      body: { apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook', metadata: { name: 'a' }, spec: { workflow: [{ step: 'start' }] } },
    });
    expect(created.metadata.generation).toBe(1);
    expect(created.metadata.uid).toBeTruthy();
    expect(created.metadata.namespace).toBe('ns1');
    const got = await custom.getNamespacedCustomObject({ ...G, namespace: 'ns1', plural: 'playbooks', name: 'a' });
    expect(got.spec.workflow[0].step).toBe('start');
    const list = await custom.listNamespacedCustomObject({ ...G, namespace: 'ns1', plural: 'playbooks' });
    expect(list.items).toHaveLength(1);
    expect(list.metadata.resourceVersion).toBe(server.resourceVersion);
    const all = await custom.listClusterCustomObject({ ...G, plural: 'playbooks' });
    expect(all.items.length).toBeGreaterThanOrEqual(1);
    await expectApiError(custom.createNamespacedCustomObject({
      ...G, namespace: 'ns1', plural: 'playbooks', body: { metadata: { name: 'a' }, spec: {} },
    }), 409);
    const nf = await expectApiError(custom.getNamespacedCustomObject({ ...G, namespace: 'ns1', plural: 'playbooks', name: 'zz' }), 404);
    expect(nf).toMatchObject({ kind: 'Status', reason: 'NotFound', code: 404 });
    expect(server.writes('alice').length).toBeGreaterThan(0);
  });

  it('bumps generation on spec changes only; status subresource is separate; 409 on a stale resourceVersion', async () => {
    const ns = 'gen';
    const o = await custom.createNamespacedCustomObject({
      ...G, namespace: ns, plural: 'playbooks', body: { metadata: { name: 'g' }, spec: { path: 'x/y' } },
    });
    // status through the main endpoint is ignored
    const s1 = await custom.patchNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: { status: { catalogVersion: 9 } } }, merge);
    expect(s1.status).toBeUndefined();
    const s2 = await custom.patchNamespacedCustomObjectStatus({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: { status: { catalogVersion: 1 } } }, merge);
    expect(s2.status.catalogVersion).toBe(1);
    expect(s2.metadata.generation).toBe(1);
    const s3 = await custom.patchNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: { metadata: { labels: { a: 'b' } } } }, merge);
    expect(s3.metadata.generation).toBe(1);
    const s4 = await custom.patchNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: [{ op: 'replace', path: '/spec/path', value: 'x/z' }] }, jsonPatchOpt);
    expect(s4.metadata.generation).toBe(2);
    expect(s4.status.catalogVersion).toBe(1);
    // Custom resources take no strategic-merge patches (415), as on a real server.
    const smp = await expectApiError(custom.patchNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: { spec: { extra: true } } }, strategic), 415);
    expect(smp).toMatchObject({ reason: 'UnsupportedMediaType' });
    const s5 = await custom.patchNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: { spec: { extra: true } } }, merge);
    expect(s5.metadata.generation).toBe(3);
    const stale = { ...o, spec: { path: 'stale' } };
    await expectApiError(custom.replaceNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: stale }), 409);
    await expectApiError(custom.patchNamespacedCustomObject({
      ...G, namespace: ns, plural: 'playbooks', name: 'g', body: { metadata: { resourceVersion: o.metadata.resourceVersion }, spec: { path: 'p' } },
    }, merge), 409);
    const fresh = await custom.getNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g' });
    const replaced = await custom.replaceNamespacedCustomObject({ ...G, namespace: ns, plural: 'playbooks', name: 'g', body: { ...fresh, spec: { path: 'new' } } });
    expect(replaced.metadata.generation).toBe(4);
    // server-side apply creates and merges
    const applied = await custom.patchNamespacedCustomObject({
      ...G, namespace: ns, plural: 'playbooks', name: 'ssa',
      body: { apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook', metadata: { name: 'ssa' }, spec: { path: 'ssa' } },
    }, apply);
    expect(applied.spec.path).toBe('ssa');
  });

  it('holds deletion while finalizers remain, deletes when the last one goes', async () => {
    const ns = 'fin';
    await custom.createNamespacedCustomObject({
      ...G, namespace: ns, plural: 'credentials', body: { metadata: { name: 'c', finalizers: ['playflow.io/cleanup'] }, spec: { type: 'basic' } },
    });
    const deleting = await custom.deleteNamespacedCustomObject({ ...G, namespace: ns, plural: 'credentials', name: 'c' });
    expect(deleting.metadata.deletionTimestamp).toBeTruthy();
    const still = await custom.getNamespacedCustomObject({ ...G, namespace: ns, plural: 'credentials', name: 'c' });
    expect(still.metadata.deletionTimestamp).toBeTruthy();
    await expectApiError(custom.patchNamespacedCustomObject({
      ...G, namespace: ns, plural: 'credentials', name: 'c', body: { metadata: { finalizers: ['playflow.io/cleanup', 'other'] } },
    }, merge), 422);
    await custom.patchNamespacedCustomObject({ ...G, namespace: ns, plural: 'credentials', name: 'c', body: { metadata: { finalizers: null } } }, merge);
    await expectApiError(custom.getNamespacedCustomObject({ ...G, namespace: ns, plural: 'credentials', name: 'c' }), 404);
  });

  it('serves core Secrets (stringData folded into data), Events, Leases and StatefulSet /scale', async () => {
    const ns = 'core';
    const sec = await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 's' }, stringData: { password: 'hunter2' } } });
    expect(sec.data?.password).toBe(Buffer.from('hunter2').toString('base64'));
    expect((sec as any).stringData).toBeUndefined();
    const read = await core.readNamespacedSecret({ namespace: ns, name: 's' });
    expect(read.data?.password).toBe(Buffer.from('hunter2').toString('base64'));

    await core.createNamespacedEvent({
      namespace: ns,
      body: { metadata: { name: 'e1' }, involvedObject: { kind: 'WorkerPool', name: 'wp', namespace: ns }, reason: 'ScaledUp', message: 'm', type: 'Normal' },
    });
    await events.createNamespacedEvent({
      namespace: ns, body: { metadata: { name: 'e2' }, eventTime: new k8s.V1MicroTime(), reason: 'ScaledUp', action: 'Scale', reportingController: 'x', reportingInstance: 'y', type: 'Normal' },
    });
    expect((await core.listNamespacedEvent({ namespace: ns })).items.map((e) => e.reason)).toEqual(['ScaledUp']);

    const lease = await coord.createNamespacedLease({ namespace: ns, body: { metadata: { name: 'l' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15 } } });
    await coord.replaceNamespacedLease({ namespace: ns, name: 'l', body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } } });
    await expectApiError(coord.replaceNamespacedLease({ namespace: ns, name: 'l', body: { ...lease, spec: { ...lease.spec, holderIdentity: 'c' } } }), 409);

    await apps.createNamespacedStatefulSet({
      namespace: ns,
      body: {
        metadata: { name: 'workers' },
        spec: { replicas: 1, serviceName: 'w', selector: { matchLabels: { app: 'w' } }, template: { metadata: { labels: { app: 'w' } }, spec: { containers: [{ name: 'w', image: 'w' }] } } },
      },
    });
    const scale = await apps.readNamespacedStatefulSetScale({ namespace: ns, name: 'workers' });
    expect(scale.spec?.replicas).toBe(1);
    const patched = await apps.patchNamespacedStatefulSetScale({ namespace: ns, name: 'workers', body: { spec: { replicas: 4 } } }, merge);
    expect(patched.spec?.replicas).toBe(4);
    await new Promise((r) => setTimeout(r, 10));
    const sts = await apps.readNamespacedStatefulSet({ namespace: ns, name: 'workers' });
    expect(sts.spec?.replicas).toBe(4);
    expect(sts.status?.replicas).toBe(4);
    expect(sts.metadata?.generation).toBe(2);
    const replaced = await apps.replaceNamespacedStatefulSetScale({ namespace: ns, name: 'workers', body: { metadata: { name: 'workers' }, spec: { replicas: 2 } } });
    expect(replaced.spec?.replicas).toBe(2);

    await custom.createNamespacedCustomObject({ ...G, namespace: ns, plural: 'workerpools', body: { metadata: { name: 'wp' }, spec: { replicas: 3 } } });
    const wpScale = await custom.getNamespacedCustomObjectScale({ ...G, namespace: ns, plural: 'workerpools', name: 'wp' });
    expect(wpScale.spec.replicas).toBe(3);
    await custom.patchNamespacedCustomObjectScale({ ...G, namespace: ns, plural: 'workerpools', name: 'wp', body: { spec: { replicas: 5 } } }, merge);
    expect(server.getObject('workerpools', ns, 'wp')!.spec.replicas).toBe(5);
  });

  it('streams watch events, bookmarks, and 410 Expired for a compacted resourceVersion', async () => {
    const ns = 'watch';
    const watch = new k8s.Watch(kc);
    const seen: Array<[string, string]> = [];
    const list = await custom.listNamespacedCustomObject({ ...G, namespace: ns, plural: 'workerpools' });
    let done: ((e: unknown) => void) | undefined;
    const ended = new Promise((r) => { done = r; });
    const ctl = await watch.watch(`/apis/playflow.io/v1alpha1/namespaces/${ns}/workerpools`,
      { resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: true },
      (type, obj) => seen.push([type, obj.metadata?.name ?? '']), (err) => done!(err));
    await custom.createNamespacedCustomObject({ ...G, namespace: ns, plural: 'workerpools', body: { metadata: { name: 'w1' }, spec: {} } });
    await custom.patchNamespacedCustomObject({ ...G, namespace: ns, plural: 'workerpools', name: 'w1', body: { spec: { minReplicas: 1 } } }, merge);
    await custom.deleteNamespacedCustomObject({ ...G, namespace: ns, plural: 'workerpools', name: 'w1' });
    await new Promise((r) => setTimeout(r, 250));
    expect(seen.filter(([t]) => t !== 'BOOKMARK')).toEqual([['ADDED', 'w1'], ['MODIFIED', 'w1'], ['DELETED', 'w1']]);
    expect(seen.some(([t]) => t === 'BOOKMARK')).toBe(true);
    // resuming from an RV inside history replays the events after it
    const replay: string[] = [];
    const ctl2 = await watch.watch(`/apis/playflow.io/v1alpha1/namespaces/${ns}/workerpools`, { resourceVersion: list.metadata.resourceVersion },
      (type) => replay.push(type), () => undefined);
    await new Promise((r) => setTimeout(r, 50));
    expect(replay).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    ctl2.abort();

    server.compact();
    const errors: any[] = [];
    let done3: ((e: unknown) => void) | undefined;
    const ended3 = new Promise((r) => { done3 = r; });
    await watch.watch(`/apis/playflow.io/v1alpha1/namespaces/${ns}/workerpools`, { resourceVersion: list.metadata.resourceVersion },
      (type, obj) => errors.push([type, obj]), (err) => done3!(err));
    await ended3;
    expect(errors[0][0]).toBe('ERROR');
    expect(errors[0][1]).toMatchObject({ code: 410, reason: 'Expired' });

    server.dropWatches();
    await ended;
    ctl.abort();

    // without a resourceVersion: synthetic ADDED for existing objects
    await custom.createNamespacedCustomObject({ ...G, namespace: ns, plural: 'workerpools', body: { metadata: { name: 'w2' }, spec: {} } });
    const initial: string[] = [];
    const ctl4 = await watch.watch(`/apis/playflow.io/v1alpha1/namespaces/${ns}/workerpools`, {}, (t, o) => initial.push(`${t}:${o.metadata.name}`), () => undefined);
    await new Promise((r) => setTimeout(r, 50));
    expect(initial).toEqual(['ADDED:w2']);
    ctl4.abort();

    server.setWatchesEnabled(false);
    let err5: any;
    await watch.watch(`/apis/playflow.io/v1alpha1/namespaces/${ns}/workerpools`, {}, () => undefined, (e) => { err5 = e; });
    expect(err5?.statusCode).toBe(503);
    server.setWatchesEnabled(true);
  });

  it('injects failures on demand', async () => {
    server.failNext((m, p) => m === 'GET' && p.endsWith('/secrets/s'), 500);
    await expectApiError(core.readNamespacedSecret({ namespace: 'core', name: 's' }), 500);
    await core.readNamespacedSecret({ namespace: 'core', name: 's' });
  });
});
