/**
 * `helm install` without a cluster: one rendered release brought up as local processes
 * (kubelet.ts) against the strict fake API server, in the order a cluster would — hooks, then the
 * manifests, then pods gated on their probes.
 *
 * Stand-ins, and what they rewrite (each said where it happens):
 * - the fake API server holds what the API server would: the chart's CRDs (from the render), its
 *   RBAC, Secrets, ConfigMaps, StatefulSets and WorkerPools; kinds it does not serve (Deployments,
 *   Services, PDBs) are run or mapped here instead;
 * - NATS: the bundled StatefulSet's nats-server with the rendered nats.conf, only `port`,
 *   `http_port` (shared machine) and the /data mount path rewritten; for nats.enabled=false an own
 *   nats-server plays the external one, its URL in the user's Secret;
 * - PostgreSQL: the machine's, in a fresh database: the bundled one's Service maps to it and the
 *   URL's database and user are rewritten to that database and the admin user (trust auth; the
 *   postgres image would have created the rendered POSTGRES_USER/DB — checked to match the URL);
 *   for postgresql.enabled=false the user's Secret holds the URL.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseDocument } from 'yaml';
import { renderCrds } from '../../scripts/gen-crds.js';
import { FakeKubeServer } from '../fake-k8s/server.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { apiVersionOf } from '../fake-k8s/resources.js';
import {
  assignPorts, CLI, mountVolumes, pollProbe, PortPool, remount, resolveEnv, runPlayflowPod, ServiceMap, startProcess,
  stopProcess, tempBase, waitReady, type PodContext, type Proc, type RunningPod,
} from './kubelet.js';
import { isHook, podSpecOf, render, type Doc } from './render.js';

export const RELEASE = 'playflow';

export interface Release {
  namespace: string;
  docs: Doc[];
  kube: FakeKubeServer;
  /** kubeconfig of a cluster admin (the person running kubectl). */
  adminKubeconfig: string;
  operatorSa: { name: string; namespace: string };
  server?: RunningPod;
  worker?: RunningPod;
  operator?: RunningPod;
  nats?: Proc;
  serverUrl: string;
  apiToken?: string;
  db: TestDatabase;
  base: string;
  procs: Proc[];
  services: ServiceMap;
  stop(): Promise<void>;
}

const find = (docs: Doc[], kind: string, suffix: string) => docs.find((d) => d.kind === kind && d.metadata.name === `${RELEASE}-playflow-${suffix}` || d.kind === kind && d.metadata.name === `${RELEASE}-${suffix}`);

/** Namespaced documents of `helm template` carry no namespace: the install gives them the release's. */
const inNamespace = (d: Doc, ns: string): Doc => ({ ...d, metadata: { ...d.metadata, namespace: d.metadata.namespace ?? ns } });

export async function runJob(rel: Pick<Release, 'kube' | 'namespace' | 'base'>, job: Doc): Promise<string> {
  const pod = podSpecOf(job);
  const c = pod.containers[0];
  const ctx: PodContext = { kube: rel.kube, namespace: rel.namespace, podName: `${job.metadata.name}-x` };
  const env = resolveEnv(c, ctx, `Job/${job.metadata.name}`);
  const kubeconfig = path.join(rel.base, `kubeconfig-${pod.serviceAccountName}`);
  writeFileSync(kubeconfig, rel.kube.kubeConfig(rel.kube.serviceAccountToken(rel.namespace, pod.serviceAccountName), rel.namespace).exportConfig());
  const p = startProcess(`Job/${job.metadata.name}`, process.execPath, [CLI, ...c.args], { PATH: process.env.PATH ?? '', ...env, KUBECONFIG: kubeconfig });
  const code = await p.exited;
  if (code !== 0) throw new Error(`Job ${job.metadata.name} failed (${code}):\n${p.output()}`);
  return p.output();
}

/** Puts the rendered manifests the fake serves, as `helm install` would create them. */
export function installManifests(kube: FakeKubeServer, docs: Doc[], ns: string): void {
  for (const d of docs) {
    if (d.metadata.annotations?.['helm.sh/hook'] || d.kind === 'CustomResourceDefinition') continue;
    const def = kube.resources.find((r) => apiVersionOf(r) === d.apiVersion && r.kind === d.kind);
    if (!def || ['ServiceAccount', 'Role', 'RoleBinding'].includes(d.kind)) continue; // RBAC is loaded at start
    kube.putObject(def.plural, inNamespace(d, ns), def.group);
  }
}

export interface BringUpOptions {
  ports: PortPool;
  /** Names the namespace and temporary directory. */
  label: string;
}

