/**
 * A kubelet without a cluster: runs the containers of a rendered release as local processes,
 * with the exact command, args and environment of their pod specs, and polls their rendered
 * probes. What a kubelet would get from the cluster comes from the fake API server (Secrets,
 * ConfigMaps, the operator's ServiceAccount token) and from loopback:
 *
 * - env: `value` as is; `secretKeyRef` / `configMapKeyRef` read from the fake API server (a missing
 *   Secret or key fails, naming the variable); `fieldRef` metadata.name / metadata.namespace;
 * - Service DNS names (`svc`, `svc.ns`, `svc.ns.svc[.cluster.local]`) with the Service's port are
 *   mapped to the loopback port of the container behind it — a URL naming a host that is no
 *   rendered Service fails;
 * - REWRITTEN, because the machine is shared (other suites and helpers listen on 8082, 4222…):
 *   each containerPort gets a free loopback port, and the env variable whose rendered value is
 *   that containerPort (PORT, WORKER_METRICS_PORT, …) carries the new one — the probes then hit
 *   the mapped port, so a process that listens elsewhere than its rendered port fails its probe;
 * - REWRITTEN: volume mount paths (/etc/nats, /data, /playbooks…) become temporary directories;
 * - the in-cluster service account becomes a KUBECONFIG with the ServiceAccount's token.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FakeKubeServer } from '../fake-k8s/server.js';
import { podSpecOf, ROOT, type Doc } from './render.js';

export const CLI = path.join(ROOT, 'dist', 'cli', 'index.js');

/** Free loopback ports from this suite's range (31100-31199 on the shared machine). */
export class PortPool {
  private next: number;
  constructor(private readonly from: number, private readonly to: number) {
    this.next = from;
  }
  async take(): Promise<number> {
    while (this.next <= this.to) {
      const port = this.next++;
      const free = await new Promise<boolean>((resolve) => {
        const s = net.createServer();
        s.once('error', () => resolve(false));
        s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
      });
      if (free) return port;
    }
    throw new Error(`no free port left in ${this.from}-${this.to}`);
  }
}

export interface Proc {
  name: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

export function startProcess(name: string, file: string, args: string[], env: Record<string, string>, cwd?: string): Proc {
  const child = spawn(file, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (b: Buffer) => {
    out += b.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { name, child, output: () => out, exited };
}

export async function stopProcess(p: Proc): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
  await p.exited;
  clearTimeout(timer);
}

const decode = (v: string) => Buffer.from(v, 'base64').toString('utf8');

export interface PodContext {
  kube: FakeKubeServer;
  namespace: string;
  podName: string;
}

/** The container's environment as the kubelet resolves it (before loopback rewriting). */
export function resolveEnv(c: any, ctx: PodContext, where: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    const at = `${where} env ${e.name}`;
    if ('value' in e) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef) {
      const { name, key } = e.valueFrom.secretKeyRef;
      const secret = ctx.kube.getObject('secrets', ctx.namespace, name);
      if (!secret) throw new Error(`${at}: Secret ${ctx.namespace}/${name} does not exist`);
      const v = secret.data?.[key] ?? secret.stringData?.[key];
      if (v === undefined) throw new Error(`${at}: Secret ${name} has no key ${key} (keys: ${Object.keys(secret.data ?? {}).join(', ')})`);
      env[e.name] = secret.data?.[key] !== undefined ? decode(v) : v;
    } else if (e.valueFrom?.configMapKeyRef) {
      const { name, key } = e.valueFrom.configMapKeyRef;
      const v = ctx.kube.getObject('configmaps', ctx.namespace, name)?.data?.[key];
      if (v === undefined) throw new Error(`${at}: ConfigMap ${name} has no key ${key}`);
      env[e.name] = v;
    } else if (e.valueFrom?.fieldRef) {
      const f = e.valueFrom.fieldRef.fieldPath;
      if (f === 'metadata.name') env[e.name] = ctx.podName;
      else if (f === 'metadata.namespace') env[e.name] = ctx.namespace;
      else throw new Error(`${at}: fieldRef ${f} is not simulated`);
    } else throw new Error(`${at}: unsupported env source ${JSON.stringify(e.valueFrom)}`);
  }
  return env;
}

/** Loopback addresses of the release's Services: `name:port` → local port. */
export class ServiceMap {
  private readonly map = new Map<string, number>();
  constructor(private readonly namespace: string) {}

