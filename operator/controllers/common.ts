import type { KubeClients } from '../kube.js';
import { patchCustom } from '../kube.js';
import type { EventRecorder } from '../events.js';
import type { Logger } from '../log.js';
import type { OperatorMetrics } from '../metrics.js';
import type { OperatorServerApi } from '../api.js';
import { FINALIZER, type Resource } from '../types.js';

/** What every controller gets from the operator. */
export interface ControllerContext {
  clients: KubeClients;
  api: OperatorServerApi;
  events: EventRecorder;
  log: Logger;
  metrics: OperatorMetrics;
  /**
   * How often an object already in sync is checked against the server (the catalog entry or
   * credential still exists, nobody replaced it), so drift is repaired. Default 5 min.
   */
  verifyIntervalMs?: number;
}

/**
 * When several live resources claim the same name in the server (a catalog path, a credential
 * name), the oldest one owns it; the others report a conflict instead of overwriting each other.
 */
export function owner<T extends Resource<unknown, unknown>>(candidates: T[]): T | undefined {
  return candidates
    .filter((o) => !o.metadata.deletionTimestamp)
    .sort((a, b) => {
      const ta = new Date(a.metadata.creationTimestamp ?? 0).getTime();
      const tb = new Date(b.metadata.creationTimestamp ?? 0).getTime();
      return ta - tb || `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`);
    })[0];
}

export const CONFLICT_RETRY_MS = 30_000;

export function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
}

export function hasFinalizer(obj: Resource<unknown, unknown>): boolean {
  return (obj.metadata.finalizers ?? []).includes(FINALIZER);
}

/**
 * Adds our finalizer (merge patch guarded by the resourceVersion read: a concurrent change makes
 * it fail with 409 and the key is retried with fresh state). Returns the updated object.
 */
export async function addFinalizer<T extends Resource<unknown, unknown>>(ctx: ControllerContext, plural: string, obj: T): Promise<T> {
  const finalizers = [...(obj.metadata.finalizers ?? []), FINALIZER];
  return (await patchCustom(ctx.clients, plural, obj.metadata.namespace, obj.metadata.name, {
    metadata: { finalizers, resourceVersion: obj.metadata.resourceVersion },
  })) as T;
}

export async function removeFinalizer(ctx: ControllerContext, plural: string, obj: Resource<unknown, unknown>): Promise<void> {
  const finalizers = (obj.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
  await patchCustom(ctx.clients, plural, obj.metadata.namespace, obj.metadata.name, {
    metadata: { finalizers: finalizers.length ? finalizers : null, resourceVersion: obj.metadata.resourceVersion },
  });
}

export function nowIso(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}
