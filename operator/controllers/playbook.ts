/**
 * Playbook controller: a Playbook custom resource → a catalog entry, through
 * POST /api/catalog/playbook.
 *
 * - The playbook document is built from the spec (`apiVersion: playflow.io/v2`, `kind: Playbook`,
 *   `metadata.name/path/description/labels`, then workload, keychain, workbook, workflow) and
 *   rendered as YAML. Its sha256 (with the catalog path) is kept in `status.specHash`; the server
 *   is called only when that hash changes, so re-applying the same spec or a resync registers
 *   nothing (and the catalog itself also answers identical content with the existing version).
 * - Success: Ready=True and Valid=True, `catalogPath`, `catalogVersion`, `observedGeneration`.
 * - 422/400 from the server: Valid=False whose message lists every problem with its path,
 *   Ready=False; the hash is stored, so nothing is retried until the spec changes (no hot loop).
 * - Server unreachable/5xx: Ready=False reason ServerUnavailable, retried with backoff.
 * - Deletion: the finalizer `playflow.io/cleanup` removes the path from the catalog
 *   (DELETE /api/catalog/playbook/{path}) — unless another live Playbook resource registers the
 *   same path, or this one never registered — and is then removed.
 * - A path change registers the new path and removes the old one.
 */
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import type { JsonObject } from '../../playbook/types.js';
import { ApiError, isServerUnavailable, problemsOf } from '../api.js';
import { setCondition, type Condition } from '../conditions.js';
import type { ReconcileResult } from '../controller.js';
import { patchCustomStatus } from '../kube.js';
import type { PlaybookResource, PlaybookStatus } from '../types.js';
import {
  CONFLICT_RETRY_MS, addFinalizer, hasFinalizer, nowIso, owner, removeFinalizer, splitKey, type ControllerContext,
} from './common.js';

export const PLAYBOOK_PLURAL = 'playbooks';
const CONTROLLER = 'playbook';

export function catalogPathOf(obj: PlaybookResource): string {
  return obj.spec?.path || `${obj.metadata.namespace}/${obj.metadata.name}`;
}

/** The playbook document (as an author would write it) for a Playbook resource. */
export function playbookDocument(obj: PlaybookResource): JsonObject {
  const spec = obj.spec ?? ({} as PlaybookResource['spec']);
  const metadata: JsonObject = { name: spec.name || obj.metadata.name, path: catalogPathOf(obj) };
  if (spec.description) metadata.description = spec.description;
  if (spec.labels && Object.keys(spec.labels).length) metadata.labels = spec.labels;
  const doc: JsonObject = { apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata };
  if (spec.workload !== undefined) doc.workload = spec.workload;
  if (spec.keychain !== undefined) doc.keychain = spec.keychain;
  if (spec.workbook !== undefined) doc.workbook = spec.workbook;
  doc.workflow = spec.workflow ?? [];
  return doc;
}

export function playbookYaml(obj: PlaybookResource): string {
  return stringify(playbookDocument(obj), { lineWidth: 0 });
}

export function specHash(path: string, content: string): string {
  return createHash('sha256').update(path).update('\n').update(content).digest('hex');
}

export interface PlaybookLister {
  get(namespace: string, name: string): PlaybookResource | undefined;
  list(): PlaybookResource[];
}

