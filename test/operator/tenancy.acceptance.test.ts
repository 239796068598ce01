/**
 * Issue 14 against the REAL Playflow server (PostgreSQL) and the fake API server: ownership of
 * catalog paths and credential names across namespaces and API clients, deletionPolicy, the
 * bounded finalizer, and the kstatus Stalled condition.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { ApiError } from '../../client/http.js';
import { FINALIZER, FORCE_DELETE_ANNOTATION } from '../../operator/types.js';
import { condition, eventsFor, eventually, sleep } from './helpers.js';
import { G, startRealStack, type RealStack } from './real-stack.js';

const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

describe('operator tenancy, deletion policy and GitOps status (real server)', { timeout: 120_000 }, () => {
  let s: RealStack;
  beforeAll(async () => {
    s = await startRealStack(['tenant-a', 'tenant-b', 'tenant-c', 'keep', 'down', 'gitops']);
  });
  afterEach(async () => {
    await s.stopOperators();
  });
  afterAll(async () => {
    await s?.close();
  });

  const create = (plural: string, ns: string, body: any) =>
    s.custom.createNamespacedCustomObject({ ...G, plural, namespace: ns, body: { apiVersion: 'playflow.io/v1alpha1', ...body } });
  const remove = (plural: string, ns: string, name: string) => s.custom.deleteNamespacedCustomObject({ ...G, plural, namespace: ns, name });
  const get = (plural: string, ns: string, name: string) => s.kube.getObject(plural, ns, name);
  const ready = (plural: string, ns: string, name: string) =>
    eventually(() => expect(condition(get(plural, ns, name), 'Ready')?.status).toBe('True'));

  it('two namespaces claiming one path: the first owns it, the second gets Conflict naming the owner — also when its operator cannot see the owner', async () => {
    // Two operators, each watching one namespace (two clusters, or two operator installs): only
    // the server's ownership record can stop the second one.
    await s.operator('op-ten-a', { namespaces: ['tenant-a'] });
    await s.operator('op-ten-b', { namespaces: ['tenant-b'] });
    await create('playbooks', 'tenant-a', { metadata: { name: 'etl' }, spec: { path: 'shared/etl', workflow: [{ step: 'start' }] } });
    await ready('playbooks', 'tenant-a', 'etl');
    const owned = await s.client.getPlaybook('shared/etl');
    expect(owned.owner).toMatchObject({ kind: 'Playbook', namespace: 'tenant-a', name: 'etl', uid: get('playbooks', 'tenant-a', 'etl')!.metadata.uid });

    await create('playbooks', 'tenant-b', {
      metadata: { name: 'etl' }, spec: { path: 'shared/etl', deletionPolicy: 'Delete', workflow: [{ step: 'start', desc: 'b wants it' }] },
    });
    await eventually(() => expect(condition(get('playbooks', 'tenant-b', 'etl'), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' }));
    expect(condition(get('playbooks', 'tenant-b', 'etl'), 'Ready')!.message).toContain('Playbook tenant-a/etl');
    expect(condition(get('playbooks', 'tenant-b', 'etl'), 'Stalled')).toMatchObject({ status: 'True', reason: 'Conflict' });
    await eventually(() => expect(eventsFor(s.kube, 'tenant-b', 'etl').map((e) => e.reason)).toContain('Conflict'));
    expect((await s.client.getPlaybook('shared/etl')).version).toBe(1);

    // the loser is deleted (policy Delete): the owner's entry stays
    await remove('playbooks', 'tenant-b', 'etl');
    await eventually(() => expect(get('playbooks', 'tenant-b', 'etl')).toBeUndefined());
    expect((await s.client.getPlaybook('shared/etl')).content).not.toContain('b wants it');

    // the same namespace, seen by one operator: the cache index answers without the server
    await create('playbooks', 'tenant-a', { metadata: { name: 'etl-copy' }, spec: { path: 'shared/etl', workflow: [{ step: 'start' }] } });
    await eventually(() => expect(condition(get('playbooks', 'tenant-a', 'etl-copy'), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' }));
    expect(condition(get('playbooks', 'tenant-a', 'etl-copy'), 'Ready')!.message).toContain('tenant-a/etl');
  });

  it('a credential created through the API is not overwritten by a resource, nor deleted with it', async () => {
    await s.secrets.putCredential({ name: 'warehouse', type: 'custom', data: { token: 'from-the-api' } });
    await s.operator('op-cred-own');
    await s.core.createNamespacedSecret({ namespace: 'tenant-c', body: { metadata: { name: 'wh' }, stringData: { token: 'from-kubernetes' } } });
    await create('credentials', 'tenant-c', { metadata: { name: 'wh' }, spec: { name: 'warehouse', type: 'custom', deletionPolicy: 'Delete', secretRef: { name: 'wh' } } });
    await eventually(() => expect(condition(get('credentials', 'tenant-c', 'wh'), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' }));
    expect(condition(get('credentials', 'tenant-c', 'wh'), 'Ready')!.message).toContain('an API client');
    expect(condition(get('credentials', 'tenant-c', 'wh'), 'Stalled')?.status).toBe('True');
    expect((await s.secrets.readCredential('warehouse')).data).toEqual({ token: 'from-the-api' });

    await remove('credentials', 'tenant-c', 'wh');
    await eventually(() => expect(get('credentials', 'tenant-c', 'wh')).toBeUndefined());
    expect((await s.secrets.readCredential('warehouse')).data).toEqual({ token: 'from-the-api' });

    // a resource-owned credential: the owner is recorded, an API client cannot overwrite it
    await create('credentials', 'tenant-c', { metadata: { name: 'own' }, spec: { type: 'custom', secretRef: { name: 'wh' } } });
    await ready('credentials', 'tenant-c', 'own');
    expect((await s.secrets.getCredential('own')).owner).toMatchObject({ kind: 'Credential', namespace: 'tenant-c', name: 'own' });
    const err = await s.secrets.putCredential({ name: 'own', type: 'custom', data: { token: 'hijack' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 409, code: 'owned_by_other' });
    expect((await s.secrets.readCredential('own')).data).toEqual({ token: 'from-kubernetes' });
  });

  it('Retain (the default) keeps the catalog entry and the credential; a re-created resource adopts them', async () => {
    await s.operator('op-retain');
    await create('playbooks', 'keep', { metadata: { name: 'report' }, spec: { workflow: [{ step: 'start' }] } });
    await s.core.createNamespacedSecret({ namespace: 'keep', body: { metadata: { name: 'k' }, stringData: { token: 't' } } });
    await create('credentials', 'keep', { metadata: { name: 'kc' }, spec: { type: 'custom', secretRef: { name: 'k' } } });
    await ready('playbooks', 'keep', 'report');
    await ready('credentials', 'keep', 'kc');
    expect(get('playbooks', 'keep', 'report')!.spec.deletionPolicy).toBe('Retain'); // the CRD default

    await remove('playbooks', 'keep', 'report');
    await remove('credentials', 'keep', 'kc');
    await eventually(() => {
      expect(get('playbooks', 'keep', 'report')).toBeUndefined();
      expect(get('credentials', 'keep', 'kc')).toBeUndefined();
    });
    expect((await s.client.getPlaybook('keep/report')).version).toBe(1);
    expect((await s.secrets.readCredential('kc')).data).toEqual({ token: 't' });
    expect(eventsFor(s.kube, 'keep', 'report').map((e) => e.reason)).toContain('Retained');

    await create('playbooks', 'keep', { metadata: { name: 'report' }, spec: { workflow: [{ step: 'start' }] } });
    await ready('playbooks', 'keep', 'report');
    expect(get('playbooks', 'keep', 'report')!.status.catalogVersion).toBe(1);
    expect((await s.client.getPlaybook('keep/report')).owner?.uid).toBe(get('playbooks', 'keep', 'report')!.metadata.uid);
  });

  it('deletion with the server down: held until the finalizer timeout, then released with a Warning; the force annotation releases at once', async () => {
    await s.operator('op-down', { finalizerTimeoutMs: 2000 });
    await create('playbooks', 'down', { metadata: { name: 'p' }, spec: { deletionPolicy: 'Delete', workflow: [{ step: 'start' }] } });
    await ready('playbooks', 'down', 'p');
    s.proxy.down = true;
    await remove('playbooks', 'down', 'p');
    await eventually(() => expect(condition(get('playbooks', 'down', 'p'), 'Ready')).toMatchObject({ status: 'False', reason: 'ServerUnavailable' }));
    expect(get('playbooks', 'down', 'p')!.metadata.finalizers).toContain(FINALIZER); // held while within the timeout
    await eventually(() => expect(get('playbooks', 'down', 'p')).toBeUndefined(), 15_000);
    const warning = eventsFor(s.kube, 'down', 'p').find((e) => e.reason === 'CleanupAbandoned');
    expect(warning?.type).toBe('Warning');
    expect(warning?.message).toContain('down/p');
    s.proxy.down = false;
    expect((await s.client.getPlaybook('down/p')).version).toBe(1); // what could not be removed is still there
    await s.stopOperators();

    // the force annotation: released at once, long before a (here 10 min) timeout
    await s.operator('op-force', { finalizerTimeoutMs: 600_000 });
    await create('playbooks', 'down', { metadata: { name: 'f' }, spec: { deletionPolicy: 'Delete', workflow: [{ step: 'start' }] } });
    await ready('playbooks', 'down', 'f');
    s.proxy.down = true;
    await remove('playbooks', 'down', 'f');
    await eventually(() => expect(condition(get('playbooks', 'down', 'f'), 'Ready')?.reason).toBe('ServerUnavailable'));
    await sleep(300);
    expect(get('playbooks', 'down', 'f')).toBeDefined();
    await s.custom.patchNamespacedCustomObject({ ...G, plural: 'playbooks', namespace: 'down', name: 'f', body: { metadata: { annotations: { [FORCE_DELETE_ANNOTATION]: 'true' } } } }, merge);
    await eventually(() => expect(get('playbooks', 'down', 'f')).toBeUndefined(), 10_000);
    expect(eventsFor(s.kube, 'down', 'f').find((e) => e.reason === 'ForceDeleted')?.type).toBe('Warning');
  });

  it('an invalid Playbook is Stalled (kstatus) until fixed', async () => {
    await s.operator('op-stalled');
    await create('playbooks', 'gitops', { metadata: { name: 'bad' }, spec: { workflow: [{ step: 'start', next: 'nowhere' }] } });
    await eventually(() => expect(condition(get('playbooks', 'gitops', 'bad'), 'Stalled')).toMatchObject({ status: 'True', reason: 'Invalid' }));
    expect(condition(get('playbooks', 'gitops', 'bad'), 'Ready')).toMatchObject({ status: 'False', reason: 'Invalid' });
    const cur = get('playbooks', 'gitops', 'bad')!;
    await s.custom.replaceNamespacedCustomObject({ ...G, plural: 'playbooks', namespace: 'gitops', name: 'bad', body: { ...cur, spec: { workflow: [{ step: 'start' }] } } });
    await ready('playbooks', 'gitops', 'bad');
    expect(condition(get('playbooks', 'gitops', 'bad'), 'Stalled')).toBeUndefined();
  });
});
