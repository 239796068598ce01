/**
 * Thin helpers over @kubernetes/client-node 1.x: typed API clients, merge patches (client-node
 * defaults to JSON patch, so the Content-Type is set explicitly), error decoding (`ApiException.body`
 * is a JSON string) and list/watch paths for namespaced or cluster-wide informers.
 */
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

export function makeClients(kc: k8s.KubeConfig): KubeClients {
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

export function listCustom(clients: KubeClients, plural: string, namespace: string): () => Promise<any> {
  return () =>
    namespace
      ? clients.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural, namespace })
      : clients.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural });
}

export function listSecrets(clients: KubeClients, namespace: string): () => Promise<any> {
  return () => (namespace ? clients.core.listNamespacedSecret({ namespace }) : clients.core.listSecretForAllNamespaces());
}
