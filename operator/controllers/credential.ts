/**
 * Credential controller: a Credential custom resource + the Kubernetes Secret it references → a
 * stored credential, through POST /api/credentials (create or update).
 *
 * - The data comes only from the Secret (never from the custom resource): every key of the
 *   Secret becomes a data field, or — with `secretRef.keys` — only the listed keys, each under
 *   its `field` name. Values are strings; when the Credential's `schema.types` says a field is an
 *   integer, number, boolean, object or array, the string is converted (a port in a Secret is a
 *   string, the postgres credential wants an integer).
 * - The Secret's resourceVersion and the resource's generation are kept in status; the server is
 *   called again only when either changes (Secret rotation re-syncs: Secrets are watched and each
 *   Secret event enqueues the Credentials that reference it). No hash of Secret data is written
 *   anywhere.
 * - Secret or key missing: Ready=False (SecretNotFound / SecretKeyNotFound), no retry loop — the
 *   Secret watch brings the key back when the Secret appears or changes.
 * - 400/422 (schema validation): Ready=False reason Invalid with the server's messages; retried
 *   only when the Secret or the spec changes. Server unreachable: Ready=False ServerUnavailable,
 *   retried with backoff.
 * - Ownership: the store records this resource as the name's owner; another resource (an index
 *   lookup) or the server's 409 `owned_by_other` (a credential created through the API, another
 *   cluster) → Ready=False reason Conflict naming the owner, Stalled=True; nothing is overwritten.
 * - Upgrade adoption: an operator from before ownership stored credentials without an owner
 *   (with meta `source: kubernetes`, `namespace`, `resource`). When this resource's status says it
 *   synced the name (`credentialName`, `lastSyncTime`), the upsert sends `adopt: true` and the
 *   server lets it claim an ownerless credential whose meta names this resource; the periodic
 *   store check (verify interval) finds ownerless ones among in-sync Credentials. A credential
 *   created through the API (no such meta) stays protected: Conflict.
 * - Deletion (finalizer): `deletionPolicy: Retain` (default) keeps the stored credential; `Delete`
 *   removes it, owner-guarded. Server unreachable past the finalizer timeout, or the annotation
 *   `playflow.io/force-delete: "true"`: the finalizer is released with a Warning event.
 */
import type { V1Secret } from '@kubernetes/client-node';
import type { Json, JsonObject } from '../../playbook/types.js';
import { ApiError, isServerUnavailable, problemsOf } from '../api.js';
import { getCondition, setCondition, withStalled, type Condition, type ConditionInput } from '../conditions.js';
import type { ReconcileResult } from '../controller.js';
import { patchCustomStatus } from '../kube.js';
import type { CredentialResource, CredentialStatus } from '../types.js';
import {
  CONFLICT_RETRY_MS, addFinalizer, deletionPolicyOf, finalizerExpired, forceDeleteRequested, hasFinalizer, isOwnedByOther, nowIso,
  owner, ownerOf, ownerRef, removeFinalizer, splitKey, type ControllerContext,
} from './common.js';

export const CREDENTIAL_PLURAL = 'credentials';
export const CREDENTIAL_KIND = 'Credential';
/** Informer indexes: store name → Credentials claiming it; `namespace/secret` → Credentials reading it. */
export const NAME_INDEX = 'credentialName';
export const SECRET_INDEX = 'secretRef';
const CONTROLLER = 'credential';

export function credentialNameOf(obj: CredentialResource): string {
  return obj.spec?.name || obj.metadata.name;
}

export const credentialNameIndex = (obj: CredentialResource): string[] => [credentialNameOf(obj)];
export const credentialSecretIndex = (obj: CredentialResource): string[] =>
  obj.spec?.secretRef?.name ? [`${obj.metadata.namespace}/${obj.spec.secretRef.name}`] : [];

