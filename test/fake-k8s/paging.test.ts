/**
 * Paginated lists (`limit` / `continue`) of the fake API server through the real client-node:
 * consistent snapshots across pages, the real token's format and errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { FakeKubeServer } from './server.js';
import { encodeContinue } from './paging.js';

const G = { group: 'playflow.io', version: 'v1alpha1', plural: 'playbooks' };

async function apiError(p: Promise<unknown>): Promise<{ code: number; body: any }> {
  try {
    await p;
  } catch (err) {
    const e = err as k8s.ApiException<string>;
    return { code: e.code, body: JSON.parse(e.body) };
  }
  throw new Error('expected an error');
}

describe('fake API server: paginated lists', () => {
  const server = new FakeKubeServer({ namespaces: ['pa', 'pb'] });
  let custom: k8s.CustomObjectsApi;

  const put = (ns: string, name: string, extra: object = {}) => server.putObject('playbooks', {
    apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook', metadata: { name, namespace: ns }, spec: { workflow: [{ step: 'start' }], ...extra },
  });

  beforeAll(async () => {
    await server.start();
    custom = server.kubeConfig('alice').makeApiClient(k8s.CustomObjectsApi);
    for (const n of ['c', 'a', 'b', 'd']) put('pa', n);
    for (const n of ['y', 'x', 'z']) put('pb', n);
  });
  afterAll(async () => {
    await server.stop();
  });

  it('pages a list by key, all pages at the first page\'s resourceVersion, ignoring later writes', async () => {
    const first = await custom.listClusterCustomObject({ ...G, limit: 3 });
    const keys = (l: any) => l.items.map((o: any) => `${o.metadata.namespace}/${o.metadata.name}`);
    expect(keys(first)).toEqual(['pa/a', 'pa/b', 'pa/c']);
    expect(first.metadata.remainingItemCount).toBe(4);
    expect(typeof first.metadata.continue).toBe('string');
    const token = JSON.parse(Buffer.from(first.metadata.continue, 'base64url').toString());
    expect(token).toEqual({ v: 'meta.k8s.io/v1', rv: Number(first.metadata.resourceVersion), start: 'pa/c\u0000' });

    // Written after the first page: neither the new object nor the change shows up in this list.
    put('pa', 'cc');
    put('pb', 'x', { description: 'changed' });
    put('pa', 'd', { description: 'changed too' });

    const second = await custom.listClusterCustomObject({ ...G, limit: 3, _continue: first.metadata.continue });
    expect(keys(second)).toEqual(['pa/d', 'pb/x', 'pb/y']);
    expect(second.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
    expect(second.items.map((o: any) => o.spec.description)).toEqual([undefined, undefined, undefined]);
    expect(second.metadata.remainingItemCount).toBe(1);
    const last = await custom.listClusterCustomObject({ ...G, limit: 3, _continue: second.metadata.continue });
    expect(keys(last)).toEqual(['pb/z']);
    expect(last.metadata.continue).toBeUndefined();
    expect(last.metadata.remainingItemCount).toBeUndefined();

    // A new list sees the current state; without limit, everything in one page.
    const all = await custom.listClusterCustomObject({ ...G });
    expect(keys(all)).toEqual(['pa/a', 'pa/b', 'pa/c', 'pa/cc', 'pa/d', 'pb/x', 'pb/y', 'pb/z']);
    expect(all.metadata.continue).toBeUndefined();
    expect(Number(all.metadata.resourceVersion)).toBeGreaterThan(Number(first.metadata.resourceVersion));
  });

  it('pages within a namespace, and with a selector gives no remainingItemCount', async () => {
    const p1 = await custom.listNamespacedCustomObject({ ...G, namespace: 'pb', limit: 2 });
    expect(p1.items.map((o: any) => o.metadata.name)).toEqual(['x', 'y']);
    expect(p1.metadata.remainingItemCount).toBe(1);
    const p2 = await custom.listNamespacedCustomObject({ ...G, namespace: 'pb', limit: 2, _continue: p1.metadata.continue });
    expect(p2.items.map((o: any) => o.metadata.name)).toEqual(['z']);
    expect(p2.metadata.continue).toBeUndefined();

    const s1 = await custom.listClusterCustomObject({ ...G, limit: 1, fieldSelector: 'metadata.namespace=pb' });
    expect(s1.items.map((o: any) => o.metadata.name)).toEqual(['x']);
    expect(s1.metadata.continue).toBeDefined();
    expect(s1.metadata.remainingItemCount).toBeUndefined();
  });

  it('refuses a bad token and resourceVersion with continue (400), and an expired token (410)', async () => {
    const bad = await apiError(custom.listClusterCustomObject({ ...G, limit: 2, _continue: 'not-a-token' }));
    expect(bad.code).toBe(400);
    expect(bad.body.message).toMatch(/^continue key is not valid/);

    const first = await custom.listClusterCustomObject({ ...G, limit: 2 });
    const withRv = await apiError(custom.listClusterCustomObject({ ...G, limit: 2, _continue: first.metadata.continue, resourceVersion: '5' }));
    expect(withRv.code).toBe(400);
    expect(withRv.body.message).toBe('specifying resource version is not allowed when using continue');

    // A well-formed token of a resourceVersion never listed has no snapshot: expired.
    const unknown = await apiError(custom.listClusterCustomObject({ ...G, limit: 2, _continue: encodeContinue(1, 'pa/a') }));
    expect(unknown.code).toBe(410);

    server.compact();
    const expired = await apiError(custom.listClusterCustomObject({ ...G, limit: 2, _continue: first.metadata.continue }));
    expect(expired.code).toBe(410);
    expect(expired.body.reason).toBe('Expired');
    expect(expired.body.message).toMatch(/continue parameter is too old/);
  });
});
