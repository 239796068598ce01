/**
 * Thin helpers over @kubernetes/client-node 1.x: typed API clients, merge patches (client-node
 * defaults to JSON patch, so the Content-Type is set explicitly), error decoding (`ApiException.body`
 * is a JSON string) and list/watch paths for namespaced or cluster-wide informers.
 */
import { createHash } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { GROUP, VERSION } from './types.js';

export const mergePatchOptions = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

export interface KubeClients {
  kc: k8s.KubeConfig;
  custom: k8s.CustomObjectsApi;
  core: k8s.CoreV1Api;
  apps: k8s.AppsV1Api;
  coordination: k8s.CoordinationV1Api;
  watch: k8s.Watch;
}

/**
 * client-node 1.x builds a new http(s).Agent for every request, so every API call opens a new TCP
 * (and, in a cluster, TLS) connection: at 10,000 resources the operator spent more CPU connecting
 * than reconciling, in synchronous slices that stalled the event loop. This keeps one keep-alive
 * agent per distinct set of agent options (server, proxy, CA, client certificate: a rotated
 * certificate gets a new agent), shared by the typed clients and the watches of this KubeConfig.
 */
export function reuseConnections(kc: k8s.KubeConfig): k8s.KubeConfig {
  const target = kc as unknown as { createAgent(cluster: k8s.Cluster | null, opts: Record<string, unknown>): unknown; keepAliveAgents?: true };
  if (target.keepAliveAgents) return kc;
  const create = target.createAgent.bind(kc);
  const agents = new Map<string, unknown>();
  target.createAgent = (cluster, opts) => {
    const key = createHash('sha256').update(JSON.stringify([cluster?.server, cluster?.proxyUrl, opts])).digest('hex');
    let agent = agents.get(key);
    if (!agent) {
      agent = create(cluster, { ...opts, keepAlive: true });
      agents.set(key, agent);
    }
    return agent;
  };
  target.keepAliveAgents = true;
  return kc;
}

export function makeClients(kc: k8s.KubeConfig): KubeClients {
  reuseConnections(kc);
  return {
    kc,
    custom: kc.makeApiClient(k8s.CustomObjectsApi),
    core: kc.makeApiClient(k8s.CoreV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    coordination: kc.makeApiClient(k8s.CoordinationV1Api),
    watch: new k8s.Watch(kc),
  };
}

/** HTTP status of a client-node error (ApiException.code), or undefined for network errors. */
export function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e?.code === 'number') return e.code;
  if (typeof e?.statusCode === 'number') return e.statusCode;
  return undefined;
}

/** The Kubernetes Status message of an error, for logs and conditions. */
export function messageOf(err: unknown): string {
  const e = err as { body?: unknown; message?: string };
  if (typeof e?.body === 'string') {
    try {
      const parsed = JSON.parse(e.body) as { message?: string };
      if (parsed?.message) return parsed.message;
    } catch {
      /* not JSON */
    }
  }
  return e?.message ?? String(err);
}

export const isNotFound = (err: unknown): boolean => statusOf(err) === 404;
export const isConflict = (err: unknown): boolean => statusOf(err) === 409;

/** Merge-patches a custom resource (main endpoint: metadata/spec). */
export async function patchCustom(
  clients: KubeClients, plural: string, namespace: string, name: string, body: object,
): Promise<any> {
  return clients.custom.patchNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace, name, body }, mergePatchOptions);
}

/** Merge-patches the status subresource of a custom resource. */
export async function patchCustomStatus(
  clients: KubeClients, plural: string, namespace: string, name: string, status: object,
): Promise<any> {
  return clients.custom.patchNamespacedCustomObjectStatus(
    { group: GROUP, version: VERSION, plural, namespace, name, body: { status } }, mergePatchOptions,
  );
}

/** Watch path of a namespaced resource, in one namespace or (namespace '') all of them. */
export function resourcePath(group: string, version: string, plural: string, namespace: string): string {
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  return namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${plural}` : `${base}/${plural}`;
}

/** One page of a list (`limit`, `continue`): the informers read large collections page by page. */
export interface PageRequest {
  limit?: number;
  continue?: string;
}

const pageParams = (p: PageRequest = {}) => ({
  ...(p.limit ? { limit: p.limit } : {}),
  ...(p.continue ? { _continue: p.continue } : {}),
});

export function listCustom(clients: KubeClients, plural: string, namespace: string): (page?: PageRequest) => Promise<any> {
  return (page) =>
    namespace
      ? clients.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace, ...pageParams(page) })
      : clients.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural, ...pageParams(page) });
}

export function listSecrets(clients: KubeClients, namespace: string): (page?: PageRequest) => Promise<any> {
  return (page) => (namespace
    ? clients.core.listNamespacedSecret({ namespace, ...pageParams(page) })
    : clients.core.listSecretForAllNamespaces(pageParams(page)));
}
