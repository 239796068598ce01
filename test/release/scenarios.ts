/**
 * What a platform engineer does after `helm install`, against a release brought up by
 * release.ts: kubectl on the examples, the playbook through the API and the CLI, the printer
 * columns, scaling, `helm test`, and the checks that RBAC never denied the operator and that a
 * re-render (Argo CD) or upgrade changes neither a generated secret nor the worker count.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { PlayflowClient } from '../../client/http.js';
import { kubectl } from '../helpers/kubectl.js';
import { CLI, mountVolumes, remount, resolveEnv } from './kubelet.js';
import { installManifests, RELEASE, runJob, type Release } from './release.js';
import { isHook, podSpecOf, render, ROOT } from './render.js';

const run = promisify(execFile);
export const EXAMPLES = path.join(ROOT, 'examples', 'k8s');
/** What examples/k8s/playbook.yaml computes (its header says so too). */
export const EXPECTED_RESULT = { hot_cities: ['Paris', 'Madrid'], checked: 3 };

export const k = (rel: Release, args: string[], input?: string) => kubectl(args, { kubeconfig: rel.adminKubeconfig, input });

/** kubectl apply -f examples/k8s/ into the release's namespace, then wait for Ready. */
export async function applyExamples(rel: Release): Promise<void> {
  const ns = rel.namespace;
  // The Credential's Secret and the Playbook; the WorkerPool example scales a second worker
  // StatefulSet (pool gpu) that the chart does not render: the chart's own pool is scaled below.
  for (const file of ['credential.yaml', 'playbook.yaml']) {
    await k(rel, ['-n', ns, 'apply', '-f', path.join(EXAMPLES, file)]);
  }
  await k(rel, ['-n', ns, 'wait', '--for=condition=Ready', 'playbook/weather-report', '--timeout=90s']);
  await k(rel, ['-n', ns, 'wait', '--for=condition=Ready', 'credential/analytics-db', '--timeout=90s']);
}

export async function runThroughApi(rel: Release): Promise<void> {
  const client = new PlayflowClient({ baseUrl: rel.serverUrl, token: rel.apiToken });
  const catalogPath = (await k(rel, ['-n', rel.namespace, 'get', 'playbook/weather-report', '-o', 'jsonpath={.status.catalogPath}'])).trim();
  expect(catalogPath).toBe('examples/weather-report');
  const started = await client.run({ path: catalogPath, payload: {} });
  const done = await client.waitForExecution(started.execution_id, { timeoutMs: 60_000 });
  expect(done.status, JSON.stringify(done)).toBe('completed');
  expect((done as any).result).toEqual(EXPECTED_RESULT);
}

export async function runThroughCli(rel: Release): Promise<void> {
  const env = { PATH: process.env.PATH ?? '', SERVER_API_URL: rel.serverUrl, ...(rel.apiToken ? { PLAYFLOW_API_TOKEN: rel.apiToken } : {}) };
  const { stdout } = await run(process.execPath, [CLI, 'run', 'playbook', 'examples/weather-report', '--payload', '{}', '--wait', '--output', 'json'], { env });
  const out = JSON.parse(stdout);
  expect(out.status, stdout).toBe('completed');
  expect(out.result).toEqual(EXPECTED_RESULT);
}

/** `kubectl get playbooks` prints the CRD's additionalPrinterColumns (from the rendered CRD). */
export async function printerColumns(rel: Release): Promise<void> {
  const crd = rel.docs.find((d) => d.kind === 'CustomResourceDefinition' && d.metadata.name === 'playbooks.playflow.io')!;
  const columns = crd.spec.versions[0].additionalPrinterColumns.filter((c: any) => !c.priority).map((c: any) => c.name.toUpperCase());
  const out = await k(rel, ['-n', rel.namespace, 'get', 'playbooks']);
  const [header, row] = out.trim().split('\n');
  expect(header.split(/\s{2,}/)).toEqual(['NAME', ...columns]);
  expect(row).toMatch(/^weather-report\s+True\s/);
  const yaml = await k(rel, ['-n', rel.namespace, 'get', 'playbook', 'weather-report', '-o', 'yaml']);
  expect(yaml).toContain('catalogPath: examples/weather-report');
}

const workerReplicas = (rel: Release) => rel.kube.getObject('statefulsets', rel.namespace, `${RELEASE}-worker`, 'apps')?.spec?.replicas;