  set(service: string, port: number, local: number): void {
    this.map.set(`${service}:${port}`, local);
  }

  /** Every Service of the render, bound to the local port its target container listens on. */
  bindRendered(docs: Doc[], localOf: (component: string, targetPort: string | number) => number | undefined): void {
    for (const svc of docs.filter((d) => d.kind === 'Service')) {
      const component = svc.spec.selector?.['app.kubernetes.io/component'];
      for (const p of svc.spec.ports) {
        const local = localOf(component, p.targetPort ?? p.port);
        if (local !== undefined) this.set(svc.metadata.name, p.port, local);
      }
    }
  }

  /** Rewrites `scheme://[user@]host:port` where host is a Service DNS name; fails on unknown hosts. */
  rewrite(value: string, where: string): string {
    return value.replace(/(\b[a-z][a-z0-9+.-]*:\/\/(?:[^@/\s]*@)?)([a-z0-9.-]+):(\d+)/g, (all, prefix: string, host: string, port: string) => {
      if (host === '127.0.0.1' || host === 'localhost') return all;
      const short = host.replace(new RegExp(`\\.${this.namespace}(\\.svc(\\.cluster\\.local)?)?$`), '');
      const local = this.map.get(`${short}:${port}`);
      if (local === undefined) throw new Error(`${where}: ${host}:${port} is no Service port of the release (have ${[...this.map.keys()].join(', ')})`);
      return `${prefix}127.0.0.1:${local}`;
    });
  }
}

/**
 * containerPort → local port, and the env rewritten to carry them: the variable whose value is
 * the containerPort names the port the code listens on. A port no variable carries fails (the
 * code would listen on its default, not on what the chart declares and probes).
 */
export function mapPorts(c: any, env: Record<string, string>, local: Record<number, number>, where: string): Record<string, string> {
  const out = { ...env };
  for (const p of c.ports ?? []) {
    const carriers = Object.entries(env).filter(([, v]) => v === String(p.containerPort)).map(([k]) => k);
    if (!carriers.length) throw new Error(`${where}: containerPort ${p.name}=${p.containerPort} is set by no env variable`);
    for (const k of carriers) out[k] = String(local[p.containerPort]);
  }
  return out;
}

/** Temporary directories standing in for the pod's volume mounts; ConfigMap volumes filled in. */
export function mountVolumes(pod: any, c: any, ctx: PodContext, base: string): Record<string, string> {
  const mounts: Record<string, string> = {};
  for (const m of c.volumeMounts ?? []) {
    const dir = mkdtempSync(path.join(base, `${m.name}-`));
    const vol = (pod.volumes ?? []).find((v: any) => v.name === m.name);
    if (vol?.configMap) {
      const cm = ctx.kube.getObject('configmaps', ctx.namespace, vol.configMap.name);
      if (!cm) throw new Error(`volume ${m.name}: ConfigMap ${vol.configMap.name} does not exist`);
      for (const [k, v] of Object.entries<string>(cm.data ?? {})) writeFileSync(path.join(dir, k), v);
    }
    mounts[m.mountPath] = dir;
  }
  return mounts;
}

/** Replaces mount paths (longest first) in a string: the process sees the stand-in directories. */
export function remount(value: string, mounts: Record<string, string>): string {
  let out = value;
  for (const [from, to] of Object.entries(mounts).sort((a, b) => b[0].length - a[0].length)) out = out.split(from).join(to);
  return out;
}

