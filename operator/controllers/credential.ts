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
 * - Deletion: the finalizer removes the credential (DELETE /api/credentials/{name}) then itself.
 */
import type { V1Secret } from '@kubernetes/client-node';
import type { Json, JsonObject } from '../../playbook/types.js';
import { ApiError, isServerUnavailable, problemsOf } from '../api.js';
import { getCondition, setCondition, type Condition, type ConditionInput } from '../conditions.js';
import type { ReconcileResult } from '../controller.js';
import { patchCustomStatus } from '../kube.js';
import type { CredentialResource, CredentialStatus } from '../types.js';
import {
  CONFLICT_RETRY_MS, addFinalizer, hasFinalizer, nowIso, owner, removeFinalizer, splitKey, type ControllerContext,
} from './common.js';

export const CREDENTIAL_PLURAL = 'credentials';
const CONTROLLER = 'credential';

export function credentialNameOf(obj: CredentialResource): string {
  return obj.spec?.name || obj.metadata.name;
}

export interface CredentialCaches {
  credentials: { get(ns: string, name: string): CredentialResource | undefined; list(): CredentialResource[] };
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

export function credentialReconciler(ctx: ControllerContext, caches: CredentialCaches) {
  const log = ctx.log.child({ controller: CONTROLLER });
  const verifyMs = ctx.verifyIntervalMs ?? 5 * 60_000;
  /** uid → when the store was last seen holding this credential. */
  const verified = new Map<string, number>();

  function conditions(obj: CredentialResource, ...updates: ConditionInput[]): Condition[] {
    let list = obj.status?.conditions;
    for (const u of updates) list = setCondition(list, u, obj.metadata.generation);
    return list ?? [];
  }

  async function writeStatus(obj: CredentialResource, status: CredentialStatus): Promise<void> {
    await patchCustomStatus(ctx.clients, CREDENTIAL_PLURAL, obj.metadata.namespace, obj.metadata.name, status);
  }

  function sharedName(obj: CredentialResource, name: string): boolean {
    return caches.credentials.list().some((o) => o.metadata.uid !== obj.metadata.uid && !o.metadata.deletionTimestamp && credentialNameOf(o) === name);
  }

  async function finalize(obj: CredentialResource): Promise<void> {
    if (!hasFinalizer(obj)) return;
    const name = obj.status?.credentialName;
    if (name && !sharedName(obj, name)) {
      try {
        await ctx.api.deleteCredential(name);
      } catch (err) {
        ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
        if (isServerUnavailable(err)) {
          await writeStatus(obj, {
            conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'ServerUnavailable', message: `deleting credential ${name}: ${(err as Error).message}` }),
          }).catch(() => undefined);
        }
        throw err;
      }
      await ctx.events.record(obj, 'Normal', 'Deleted', `Deleted credential ${name}`);
    }
    await removeFinalizer(ctx, CREDENTIAL_PLURAL, obj);
    log.info({ key: `${obj.metadata.namespace}/${obj.metadata.name}`, credential: name }, 'credential deleted; finalizer released');
  }

  return async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = splitKey(key);
    let obj = caches.credentials.get(namespace, name);
    if (!obj) return;
    if (obj.metadata.deletionTimestamp) return finalize(obj);
    if (!hasFinalizer(obj)) obj = await addFinalizer(ctx, CREDENTIAL_PLURAL, obj);

    const generation = obj.metadata.generation;
    const credName = credentialNameOf(obj);
    const secretName = obj.spec.secretRef?.name;
    const st = obj.status ?? {};
    const nameOwner = owner(caches.credentials.list().filter((o) => credentialNameOf(o) === credName));
    if (nameOwner && nameOwner.metadata.uid !== obj.metadata.uid) {
      const message = `credential name ${credName} is managed by Credential ${nameOwner.metadata.namespace}/${nameOwner.metadata.name}`;
      if (getCondition(st.conditions, 'Ready')?.message !== message) {
        await writeStatus(obj, { observedGeneration: generation, conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'NameConflict', message }) });
        await ctx.events.record(obj, 'Warning', 'NameConflict', message);
      }
      return { requeueAfterMs: CONFLICT_RETRY_MS };
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
      const uid = obj.metadata.uid ?? key;
      if (ready?.status !== 'True' || Date.now() - (verified.get(uid) ?? 0) < verifyMs) return;
      if (await ctx.api.credentialExists(credName)) {
        verified.set(uid, Date.now());
        return;
      }
      log.info({ key, credential: credName }, 'credential missing from the store; storing it again');
    }

    try {
      await ctx.api.upsertCredential({
        name: credName,
        type: obj.spec.type,
        ...(obj.spec.description !== undefined ? { description: obj.spec.description } : {}),
        ...(obj.spec.tags !== undefined ? { tags: obj.spec.tags } : {}),
        ...(obj.spec.schema !== undefined ? { schema: obj.spec.schema } : {}),
        meta: { ...(obj.spec.meta ?? {}), source: 'kubernetes', namespace, resource: obj.metadata.name, secret: secretName },
        data,
      });
    } catch (err) {
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
        conditions: conditions(obj, {
          type: 'Ready', status: 'False',
          reason: isServerUnavailable(err) ? 'ServerUnavailable' : 'SyncFailed',
          message: (err as Error).message,
        }),
      });
      throw err;
    }

    if (st.credentialName && st.credentialName !== credName && !sharedName(obj, st.credentialName)) {
      await ctx.api.deleteCredential(st.credentialName);
    }
    verified.set(obj.metadata.uid ?? key, Date.now());
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