export interface CredentialCaches {
  credentials: {
    get(ns: string, name: string): CredentialResource | undefined;
    /** Credentials whose store name is `name` (NAME_INDEX). */
    byName(name: string): CredentialResource[];
  };
  secrets: { get(ns: string, name: string): V1Secret | undefined };
}

class DataError extends Error {
  constructor(readonly reason: string, message: string) {
    super(message);
  }
}

function coerce(value: string, type: unknown): Json {
  switch (type) {
    case 'integer': {
      const n = Number(value.trim());
      return Number.isInteger(n) && value.trim() !== '' ? n : value;
    }
    case 'number': {
      const n = Number(value.trim());
      return Number.isFinite(n) && value.trim() !== '' ? n : value;
    }
    case 'boolean':
      return value.trim() === 'true' ? true : value.trim() === 'false' ? false : value;
    case 'object':
    case 'array':
      try {
        return JSON.parse(value) as Json;
      } catch {
        return value;
      }
    default:
      return value;
  }
}

/** The credential data from a Secret, per the spec's key mapping and schema types. */
export function credentialData(obj: CredentialResource, secret: V1Secret): JsonObject {
  const raw: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) raw[k] = Buffer.from(v, 'base64').toString('utf8');
  for (const [k, v] of Object.entries(secret.stringData ?? {})) raw[k] = v;
  const types = (obj.spec.schema?.types ?? {}) as Record<string, unknown>;
  const data: JsonObject = {};
  const mapping = obj.spec.secretRef.keys;
  if (mapping && mapping.length) {
    const missing: string[] = [];
    for (const m of mapping) {
      const field = m.field || m.key;
      if (!(m.key in raw)) {
        if (!m.optional) missing.push(m.key);
        continue;
      }
      data[field] = coerce(raw[m.key]!, types[field]);
    }
    if (missing.length) {
      throw new DataError('SecretKeyNotFound', `Secret ${secret.metadata?.name} has no key ${missing.map((k) => `'${k}'`).join(', ')}`);
    }
  } else {
    for (const [k, v] of Object.entries(raw)) data[k] = coerce(v, types[k]);
  }
  if (Object.keys(data).length === 0) throw new DataError('SecretEmpty', `Secret ${secret.metadata?.name} has no data`);
  return data;
}

/** Ready=False reasons that need someone to change the resource or its Secret (kstatus Stalled). */
const TERMINAL_REASONS = new Set(['Invalid', 'Conflict', 'SecretKeyNotFound', 'SecretEmpty']);