async function until(what: string, fn: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * `kubectl scale` on the chart's WorkerPool pins the worker count, which the operator writes to
 * the StatefulSet's scale subresource; a `helm upgrade` render re-applied with kubectl keeps it.
 */
export async function scaleAndUpgrade(rel: Release, args: string[]): Promise<void> {
  const pool = `${RELEASE}-workers`;
  await k(rel, ['-n', rel.namespace, 'scale', `workerpool/${pool}`, '--replicas=3']);
  await until('the operator to scale the worker StatefulSet to 3', () => workerReplicas(rel) === 3);
  await until('WorkerPool status', async () => (await k(rel, ['-n', rel.namespace, 'get', `workerpool/${pool}`, '-o', 'jsonpath={.status.replicas}'])).trim() === '3');

  // helm upgrade: a fresh render (--is-upgrade), its hook Job, then its manifests applied.
  const upgraded = render(RELEASE, rel.namespace, ['--is-upgrade', ...args]);
  const secretsBefore = generatedSecrets(rel);
  for (const job of upgraded.filter((d) => d.kind === 'Job' && isHook(d, 'pre-upgrade'))) await runJob(rel, job);
  const sts = upgraded.find((d) => d.kind === 'StatefulSet' && d.metadata.name === `${RELEASE}-worker`)!;
  expect(sts.spec.replicas, 'the upgrade render sets no worker replicas').toBeUndefined();
  await k(rel, ['-n', rel.namespace, 'apply', '--server-side', '--force-conflicts', '-f', '-'], JSON.stringify(sts));
  installManifests(rel.kube, upgraded.filter((d) => d.kind === 'Secret' || d.kind === 'ConfigMap'), rel.namespace);
  expect(workerReplicas(rel), 'worker replicas after the upgrade').toBe(3);
  expect(generatedSecrets(rel), 'generated secrets after the upgrade').toEqual(secretsBefore);
}

/** The Secrets the ensure-secrets Job generated, by name (data, base64). */
export function generatedSecrets(rel: Release): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of rel.kube.listObjects('secrets', rel.namespace)) {
    if (s.metadata.labels?.['app.kubernetes.io/created-by'] === 'playflow-ensure-secrets') out[s.metadata.name] = s.data;
  }
  expect(Object.keys(out).length).toBeGreaterThan(0);
  return out;
}

/**
 * The `helm test` hook Pod: its command through /bin/sh with its env, `playflow` on the PATH as
 * the image's /usr/local/bin/playflow, and its ConfigMap volume at a temporary path (REWRITTEN in
 * the command: /playbooks cannot be created on a shared machine).
 */
export async function helmTest(rel: Release): Promise<string> {
  const pod = rel.docs.find((d) => d.kind === 'Pod' && isHook(d, 'test'))!;
  const cm = rel.docs.find((d) => d.kind === 'ConfigMap' && isHook(d, 'test'))!;
  rel.kube.putObject('configmaps', { ...cm, metadata: { ...cm.metadata, namespace: rel.namespace } });
  const spec = podSpecOf(pod);
  const c = spec.containers[0];
  const ctx = { kube: rel.kube, namespace: rel.namespace, podName: pod.metadata.name };
  let env = resolveEnv(c, ctx, 'helm test');
  for (const [key, v] of Object.entries(env)) env[key] = rel.services.rewrite(v, `helm test env ${key}`);
  const bin = path.join(rel.base, 'bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(path.join(bin, 'playflow'), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`, { mode: 0o755 });
  const mounts = mountVolumes(spec, c, ctx, rel.base);
  env = { ...env, PATH: `${bin}:${process.env.PATH ?? ''}` };
  const [file, ...args] = [...c.command, ...c.args].map((a: string) => remount(a, mounts));
  try {
    const { stdout } = await run(file, args, { env });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`helm test pod failed:\n${e.stdout ?? ''}\n${e.stderr ?? ''}`, { cause: err });
  }
}

/** Requests of the operator's ServiceAccount that the rendered RBAC refused. */
export function operatorDenials(rel: Release): string[] {
  const user = `system:serviceaccount:${rel.operatorSa.namespace}:${rel.operatorSa.name}`;
  return rel.kube.denied.filter((d) => d.user === user).map((d) => `${d.verb} ${d.path}: ${d.message}`);
}

/** The operator holds its Lease in the release namespace (leader election under the rendered RBAC). */
export async function operatorLeads(rel: Release): Promise<void> {
  const lease = () => rel.kube.getObject('leases', rel.namespace, 'playflow-operator', 'coordination.k8s.io');
  await until('the operator to take its Lease', () => Boolean(lease()?.spec?.holderIdentity));
  expect(lease()!.spec.holderIdentity).toBe(rel.operator!.env.POD_NAME);
}
