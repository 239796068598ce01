/**
 * The Argo CD health check (examples/gitops/argocd-health.lua) run in a real Lua VM (wasmoon: the
 * reference Lua 5.4 C implementation compiled to WebAssembly; the script keeps to Lua 5.1, which
 * Argo CD's gopher-lua runs) on the objects the operator actually writes — against the fake API
 * server and the stub Playflow server — plus the ConfigMap snippet that installs it.
 */
import { readFileSync } from 'node:fs';
import { LuaFactory, type LuaEngine } from 'wasmoon';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeServer, loadCrds, type Obj } from '../fake-k8s/server.js';
import { startOperator, type RunningOperator } from '../../operator/main.js';
import { silentLogger } from '../../operator/log.js';
import { StubPlayflowServer } from './stub-server.js';
import { FaultProxy } from './fault-proxy.js';
import { eventually } from './helpers.js';

const SCRIPT = readFileSync(new URL('../../examples/gitops/argocd-health.lua', import.meta.url), 'utf8');

describe('Argo CD health check', { timeout: 60_000 }, () => {
  const kube = new FakeKubeServer({ bookmarkIntervalMs: 200, crds: loadCrds(), namespaces: ['argo'] });
  const stub = new StubPlayflowServer();
  let proxy: FaultProxy;
  let op: RunningOperator;
  const factory = new LuaFactory();

  /** A fresh VM per call, as Argo CD runs the script per object; the object as plain JSON data. */
  async function health(obj: Obj | undefined): Promise<{ status: string; message: string }> {
    const lua: LuaEngine = await factory.createEngine();
    try {
      lua.global.set('obj', JSON.parse(JSON.stringify(obj ?? {})));
      return { ...(await lua.doString(SCRIPT)) } as { status: string; message: string };
    } finally {
      lua.global.close();
    }
  }

  beforeAll(async () => {
    await kube.start();
    await stub.start();
    proxy = new FaultProxy(stub.url);
    await proxy.start();
    op = await startOperator({
      kubeConfig: kube.kubeConfig('op-argo'), serverUrl: proxy.url, identity: 'op-argo', leaderElection: { enabled: false },
      resyncMs: 0, baseBackoffMs: 50, maxBackoffMs: 300, informerBackoffMs: 50, log: silentLogger,
    });
  });
  afterAll(async () => {
    await op?.stop();
    await proxy.stop();
    await stub.stop();
    await kube.stop();
  });

  it('argocd-cm.yaml installs exactly argocd-health.lua for Playbook, Credential and WorkerPool', () => {
    const cm = parse(readFileSync(new URL('../../examples/gitops/argocd-cm.yaml', import.meta.url), 'utf8'));
    for (const kind of ['Playbook', 'Credential', 'WorkerPool']) {
      expect(cm.data[`resource.customizations.health.playflow.io_${kind}`], kind).toBe(SCRIPT);
    }
  });

  it('maps the operator\'s status to Healthy / Progressing / Degraded', async () => {
    const get = (plural: string, name: string) => kube.getObject(plural, 'argo', name);
    // no status yet
    expect(await health({ metadata: { name: 'x', generation: 1 } })).toMatchObject({ status: 'Progressing' });

    kube.putObject('playbooks', { metadata: { name: 'good', namespace: 'argo' }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(async () => expect(await health(get('playbooks', 'good'))).toMatchObject({ status: 'Healthy', message: expect.stringContaining('version 1') }));

    // a new generation the operator has not seen yet is Progressing, whatever Ready says
    const good = get('playbooks', 'good')!;
    expect(await health({ ...good, metadata: { ...good.metadata, generation: good.metadata.generation + 1 } }))
      .toMatchObject({ status: 'Progressing', message: expect.stringContaining('generation') });
    expect(await health({ ...good, metadata: { ...good.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } })).toMatchObject({ status: 'Progressing' });

    kube.putObject('playbooks', { metadata: { name: 'invalid', namespace: 'argo' }, spec: { workflow: [{ step: 'start', next: 'nowhere' }] } });
    await eventually(async () => expect(await health(get('playbooks', 'invalid'))).toMatchObject({ status: 'Degraded', message: expect.stringContaining('Invalid') }));

    kube.putObject('playbooks', { metadata: { name: 'rival', namespace: 'argo' }, spec: { path: 'argo/good', workflow: [{ step: 'start' }] } });
    await eventually(async () => expect(await health(get('playbooks', 'rival'))).toMatchObject({ status: 'Degraded', message: expect.stringContaining('argo/good') }));

    // waiting for a Secret is progress, not failure (it may be applied in a later sync wave)
    kube.putObject('credentials', { metadata: { name: 'later', namespace: 'argo' }, spec: { type: 'custom', secretRef: { name: 'later' } } });
    await eventually(async () => expect(await health(get('credentials', 'later'))).toMatchObject({ status: 'Progressing', message: expect.stringContaining('SecretNotFound') }));
    kube.putObject('secrets', { metadata: { name: 'later', namespace: 'argo' }, stringData: { token: 't' } }, '');
    await eventually(async () => expect(await health(get('credentials', 'later'))).toMatchObject({ status: 'Healthy' }));

    // the server down: Progressing with the reason, not Degraded
    proxy.down = true;
    kube.putObject('playbooks', { metadata: { name: 'waiting', namespace: 'argo' }, spec: { workflow: [{ step: 'start' }] } });
    await eventually(async () => expect(await health(get('playbooks', 'waiting'))).toMatchObject({ status: 'Progressing', message: expect.stringContaining('ServerUnavailable') }));
    proxy.down = false;
    await eventually(async () => expect(await health(get('playbooks', 'waiting'))).toMatchObject({ status: 'Healthy' }));
  });
});
