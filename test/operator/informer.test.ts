/**
 * The informer against the fake API server: initial list, watch events, resume after a clean
 * close without relisting, relist on 410 (as an ERROR event), backoff on other ERROR events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { FakeKubeServer } from '../fake-k8s/server.js';
import { Informer, stripForCache } from '../../operator/informer.js';
import { silentLogger } from '../../operator/log.js';
import { eventually } from './helpers.js';

describe('Informer', () => {
  const kube = new FakeKubeServer({ bookmarkIntervalMs: 100, namespaces: ['inf'] });
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

  it('lists page by page, and starts a new list when a continue token expires mid-list', async () => {
    kube.createNamespace('pg');
    const kc = kube.kubeConfig('informer-pages');
    const core = kc.makeApiClient(k8s.CoreV1Api);
    for (const n of ['p1', 'p2', 'p3', 'p4', 'p5']) kube.putObject('configmaps', { metadata: { name: n, namespace: 'pg' }, data: { v: n } }, '');
    let compactAfterFirstPage = true;
    const pages: Array<{ limit?: number; continue?: string; items: number }> = [];
    const inf = new Informer<k8s.V1ConfigMap>({
      name: 'cm-pages', path: '/api/v1/namespaces/pg/configmaps', watch: new k8s.Watch(kc), log: silentLogger,
      pageSize: 2, minBackoffMs: 50, maxBackoffMs: 50,
      list: async (p) => {
        const l = await core.listNamespacedConfigMap({ namespace: 'pg', limit: p.limit, _continue: p.continue });
        pages.push({ ...p, items: l.items.length });
        if (compactAfterFirstPage && !p.continue) {
          compactAfterFirstPage = false;
          kube.compact(); // the token just handed out expires: the next page is 410
        }
        return l;
      },
    });
    const added: string[] = [];
    inf.on('add', (o) => added.push(o.metadata!.name!));
    inf.start();
    await inf.waitForSync();
    expect(inf.list().map((o) => o.metadata?.name).sort()).toEqual(['p1', 'p2', 'p3', 'p4', 'p5']);
    expect(added.sort()).toEqual(['p1', 'p2', 'p3', 'p4', 'p5']); // the pages before the 410 are not delivered twice
    expect(inf.relists).toBe(1); // one complete list
    // first list: page 1, then the expired token; second list: three pages of at most 2
    expect(pages.map((p) => [p.continue ? 'continue' : 'first', p.items])).toEqual([['first', 2], ['first', 2], ['continue', 2], ['continue', 1]]);
    expect(pages.every((p) => p.limit === 2)).toBe(true);
    const lists = kube.requests.filter((r) => r.token === 'informer-pages' && !r.query.includes('watch=true'));
    expect(lists.filter((r) => r.status === 410)).toHaveLength(1);
    await inf.stop();
  });

  it('caches objects without managedFields and the last-applied annotation (stripForCache)', async () => {
    kube.createNamespace('strip');
    const kc = kube.kubeConfig('informer-strip');
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const cm = (v: string) => ({
      metadata: {
        name: 'big', namespace: 'strip',
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({ data: { v } }), team: 'a' },
        managedFields: [{ manager: 'kubectl', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:v': {} } } }],
      },
      data: { v },
    });
    kube.putObject('configmaps', cm('1'), '');
    const inf = new Informer<k8s.V1ConfigMap>({
      name: 'cm-strip', path: '/api/v1/namespaces/strip/configmaps', watch: new k8s.Watch(kc), log: silentLogger,
      list: (p) => core.listNamespacedConfigMap({ namespace: 'strip', limit: p.limit, _continue: p.continue }), transform: stripForCache,
    });
    inf.start();
    await inf.waitForSync();
    expect(kube.getObject('configmaps', 'strip', 'big', '')!.metadata.managedFields).toHaveLength(1); // the server keeps them
    const listed = inf.get('strip', 'big')!;
    expect(listed.metadata).not.toHaveProperty('managedFields');
    expect(listed.metadata!.annotations).toEqual({ team: 'a' });
    await eventually(() => expect(kube.openWatches).toBeGreaterThan(0));
    kube.putObject('configmaps', cm('2'), '');
    await eventually(() => expect(inf.get('strip', 'big')?.data?.v).toBe('2'));
    expect(inf.get('strip', 'big')!.metadata).not.toHaveProperty('managedFields');
    expect(inf.get('strip', 'big')!.metadata!.annotations).toEqual({ team: 'a' });
    await inf.stop();
  });
});