export async function bringUp(args: string[], o: BringUpOptions): Promise<Release> {
  const namespace = `pf-rel-${o.label.toLowerCase()}-${randomBytes(3).toString('hex')}`;
  const docs = render(RELEASE, namespace, args);
  const base = tempBase(`pf-release-${o.label}-`);
  const crds = docs.filter((d) => d.kind === 'CustomResourceDefinition');
  const generated = Object.values(renderCrds()).map((text) => (parseDocument(text).toJSON() as Doc).metadata.name).sort();
  const rendered = crds.map((d) => d.metadata.name).sort();
  if (JSON.stringify(rendered) !== JSON.stringify(generated)) throw new Error(`the render has the CRDs ${rendered.join(', ')}, expected the generated ${generated.join(', ')} (scripts/gen-crds.ts)`);
  const rbac = docs.filter((d) => ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(d.kind)).map((d) => inNamespace(d, namespace));
  const kube = new FakeKubeServer({ crds, rbac, namespaces: [namespace] });
  await kube.start();
  const adminKubeconfig = kube.writeKubeconfig(kube.adminToken, namespace);
  const procs: Proc[] = [];
  const services = new ServiceMap(namespace);
  const db = await createTestDatabase('pfrel');
  const rel: Release = {
    namespace, docs, kube, adminKubeconfig, base, procs, services, db, serverUrl: '',
    operatorSa: { name: '', namespace },
    async stop() {
      await Promise.all(procs.map((p) => stopProcess(p)));
      await kube.stop();
      await db.drop();
    },
  };
  try {
    await start(rel, args, o);
  } catch (err) {
    await rel.stop();
    throw err;
  }
  return rel;
}

async function start(rel: Release, args: string[], o: BringUpOptions): Promise<void> {
  const { kube, docs, namespace: ns, procs, services } = rel;
  const ctxFor = (podName: string): PodContext => ({ kube, namespace: ns, podName });

  // Secrets the user creates before installing (the external-service value sets).
  const natsSts = find(docs, 'StatefulSet', 'nats');
  let natsLocal: number;
  let natsMonitor: number | undefined;
  if (natsSts) {
    ({ client: natsLocal, monitor: natsMonitor } = await startBundledNats(rel, natsSts, o.ports));
  } else {
    natsLocal = await startExternalNats(rel, o.ports);
    kube.putObject('secrets', { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'pf-nats', namespace: ns }, stringData: { url: `nats://127.0.0.1:${natsLocal}` } });
  }
  if (!find(docs, 'StatefulSet', 'postgresql')) {
    kube.putObject('secrets', { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'pf-db', namespace: ns }, stringData: { url: rel.db.url } });
  }

  // helm install: pre-install hooks, then the manifests.
  for (const job of docs.filter((d) => d.kind === 'Job' && isHook(d, 'pre-install'))) await runJob(rel, job);
  installManifests(kube, docs, ns);

  const server = find(docs, 'Deployment', 'server')!;
  const worker = find(docs, 'StatefulSet', 'worker')!;
  const operator = find(docs, 'Deployment', 'operator')!;
  const local = {
    server: await assignPorts(server, o.ports),
    worker: await assignPorts(worker, o.ports),
    operator: operator ? await assignPorts(operator, o.ports) : {},
  };
  const byComponent: Record<string, { doc?: Doc; local: Record<number, number> }> = {
    server: { doc: server, local: local.server },
    worker: { doc: worker, local: local.worker },
  };
  services.bindRendered(docs, (component, target) => {
    if (component === 'nats') return target === 'client' ? natsLocal : target === 'monitor' ? natsMonitor : undefined;
    if (component === 'postgresql') return Number(new URL(rel.db.url).port || 5432);
    const entry = byComponent[component];
    if (!entry?.doc) return undefined;
    const c = podSpecOf(entry.doc).containers[0];
    const port = typeof target === 'number' ? target : c.ports?.find((p: any) => p.name === target)?.containerPort;
    return port === undefined ? undefined : entry.local[port];
  });

  const standIn = standInDatabase(rel);
  rel.server = await runPlayflowPod({ doc: server, ctx: ctxFor(`${server.metadata.name}-0`), ports: o.ports, services, base: rel.base, local: local.server, envHook: standIn });
  procs.push(rel.server.proc);
  rel.serverUrl = `http://127.0.0.1:${local.server[podSpecOf(server).containers[0].ports[0].containerPort]}`;
  rel.apiToken = rel.server.env.PLAYFLOW_API_TOKEN;
  await waitReady(rel.server, 'server', (proc) => procs.push(proc));

  rel.worker = await runPlayflowPod({ doc: worker, ctx: ctxFor(`${worker.metadata.name}-0`), ports: o.ports, services, base: rel.base, local: local.worker, envHook: standIn });
  procs.push(rel.worker.proc);
  if (operator) {
    const saName = podSpecOf(operator).serviceAccountName;
    rel.operatorSa = { name: saName, namespace: ns };
    const kubeconfig = path.join(rel.base, 'kubeconfig-operator');
    writeFileSync(kubeconfig, kube.kubeConfig(kube.serviceAccountToken(ns, saName), ns).exportConfig());
    rel.operator = await runPlayflowPod({
      doc: operator, ctx: ctxFor(`${operator.metadata.name}-6d9f7c-abcde`), ports: o.ports, services, base: rel.base, local: local.operator,
      extraEnv: { KUBECONFIG: kubeconfig },
    });
    procs.push(rel.operator.proc);
  }
  const respawned = (proc: Proc) => procs.push(proc);
  await Promise.all([waitReady(rel.worker, 'worker', respawned), rel.operator ? waitReady(rel.operator, 'operator', respawned) : undefined]);
}

