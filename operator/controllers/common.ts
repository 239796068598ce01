import type { KubeClients } from '../kube.js';
import { patchCustom } from '../kube.js';
import type { EventRecorder } from '../events.js';
import type { Logger } from '../log.js';
import type { OperatorMetrics } from '../metrics.js';
import { ApiError, type OperatorServerApi } from '../api.js';
import type { ResourceOwner } from '../../common/protocol.js';
import { DEFAULT_DELETION_POLICY, FINALIZER, FORCE_DELETE_ANNOTATION, type DeletionPolicy, type Resource } from '../types.js';

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
  /**
   * How long a finalizer waits for an unreachable server before it lets the resource go anyway
   * (with a Warning event). Default 5 min (`OPERATOR_FINALIZER_TIMEOUT_SECONDS`).
   */
  finalizerTimeoutMs?: number;
}

export const DEFAULT_FINALIZER_TIMEOUT_MS = 5 * 60_000;

/** The owner recorded in the server for what this resource registers. */
export function ownerOf(kind: string, obj: Resource<unknown, unknown>): ResourceOwner {
  return { kind, namespace: obj.metadata.namespace, name: obj.metadata.name, ...(obj.metadata.uid ? { uid: obj.metadata.uid } : {}) };
}

/** `Kind/namespace/name`, the owner-guarded DELETE's form. */
export function ownerRef(kind: string, obj: Resource<unknown, unknown>): string {
  return `${kind}/${obj.metadata.namespace}/${obj.metadata.name}`;
}

/** 409 `owned_by_other`: the server says someone else holds the path or name. */
export function isOwnedByOther(err: unknown): err is ApiError {
  return err instanceof ApiError && err.status === 409 && err.code === 'owned_by_other';
}

export function deletionPolicyOf(obj: { spec?: { deletionPolicy?: DeletionPolicy } }): DeletionPolicy {
  return obj.spec?.deletionPolicy ?? DEFAULT_DELETION_POLICY;
}

export function forceDeleteRequested(obj: Resource<unknown, unknown>): boolean {
  return obj.metadata.annotations?.[FORCE_DELETE_ANNOTATION] === 'true';
}

/** Whether the object has waited for its cleanup longer than the finalizer timeout. */
export function finalizerExpired(ctx: ControllerContext, obj: Resource<unknown, unknown>, now = Date.now()): boolean {
  const since = obj.metadata.deletionTimestamp ? new Date(obj.metadata.deletionTimestamp).getTime() : now;
  return now - since >= (ctx.finalizerTimeoutMs ?? DEFAULT_FINALIZER_TIMEOUT_MS);
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