/** Polls one rendered httpGet probe until it answers 2xx/3xx, within `budgetMs`. */
export async function pollProbe(probe: any, c: any, local: Record<number, number>, where: string, budgetMs: number, proc?: Proc): Promise<void> {
  const get = probe?.httpGet;
  if (!get) throw new Error(`${where}: no httpGet probe`);
  const port = typeof get.port === 'number' ? get.port : (c.ports ?? []).find((p: any) => p.name === get.port)?.containerPort;
  if (port === undefined) throw new Error(`${where}: probe port ${get.port} is no container port`);
  const url = `http://127.0.0.1:${local[port]}${get.path}`;
  const deadline = Date.now() + budgetMs;
  let last = '';
  while (Date.now() < deadline) {
    if (proc && proc.child.exitCode !== null) throw new Error(`${where}: process exited (${proc.child.exitCode}) before ${get.path} answered:\n${proc.output().slice(-4000)}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
      if (res.status >= 200 && res.status < 400) return;
      last = `${res.status} ${await res.text()}`;
    } catch (err) {
      last = String((err as Error).cause ?? err);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${where}: probe GET ${get.path} (port ${get.port}) not ready after ${budgetMs} ms: ${last}\n${proc?.output().slice(-4000) ?? ''}`);
}

export interface RunPodOptions {
  doc: Doc;
  ctx: PodContext;
  ports: PortPool;
  services: ServiceMap;
  base: string;
  /** Extra env the kubelet provides (KUBECONFIG for the service account). */
  extraEnv?: Record<string, string>;
  /** Loopback ports already assigned to this pod's container ports (Services bound before start). */
  local?: Record<number, number>;
  /** A stand-in's own rewrite of the resolved env (the local PostgreSQL's database and user). */
  envHook?: (env: Record<string, string>, where: string) => Record<string, string>;
}

export interface RunningPod {
  proc: Proc;
  env: Record<string, string>;
  local: Record<number, number>;
  container: any;
  /** Starts the container again with the same args and env (restartPolicy: Always). */
  respawn: () => Proc;
  restarts: number;
}

/** Assigns loopback ports to a workload's first container (so Services can be bound first). */
export async function assignPorts(doc: Doc, ports: PortPool): Promise<Record<number, number>> {
  const c = podSpecOf(doc).containers[0];
  const local: Record<number, number> = {};
  for (const p of c.ports ?? []) local[p.containerPort] = await ports.take();
  return local;
}

/**
 * Starts a Playflow container: the image's entry point is `playflow` (dist/cli/index.js), so a
 * pod without `command` runs `playflow <args>`.
 */
export async function runPlayflowPod(o: RunPodOptions): Promise<RunningPod> {
  const pod = podSpecOf(o.doc);
  const c = pod.containers[0];
  const where = `${o.doc.kind}/${o.doc.metadata.name}/${c.name}`;
  if (c.command) throw new Error(`${where}: sets command ${JSON.stringify(c.command)}; the image's entry point is playflow`);
  const local = o.local ?? await assignPorts(o.doc, o.ports);
  let env = resolveEnv(c, o.ctx, where);
  env = mapPorts(c, env, local, where);
  for (const [k, v] of Object.entries(env)) env[k] = o.services.rewrite(v, `${where} env ${k}`);
  if (o.envHook) env = o.envHook(env, where);
  const mounts = mountVolumes(pod, c, o.ctx, o.base);
  const args = (c.args as string[]).map((a) => remount(a, mounts));
  const full = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: o.base, ...env, ...o.extraEnv };
  const cwd = mkdirTemp(o.base);
  const respawn = () => startProcess(where, process.execPath, [CLI, ...args], full, cwd);
  return { proc: respawn(), env: full, local, container: c, respawn, restarts: 0 };
}

function mkdirTemp(base: string): string {
  const d = path.join(base, 'cwd');
  mkdirSync(d, { recursive: true });
  return d;
}

export const MAX_RESTARTS = 3;

/**
 * Startup, then readiness and liveness, as the kubelet gates a pod's Ready. A container that
 * exits is restarted with a growing delay, as restartPolicy: Always does (on a loaded machine a
 * dependency may answer late); one that keeps exiting fails with its output (CrashLoopBackOff).
 */
export async function waitReady(p: RunningPod, where: string, onRespawn: (proc: Proc) => void, budgetMs = 90_000): Promise<void> {
  const c = p.container;
  for (;;) {
    try {
      if (c.startupProbe) await pollProbe(c.startupProbe, c, p.local, `${where} startupProbe`, budgetMs, p.proc);
      await pollProbe(c.readinessProbe, c, p.local, `${where} readinessProbe`, budgetMs, p.proc);
      await pollProbe(c.livenessProbe, c, p.local, `${where} livenessProbe`, budgetMs, p.proc);
      return;
    } catch (err) {
      if (p.proc.child.exitCode === null || p.restarts >= MAX_RESTARTS) throw err;
      p.restarts += 1;
      await new Promise((r) => setTimeout(r, 1000 * 2 ** (p.restarts - 1)));
      p.proc = p.respawn();
      onRespawn(p.proc);
    }
  }
}

export function tempBase(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}