export function credentialReconciler(ctx: ControllerContext, caches: CredentialCaches) {
  const log = ctx.log.child({ controller: CONTROLLER });
  const verifyMs = ctx.verifyIntervalMs ?? 5 * 60_000;
  /** key → when the store was last seen holding this credential. */
  const verified = new Map<string, number>();

  /** Sets the conditions; a Ready=False with a terminal reason also sets Stalled=True (kstatus). */
  function conditions(obj: CredentialResource, ...updates: ConditionInput[]): Condition[] {
    let list = obj.status?.conditions;
    for (const u of updates) list = setCondition(list, u, obj.metadata.generation);
    const ready = getCondition(list, 'Ready');
    const terminal = ready?.status === 'False' && TERMINAL_REASONS.has(ready.reason);
    return withStalled(list, terminal ? { reason: ready.reason, message: ready.message } : undefined, obj.metadata.generation);
  }

  async function writeStatus(obj: CredentialResource, status: CredentialStatus): Promise<void> {
    await patchCustomStatus(ctx.clients, CREDENTIAL_PLURAL, obj.metadata.namespace, obj.metadata.name, status);
  }

  function sharedName(obj: CredentialResource, name: string): boolean {
    return caches.credentials.byName(name).some((o) => o.metadata.uid !== obj.metadata.uid && !o.metadata.deletionTimestamp);
  }

  async function conflict(obj: CredentialResource, message: string): Promise<ReconcileResult> {
    if (getCondition(obj.status?.conditions, 'Ready')?.message !== message) {
      await writeStatus(obj, { observedGeneration: obj.metadata.generation, conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'Conflict', message }) });
      await ctx.events.record(obj, 'Warning', 'Conflict', message);
    }
    return { requeueAfterMs: CONFLICT_RETRY_MS };
  }

  async function release(obj: CredentialResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    await ctx.events.record(obj, type, reason, message);
    await removeFinalizer(ctx, CREDENTIAL_PLURAL, obj);
    log.info({ key: `${obj.metadata.namespace}/${obj.metadata.name}`, reason }, message);
  }

  async function finalize(obj: CredentialResource): Promise<void> {
    if (!hasFinalizer(obj)) return;
    const name = obj.status?.credentialName;
    if (!name) return release(obj, 'Normal', 'Released', 'Nothing was stored; finalizer released');
    if (forceDeleteRequested(obj)) {
      return release(obj, 'Warning', 'ForceDeleted', `Finalizer released at once (annotation playflow.io/force-delete); credential ${name} was left in the store`);
    }
    if (deletionPolicyOf(obj) === 'Retain') return release(obj, 'Normal', 'Retained', `Kept credential ${name} in the store (deletionPolicy Retain)`);
    if (sharedName(obj, name)) return release(obj, 'Normal', 'Released', `credential ${name} is claimed by another Credential; left in the store`);
    try {
      await ctx.api.deleteCredential(name, ownerRef(CREDENTIAL_KIND, obj));
    } catch (err) {
      if (isOwnedByOther(err)) return release(obj, 'Warning', 'NotOwned', `credential ${name} was left in the store: ${err.message}`);
      ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
      if (!isServerUnavailable(err)) throw err;
      if (finalizerExpired(ctx, obj)) {
        return release(obj, 'Warning', 'CleanupAbandoned',
          `The Playflow server stayed unreachable past the finalizer timeout; credential ${name} may remain in the store (${(err as Error).message})`);
      }
      await writeStatus(obj, {
        conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'ServerUnavailable', message: `deleting credential ${name}: ${(err as Error).message}` }),
      }).catch(() => undefined);
      throw err;
    }
    return release(obj, 'Normal', 'Deleted', `Deleted credential ${name}`);
  }

  return async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = splitKey(key);
    let obj = caches.credentials.get(namespace, name);
    if (!obj) {
      verified.delete(key);
      return;
    }
    if (obj.metadata.deletionTimestamp) return finalize(obj);
    if (!hasFinalizer(obj)) obj = await addFinalizer(ctx, CREDENTIAL_PLURAL, obj);

    const generation = obj.metadata.generation;
    const credName = credentialNameOf(obj);
    const secretName = obj.spec.secretRef?.name;
    const st = obj.status ?? {};
    const nameOwner = owner(caches.credentials.byName(credName));
    if (nameOwner && nameOwner.metadata.uid !== obj.metadata.uid) {
      return conflict(obj, `credential name ${credName} is owned by Credential ${nameOwner.metadata.namespace}/${nameOwner.metadata.name}`);
    }
    const secret = secretName ? caches.secrets.get(namespace, secretName) : undefined;
    if (!secret) {
      const message = `Secret ${namespace}/${secretName} not found`;
      const ready = getCondition(st.conditions, 'Ready');
      if (ready?.reason !== 'SecretNotFound' || ready.message !== message || st.observedGeneration !== generation) {
        await writeStatus(obj, { observedGeneration: generation, conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'SecretNotFound', message }) });
        await ctx.events.record(obj, 'Warning', 'SecretNotFound', message);
      }
      return;
    }

    let data: JsonObject;
    try {
      data = credentialData(obj, secret);
    } catch (err) {
      if (!(err instanceof DataError)) throw err;
      const ready = getCondition(st.conditions, 'Ready');
      if (ready?.reason !== err.reason || ready.message !== err.message || st.observedGeneration !== generation) {
        await writeStatus(obj, { observedGeneration: generation, conditions: conditions(obj, { type: 'Ready', status: 'False', reason: err.reason, message: err.message }) });
        await ctx.events.record(obj, 'Warning', err.reason, err.message);
      }
      return;
    }

    const secretRv = secret.metadata?.resourceVersion;
    const ready = getCondition(st.conditions, 'Ready');
    if (st.secretResourceVersion === secretRv && st.observedGeneration === generation && st.credentialName === credName
      && (ready?.status === 'True' || ready?.reason === 'Invalid')) {
      // This Secret version and spec are already stored (or known to be rejected); now and then
      // check the store still has it (someone may have deleted it through the API).
      if (ready?.status !== 'True' || Date.now() - (verified.get(key) ?? 0) < verifyMs) return;
      const stored = await ctx.api.credentialOwner(credName);
      if (stored?.owner) {
        verified.set(key, Date.now());
        return;
      }
      if (stored) log.info({ key, credential: credName }, 'credential without owner (stored before ownership): adopting');
      else log.info({ key, credential: credName }, 'credential missing from the store; storing it again');
    }
    const wroteIt = st.credentialName === credName && st.lastSyncTime !== undefined;

    try {
      await ctx.api.upsertCredential({
        name: credName,
        type: obj.spec.type,
        ...(obj.spec.description !== undefined ? { description: obj.spec.description } : {}),
        ...(obj.spec.tags !== undefined ? { tags: obj.spec.tags } : {}),
        ...(obj.spec.schema !== undefined ? { schema: obj.spec.schema } : {}),
        // The resource is the source of truth: a scope removed from it is removed from the store.
        scope: obj.spec.scope ?? null,
        meta: { ...(obj.spec.meta ?? {}), source: 'kubernetes', namespace, resource: obj.metadata.name, secret: secretName },
        data,
        owner: ownerOf(CREDENTIAL_KIND, obj),
        ...(wroteIt ? { adopt: true } : {}),
      });
    } catch (err) {
      if (isOwnedByOther(err)) return conflict(obj, err.message);
      ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
      if (err instanceof ApiError && (err.status === 400 || err.status === 422)) {
        const message = problemsOf(err).join('; ');
        await writeStatus(obj, {
          observedGeneration: generation,
          secretResourceVersion: secretRv,
          credentialName: credName,
          conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'Invalid', message }),
        });
        await ctx.events.record(obj, 'Warning', 'InvalidCredential', message);
        return;
      }
      await writeStatus(obj, {
        observedGeneration: generation,
        conditions: conditions(obj, {
          type: 'Ready', status: 'False',
          reason: isServerUnavailable(err) ? 'ServerUnavailable' : 'SyncFailed',
          message: (err as Error).message,
        }),
      });
      throw err;
    }

    if (st.credentialName && st.credentialName !== credName && !sharedName(obj, st.credentialName)) {
      try {
        await ctx.api.deleteCredential(st.credentialName, ownerRef(CREDENTIAL_KIND, obj));
      } catch (err) {
        if (!isOwnedByOther(err)) throw err;
      }
    }
    verified.set(key, Date.now());
    const rotated = st.credentialName === credName && st.secretResourceVersion !== undefined && st.secretResourceVersion !== secretRv;
    await writeStatus(obj, {
      observedGeneration: generation,
      credentialName: credName,
      secretResourceVersion: secretRv,
      lastSyncTime: nowIso(),
      conditions: conditions(obj, { type: 'Ready', status: 'True', reason: 'Synced', message: `stored as credential ${credName} from Secret ${secretName}` }),
    });
    await ctx.events.record(obj, 'Normal', rotated ? 'SecretRotated' : 'Synced', `Stored credential ${credName} from Secret ${secretName}`);
    log.info({ key, credential: credName, secret: secretName, fields: Object.keys(data).length }, 'credential synced');
  };
}