/** The bundled NATS: the rendered container's args and config file (ports and /data rewritten). */
async function startBundledNats(rel: Release, sts: Doc, ports: PortPool): Promise<{ client: number; monitor: number }> {
  const pod = podSpecOf(sts);
  const c = pod.containers[0];
  const ctx: PodContext = { kube: rel.kube, namespace: rel.namespace, podName: `${sts.metadata.name}-0` };
  // The config ConfigMap is a regular manifest; the pod needs it before install order would
  // matter here, so it is put now (helm creates ConfigMaps before StatefulSets anyway).
  const cm = rel.docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === sts.metadata.name)!;
  rel.kube.putObject('configmaps', { ...cm, metadata: { ...cm.metadata, namespace: rel.namespace } });
  const mounts = mountVolumes(pod, c, ctx, rel.base);
  const client = await ports.take();
  const monitor = await ports.take();
  const declared = Object.fromEntries(c.ports.map((p: any) => [p.name, p.containerPort]));
  const confPath = remount(c.args[c.args.indexOf('--config') + 1], mounts);
  const rendered = readFileSync(confPath, 'utf8');
  // REWRITTEN (shared machine): the two listen ports, and the /data volume's path. The rendered
  // ports must be the ones the pod declares (and its Service and probes use).
  const lines = rendered.split('\n');
  const swap = (key: string, declaredPort: number, to: number) => {
    const i = lines.findIndex((l) => l.trim() === `${key}: ${declaredPort}`);
    if (i < 0) throw new Error(`nats.conf does not set ${key}: ${declaredPort} (the container port the pod declares):\n${rendered}`);
    lines[i] = lines[i].replace(String(declaredPort), String(to));
  };
  swap('port', declared.client, client);
  swap('http_port', declared.monitor, monitor);
  const dataMount = (c.volumeMounts as any[]).find((m) => m.name === 'data').mountPath as string;
  mkdirSync(mounts[dataMount], { recursive: true });
  writeFileSync(confPath, lines.join('\n').split(`${dataMount}/`).join(`${mounts[dataMount]}/`));
  const proc = startProcess('nats', '/usr/sbin/nats-server', c.args.map((a: string) => remount(a, mounts)), { PATH: process.env.PATH ?? '' });
  rel.procs.push(proc);
  rel.nats = proc;
  const local = { [declared.client]: client, [declared.monitor]: monitor };
  await pollProbe(c.readinessProbe, c, local, 'nats readinessProbe', 30_000, proc);
  await pollProbe(c.livenessProbe, c, local, 'nats livenessProbe', 30_000, proc);
  return { client, monitor };
}

/** nats.enabled=false: a NATS outside the release, as the user's Secret names it. */
async function startExternalNats(rel: Release, ports: PortPool): Promise<number> {
  const port = await ports.take();
  const store = path.join(rel.base, 'external-nats');
  mkdirSync(store, { recursive: true });
  const proc = startProcess('external-nats', '/usr/sbin/nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], { PATH: process.env.PATH ?? '' });
  rel.procs.push(proc);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.end();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return port;
    if (Date.now() > deadline) throw new Error(`external nats-server did not listen:\n${proc.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The machine's PostgreSQL stands in for the bundled one: the URL the chart generated must name
 * the user, database and password the postgres container is given (POSTGRES_USER, POSTGRES_DB,
 * POSTGRES_PASSWORD); then its database and user are REWRITTEN to this test's database.
 */
function standInDatabase(rel: Release): (env: Record<string, string>, where: string) => Record<string, string> {
  return (env, where) => {
    if (!env.DATABASE_URL) return env;
    const pgSts = find(rel.docs, 'StatefulSet', 'postgresql');
    if (!pgSts) return env; // external: the user's Secret already holds this test's URL
    const pg = podSpecOf(pgSts).containers[0];
    const pgEnv = resolveEnv(pg, { kube: rel.kube, namespace: rel.namespace, podName: `${pgSts.metadata.name}-0` }, 'postgresql');
    const url = new URL(env.DATABASE_URL);
    const want = { user: pgEnv.POSTGRES_USER, db: pgEnv.POSTGRES_DB, password: pgEnv.POSTGRES_PASSWORD };
    const got = { user: decodeURIComponent(url.username), db: url.pathname.slice(1), password: decodeURIComponent(url.password) };
    if (JSON.stringify(want) !== JSON.stringify(got)) throw new Error(`${where}: DATABASE_URL does not match the bundled PostgreSQL's POSTGRES_USER/DB/PASSWORD`);
    const standIn = new URL(rel.db.url);
    url.username = standIn.username;
    url.password = standIn.password;
    url.pathname = standIn.pathname;
    return { ...env, DATABASE_URL: url.toString() };
  };
}

export { podSpecOf };
