import * as k8s from '@kubernetes/client-node';
import type { FakeKubeServer, Obj } from '../fake-k8s/server.js';

/** Polls `fn` until it returns without throwing (assertions inside), or fails with its last error. */
export async function eventually<T>(fn: () => T | Promise<T>, timeoutMs = 20_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      return await fn();
    } catch (err) {
      last = err;
    }
    await sleep(intervalMs);
  }
  throw last;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

export function condition(obj: Obj | undefined, type: string): { status: string; reason: string; message: string } | undefined {
  return obj?.status?.conditions?.find((c: any) => c.type === type);
}

/** Events recorded on an object, from the fake API server. */
export function eventsFor(kube: FakeKubeServer, namespace: string, name: string): Obj[] {
  return kube.listObjects('events', namespace, '').filter((e) => e.involvedObject?.name === name);
}

export function statefulSet(name: string, replicas: number): Obj {
  return {
    metadata: { name },
    spec: {
      replicas,
      serviceName: name,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'worker', image: 'playflow:test', args: ['worker', 'start', '--v2'] }] } },
    },
  };
}