export function playbookReconciler(ctx: ControllerContext, cache: PlaybookLister) {
  const log = ctx.log.child({ controller: CONTROLLER });
  const verifyMs = ctx.verifyIntervalMs ?? 5 * 60_000;
  /** uid → when the catalog was last seen holding this resource's version. */
  const verified = new Map<string, number>();

  async function writeStatus(obj: PlaybookResource, status: PlaybookStatus): Promise<void> {
    await patchCustomStatus(ctx.clients, PLAYBOOK_PLURAL, obj.metadata.namespace, obj.metadata.name, status);
  }

  function conditions(obj: PlaybookResource, ...updates: Array<Parameters<typeof setCondition>[1]>): Condition[] {
    let list = obj.status?.conditions;
    for (const u of updates) list = setCondition(list, u, obj.metadata.generation);
    return list ?? [];
  }

  async function finalize(obj: PlaybookResource): Promise<void> {
    if (!hasFinalizer(obj)) return;
    const path = obj.status?.catalogPath;
    const registered = path !== undefined && obj.status?.catalogVersion !== undefined;
    const sharedWith = registered
      ? cache.list().find((o) => o.metadata.uid !== obj.metadata.uid && !o.metadata.deletionTimestamp && catalogPathOf(o) === path)
      : undefined;
    if (registered && !sharedWith) {
      try {
        await ctx.api.deletePlaybook(path);
      } catch (err) {
        ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
        if (isServerUnavailable(err)) {
          await writeStatus(obj, {
            conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'ServerUnavailable', message: `removing ${path} from the catalog: ${(err as Error).message}` }),
          }).catch(() => undefined);
        }
        throw err;
      }
      await ctx.events.record(obj, 'Normal', 'Unregistered', `Removed ${path} from the catalog`);
    }
    await removeFinalizer(ctx, PLAYBOOK_PLURAL, obj);
    log.info({ key: `${obj.metadata.namespace}/${obj.metadata.name}`, path }, 'playbook removed from the catalog; finalizer released');
  }

  return async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = splitKey(key);
    let obj = cache.get(namespace, name);
    if (!obj) return;
    if (obj.metadata.deletionTimestamp) return finalize(obj);
    if (!hasFinalizer(obj)) obj = await addFinalizer(ctx, PLAYBOOK_PLURAL, obj);

    const generation = obj.metadata.generation;
    const path = catalogPathOf(obj);
    const content = playbookYaml(obj);
    const hash = specHash(path, content);
    const st = obj.status ?? {};

    const pathOwner = owner(cache.list().filter((o) => catalogPathOf(o) === path));
    if (pathOwner && pathOwner.metadata.uid !== obj.metadata.uid) {
      const message = `catalog path ${path} is managed by Playbook ${pathOwner.metadata.namespace}/${pathOwner.metadata.name}`;
      if (st.conditions?.find((c) => c.type === 'Ready')?.message !== message) {
        await writeStatus(obj, { observedGeneration: generation, conditions: conditions(obj, { type: 'Ready', status: 'False', reason: 'PathConflict', message }) });
        await ctx.events.record(obj, 'Warning', 'PathConflict', message);
      }
      return { requeueAfterMs: CONFLICT_RETRY_MS };
    }

    if (st.specHash === hash) {
      // Already registered (or already known invalid) for exactly this document: nothing to send,
      // except a periodic check that the catalog still holds our version (drift repair).
      const ready = st.conditions?.find((c) => c.type === 'Ready');
      const uid = obj.metadata.uid ?? key;
      let drifted = false;
      if (ready?.status === 'True' && st.catalogVersion !== undefined && Date.now() - (verified.get(uid) ?? 0) >= verifyMs) {
        const version = await ctx.api.playbookVersion(path);
        drifted = version !== st.catalogVersion;
        if (drifted) log.info({ key, path, expected: st.catalogVersion, found: version }, 'catalog entry changed outside the operator; registering again');
        else verified.set(uid, Date.now());
      }
      if (!drifted) {
        if (st.observedGeneration !== generation) {
          await writeStatus(obj, { observedGeneration: generation, conditions: conditions(obj) });
        }
        return;
      }
    }

    let result;
    try {
      result = await ctx.api.registerPlaybook(content, path);
    } catch (err) {
      ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
      if (err instanceof ApiError && (err.status === 422 || err.status === 400)) {
        const problems = problemsOf(err);
        const message = problems.join('; ');
        await writeStatus(obj, {
          observedGeneration: generation,
          specHash: hash,
          conditions: conditions(obj,
            { type: 'Valid', status: 'False', reason: 'Invalid', message },
            { type: 'Ready', status: 'False', reason: 'Invalid', message: `the playbook is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'})` }),
        });
        await ctx.events.record(obj, 'Warning', 'InvalidPlaybook', message);
        log.info({ key, problems: problems.length }, 'playbook rejected by the server; waiting for a spec change');
        return;
      }
      const unavailable = isServerUnavailable(err);
      await writeStatus(obj, {
        conditions: conditions(obj, {
          type: 'Ready', status: 'False',
          reason: unavailable ? 'ServerUnavailable' : 'RegistrationFailed',
          message: (err as Error).message,
        }),
      });
      throw err;
    }

    const oldPath = st.catalogPath;
    if (oldPath && oldPath !== path && st.catalogVersion !== undefined) {
      const shared = cache.list().some((o) => o.metadata.uid !== obj.metadata.uid && !o.metadata.deletionTimestamp && catalogPathOf(o) === oldPath);
      if (!shared) await ctx.api.deletePlaybook(oldPath);
    }

    verified.set(obj.metadata.uid ?? key, Date.now());
    const warnings = result.warnings?.length ?? 0;
    await writeStatus(obj, {
      observedGeneration: generation,
      catalogPath: result.path ?? path,
      catalogVersion: result.version,
      catalogId: String(result.catalog_id),
      specHash: hash,
      lastRegisteredTime: nowIso(),
      conditions: conditions(obj,
        { type: 'Valid', status: 'True', reason: 'Valid', message: warnings ? `${warnings} warning(s): ${result.warnings.map((w) => `${w.path}: ${w.message}`).join('; ')}` : '' },
        { type: 'Ready', status: 'True', reason: 'Registered', message: `registered as ${result.path ?? path} version ${result.version}` }),
    });
    if (result.created) {
      await ctx.events.record(obj, 'Normal', 'Registered', `Registered ${result.path ?? path} version ${result.version}`);
    }
    log.info({ key, path, version: result.version, created: result.created }, 'playbook registered');
  };
}
