/**
 * The informer against the fake API server: initial list, watch events, resume after a clean
 * close without relisting, relist on 410 (as an ERROR event), backoff on other ERROR events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { FakeKubeServer } from '../fake-k8s/server.js';
import { Informer } from '../../operator/informer.js';
import { silentLogger } from '../../operator/log.js';
import { eventually } from './helpers.js';

describe('Informer', () => {
  const kube = new FakeKubeServer({ bookmarkIntervalMs: 100 });
  beforeAll(async () => {
    await kube.start();
  });
  afterAll(async () => {
    await kube.stop();
  });

  it('lists, watches, resumes after a close, relists on 410 and backs off on errors', async () => {
    const kc = kube.kubeConfig('informer');
    const core = kc.makeApiClient(k8s.CoreV1Api);
    kube.putObject('configmaps', { metadata: { name: 'a', namespace: 'inf' }, data: { v: '1' } }, '');
    const seen: string[] = [];
    const inf = new Informer<k8s.V1ConfigMap>({
      name: 'cm', path: '/api/v1/namespaces/inf/configmaps', watch: new k8s.Watch(kc), log: silentLogger,
      list: () => core.listNamespacedConfigMap({ namespace: 'inf' }), minBackoffMs: 300, maxBackoffMs: 300,
    });
    inf.on('add', (o) => seen.push(`add:${o.metadata?.name}`));
    inf.on('update', (o) => seen.push(`update:${o.metadata?.name}:${o.data?.v}`));
    inf.on('delete', (o) => seen.push(`delete:${o.metadata?.name}`));
    inf.start();
    await inf.waitForSync();
    expect(seen).toEqual(['add:a']);
    await eventually(() => expect(kube.openWatches).toBe(1));

    kube.putObject('configmaps', { metadata: { name: 'a', namespace: 'inf' }, data: { v: '2' } }, '');
    kube.putObject('configmaps', { metadata: { name: 'b', namespace: 'inf' }, data: { v: '1' } }, '');
    await eventually(() => expect(seen).toEqual(['add:a', 'update:a:2', 'add:b']));

    // clean close (server timeout, dropped connection): resume from the last RV, no relist
    await new Promise((r) => setTimeout(r, 250)); // a bookmark or two
    kube.dropWatches();
    await eventually(() => expect(kube.openWatches).toBe(1));
    expect(inf.relists).toBe(1);
    const watchCalls = kube.requests.filter((r) => r.token === 'informer' && r.query.includes('watch=true'));
    expect(watchCalls.at(-1)!.query).toMatch(/resourceVersion=\d+/);
    expect(watchCalls.at(-1)!.query).toContain('allowWatchBookmarks=true');

    // 410 as an ERROR event: relist; an object deleted meanwhile is reported as deleted
    kube.setWatchesEnabled(false);
    await core.deleteNamespacedConfigMap({ namespace: 'inf', name: 'b' });
    kube.compact();
    kube.setWatchesEnabled(true);
    await eventually(() => expect(seen).toContain('delete:b'), 20_000);
    expect(inf.relists).toBeGreaterThanOrEqual(2);
    expect(inf.list().map((o) => o.metadata?.name)).toEqual(['a']);

    // another ERROR: back off (no reconnect storm), then resume
    await eventually(() => expect(kube.openWatches).toBe(1));
    const before = kube.requests.length;
    const t0 = Date.now();
    kube.failWatches(500);
    await eventually(() => expect(kube.openWatches).toBe(1));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    expect(kube.requests.length - before).toBeLessThanOrEqual(2);
    kube.putObject('configmaps', { metadata: { name: 'a', namespace: 'inf' }, data: { v: '3' } }, '');
    await eventually(() => expect(seen).toContain('update:a:3'));
    await inf.stop();
    await eventually(() => expect(kube.openWatches).toBe(0));
  });
});
