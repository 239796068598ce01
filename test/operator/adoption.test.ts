/**
 * Upgrade adoption (issue 14): catalog entries and credentials stored by an operator from before
 * ownership have no owner. The Playbook or Credential whose status says it wrote them claims them
 * (no Conflict, no new version when nothing changed); what an API client wrote — or changed since —
 * stays protected. Fake API server + stub Playflow server (which follows the server's adoption
 * rules: server/store/catalog-service.ts, server/store/credentials.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeServer, loadCrds, type Obj } from '../fake-k8s/server.js';
import { startOperator, type RunningOperator } from '../../operator/main.js';
import { silentLogger } from '../../operator/log.js';
import { FINALIZER } from '../../operator/types.js';
import { catalogPathOf, playbookYaml, specHash } from '../../operator/controllers/playbook.js';
import { StubPlayflowServer } from './stub-server.js';
import { condition, eventually } from './helpers.js';

const NS = 'adopt';
const T0 = '2026-01-01T00:00:00Z';
const ready = (reason: string, message = '') => ({ type: 'Ready', status: 'True', reason, message, lastTransitionTime: T0, observedGeneration: 1 });

describe('upgrade adoption of what an operator from before ownership stored', { timeout: 120_000 }, () => {
  const kube = new FakeKubeServer({ bookmarkIntervalMs: 200, crds: loadCrds(), namespaces: [NS] });
  const stub = new StubPlayflowServer();
  let op: RunningOperator | undefined;

  beforeAll(async () => {
    await kube.start();
    await stub.start();
  });
  afterEach(async () => {
    await op?.stop();
    op = undefined;
  });
  afterAll(async () => {
    await stub.stop();
    await kube.stop();
  });

  /** A Playbook as the old operator left it: finalizer, Ready, status naming the version it registered. */
  function oldPlaybook(name: string, workflow: object[], version: number, opts: { inSync?: boolean } = {}): Obj {
    kube.putObject('playbooks', { metadata: { name, namespace: NS, finalizers: [FINALIZER] }, spec: { workflow } });
    const obj = kube.getObject('playbooks', NS, name)!; // as served: CRD defaults applied
    const path = catalogPathOf(obj as never);
    const hash = opts.inSync === false ? 'stale' : specHash(path, playbookYaml(obj as never));
    kube.putObject('playbooks', {
      ...obj,
      status: {
        observedGeneration: 1, catalogPath: path, catalogVersion: version, catalogId: String(version), specHash: hash,
        lastRegisteredTime: T0, conditions: [ready('Registered', `registered as ${path} version ${version}`)],
      },
    });
    return kube.getObject('playbooks', NS, name)!;
  }

  function oldEntry(path: string, contents: string[]): void {
    stub.catalog.set(path, contents.map((content, i) => ({ path, version: i + 1, content })));
  }

  it('a Playbook adopts the ownerless entry at the version it registered; a path changed or written by an API client stays protected', async () => {
    // 1. In sync (same spec, same document): adopted by the drift sweep, no new version.
    const inSync = oldPlaybook('in-sync', [{ step: 'start' }], 1);
    oldEntry('adopt/in-sync', [playbookYaml(inSync as never)]);
    // 2. Spec changed since the old operator registered version 2: the new version is registered and owned.
    const changed = oldPlaybook('changed', [{ step: 'start', desc: 'new' }], 2, { inSync: false });
    oldEntry('adopt/changed', ['old: 1', playbookYaml({ ...changed, spec: { workflow: [{ step: 'start', desc: 'old' }] } } as never)]);
    // 3. An API client registered version 3 after the operator's version 2: not the resource's any more.
    oldPlaybook('overwritten', [{ step: 'start' }], 2);
    oldEntry('adopt/overwritten', ['v: 1', 'v: 2', 'by: api client']);
    // 4. A new resource claiming a path an API client created: never adopted.
    kube.putObject('playbooks', { metadata: { name: 'api-path', namespace: NS }, spec: { workflow: [{ step: 'start' }] } });
    oldEntry('adopt/api-path', ['by: api client']);

    op = await startOperator({
      kubeConfig: kube.kubeConfig('op-adopt'), serverUrl: stub.url, identity: 'op-adopt', leaderElection: { enabled: false },
      resyncMs: 0, verifyIntervalMs: 200, baseBackoffMs: 50, maxBackoffMs: 500, informerBackoffMs: 50, log: silentLogger,
    });
    const owner = (name: string) => ({ kind: 'Playbook', namespace: NS, name });
    await eventually(() => {
      expect(stub.catalog.get('adopt/in-sync')!.at(-1)!.owner).toMatchObject(owner('in-sync'));
      expect(stub.catalog.get('adopt/changed')!.at(-1)!.owner).toMatchObject(owner('changed'));
      expect(condition(kube.getObject('playbooks', NS, 'overwritten'), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' });
      expect(condition(kube.getObject('playbooks', NS, 'api-path'), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' });
    }, 30_000);
    expect(stub.catalog.get('adopt/in-sync')).toHaveLength(1); // claimed, not re-registered
    expect(kube.getObject('playbooks', NS, 'in-sync')!.status).toMatchObject({ catalogVersion: 1 });
    expect(condition(kube.getObject('playbooks', NS, 'in-sync'), 'Ready')?.status).toBe('True');
    await eventually(() => expect(kube.getObject('playbooks', NS, 'changed')!.status).toMatchObject({ catalogVersion: 3 }));
    expect(condition(kube.getObject('playbooks', NS, 'changed'), 'Ready')?.status).toBe('True');
    // protected: nothing written, no owner recorded
    expect(stub.catalog.get('adopt/overwritten')!.map((e) => [e.content, e.owner])).toEqual([['v: 1', undefined], ['v: 2', undefined], ['by: api client', undefined]]);
    expect(condition(kube.getObject('playbooks', NS, 'overwritten'), 'Ready')!.message).toContain('an API client');
    expect(stub.catalog.get('adopt/api-path')!.map((e) => [e.content, e.owner])).toEqual([['by: api client', undefined]]);
  });

  it('a Credential adopts the ownerless credential it stored; one created or rewritten through the API stays protected', async () => {
    kube.putObject('secrets', { metadata: { name: 's', namespace: NS }, stringData: { token: 'from-k8s' } }, '');
    const secretRv = kube.getObject('secrets', NS, 's', '')!.metadata.resourceVersion;
    const oldCredential = (name: string, credentialName: string) => {
      kube.putObject('credentials', { metadata: { name, namespace: NS, finalizers: [FINALIZER] }, spec: { name: credentialName, type: 'bearer', secretRef: { name: 's' } } });
      const obj = kube.getObject('credentials', NS, name)!;
      kube.putObject('credentials', {
        ...obj,
        status: {
          observedGeneration: 1, credentialName, secretResourceVersion: secretRv, lastSyncTime: T0,
          conditions: [ready('Synced', `stored as credential ${credentialName} from Secret s`)],
        },
      });
    };
    // what the old operator stored (its meta names the resource), and what API clients stored
    const k8sMeta = (resource: string) => ({ source: 'kubernetes', namespace: NS, resource, secret: 's' });
    stub.credentials.set('old-cred', { name: 'old-cred', type: 'bearer', data: { token: 'from-k8s' }, meta: k8sMeta('old') });
    oldCredential('old', 'old-cred');
    stub.credentials.set('rewritten', { name: 'rewritten', type: 'bearer', data: { token: 'by-api' }, meta: { source: 'cli' } });
    oldCredential('stale', 'rewritten');
    stub.credentials.set('api-cred', { name: 'api-cred', type: 'bearer', data: { token: 'by-api' }, meta: {} });
    kube.putObject('credentials', { metadata: { name: 'newcomer', namespace: NS }, spec: { name: 'api-cred', type: 'bearer', secretRef: { name: 's' } } });
    // meta naming another resource: not this one's to adopt
    stub.credentials.set('someone-elses', { name: 'someone-elses', type: 'bearer', data: { token: 'theirs' }, meta: k8sMeta('other') });
    oldCredential('claimant', 'someone-elses');

    op = await startOperator({
      kubeConfig: kube.kubeConfig('op-adopt-cred'), serverUrl: stub.url, identity: 'op-adopt-cred', leaderElection: { enabled: false },
      resyncMs: 200, verifyIntervalMs: 200, baseBackoffMs: 50, maxBackoffMs: 500, informerBackoffMs: 50, log: silentLogger,
    });
    await eventually(() => {
      expect(stub.credentials.get('old-cred').owner).toMatchObject({ kind: 'Credential', namespace: NS, name: 'old' });
      for (const name of ['stale', 'newcomer', 'claimant']) {
        expect(condition(kube.getObject('credentials', NS, name), 'Ready')).toMatchObject({ status: 'False', reason: 'Conflict' });
      }
    }, 30_000);
    expect(condition(kube.getObject('credentials', NS, 'old'), 'Ready')?.status).toBe('True');
    expect(stub.credentials.get('old-cred').data).toEqual({ token: 'from-k8s' });
    for (const [name, token] of [['rewritten', 'by-api'], ['api-cred', 'by-api'], ['someone-elses', 'theirs']]) {
      expect(stub.credentials.get(name!)).toMatchObject({ data: { token } });
      expect(stub.credentials.get(name!).owner).toBeUndefined();
    }
  });
});
