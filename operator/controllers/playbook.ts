/**
 * Playbook controller: a Playbook custom resource → a catalog entry, through
 * POST /api/catalog/playbook.
 *
 * - The playbook document is built from the spec (`apiVersion: playflow.io/v2`, `kind: Playbook`,
 *   `metadata.name/path/description/labels`, then workload, keychain, workbook, workflow) and
 *   rendered as YAML. Its sha256 (with the catalog path) is kept in `status.specHash`; the server
 *   is called only when that hash changes, so re-applying the same spec or a resync registers
 *   nothing. The hash is remembered per generation, so a resync of an unchanged object renders no
 *   YAML at all.
 * - Ownership: registration claims the path for this resource (`owner` = Playbook/ns/name/uid,
 *   recorded by the server). Another resource claiming the same path — seen in the informer's
 *   path index, or refused by the server with 409 `owned_by_other` (another cluster, an API
 *   client) — gets Ready=False reason Conflict naming the owner, and Stalled=True.
 * - Success: Ready=True and Valid=True, `catalogPath`, `catalogVersion`, `observedGeneration`.
 * - 422/400 from the server: Valid=False whose message lists every problem with its path,
 *   Ready=False reason Invalid, Stalled=True; the hash is stored, so nothing is retried until the
 *   spec changes (no hot loop).
 * - Server unreachable/5xx: Ready=False reason ServerUnavailable, retried with backoff.
 * - Drift: the periodic sweep (drift.ts) asks the catalog for versions only and marks the keys
 *   whose version moved; their next reconcile registers again.
 * - Upgrade adoption: an operator from before ownership registered without an owner. When this
 *   resource's status says it registered the path (`catalogPath`, `catalogVersion`), registration
 *   sends that version as `adopt_version`: the server lets it claim the path if it has no owner
 *   and is still at that version — an entry someone else wrote since (a newer version) or that
 *   another resource owns stays protected (Conflict). The drift sweep marks ownerless entries, so
 *   in-sync Playbooks are adopted within one verify interval after the upgrade.
 * - Deletion (finalizer `playflow.io/cleanup`): `deletionPolicy: Retain` (default) keeps the
 *   entry; `Delete` removes the path — owner-guarded, so never what another resource or an API
 *   client holds. When the server stays unreachable past the finalizer timeout, or the resource
 *   carries `playflow.io/force-delete: "true"`, the finalizer is released with a Warning event.
 * - A path change registers the new path and removes the old one (owner-guarded).
 */
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import type { JsonObject } from '../../playbook/types.js';
import { ApiError, isServerUnavailable, problemsOf } from '../api.js';
import { setCondition, withStalled, type Condition, type ConditionInput } from '../conditions.js';
import type { ReconcileResult } from '../controller.js';
import { patchCustomStatus } from '../kube.js';
import type { PlaybookResource, PlaybookStatus } from '../types.js';
import {
  CONFLICT_RETRY_MS, addFinalizer, deletionPolicyOf, finalizerExpired, forceDeleteRequested, hasFinalizer, isOwnedByOther, nowIso,
  owner, ownerOf, ownerRef, removeFinalizer, splitKey, type ControllerContext,
} from './common.js';

export const PLAYBOOK_PLURAL = 'playbooks';
export const PLAYBOOK_KIND = 'Playbook';
/** Informer index: catalog path → the Playbooks claiming it. */
export const PATH_INDEX = 'catalogPath';
const CONTROLLER = 'playbook';

export function catalogPathOf(obj: PlaybookResource): string {
  return obj.spec?.path || `${obj.metadata.namespace}/${obj.metadata.name}`;
}

export const playbookPathIndex = (obj: PlaybookResource): string[] => [catalogPathOf(obj)];

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
  // after the workflow, where an author writes them; the server validates them on registration
  if (spec.pool !== undefined) doc.pool = spec.pool;
  if (spec.concurrency !== undefined) doc.concurrency = spec.concurrency;
  if (spec.schedules !== undefined) doc.schedules = spec.schedules;
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
  /** Playbooks whose catalog path is `path` (the PATH_INDEX). */
  byPath(path: string): PlaybookResource[];
}

export interface PlaybookReconciler {
  (key: string): Promise<ReconcileResult | void>;
  /** Marks a key whose catalog entry no longer holds its version (the drift sweep). */
  markDrifted(key: string): void;
}

export function playbookReconciler(ctx: ControllerContext, cache: PlaybookLister): PlaybookReconciler {
  const log = ctx.log.child({ controller: CONTROLLER });
  /** key → the spec hash of one generation of one object (uid), so resyncs render no YAML. */
  const hashes = new Map<string, { uid?: string; generation?: number; hash: string }>();
  /** Keys the drift sweep found out of step with the catalog. */
  const drifted = new Set<string>();

  async function writeStatus(obj: PlaybookResource, status: PlaybookStatus): Promise<void> {
    await patchCustomStatus(ctx.clients, PLAYBOOK_PLURAL, obj.metadata.namespace, obj.metadata.name, status);
  }

  function conditions(obj: PlaybookResource, stalled: { reason: string; message: string } | undefined, ...updates: ConditionInput[]): Condition[] {
    let list = obj.status?.conditions;
    for (const u of updates) list = setCondition(list, u, obj.metadata.generation);
    return withStalled(list, stalled, obj.metadata.generation);
  }

  function hashOf(key: string, obj: PlaybookResource): string {
    const memo = hashes.get(key);
    if (memo && memo.uid === obj.metadata.uid && memo.generation === obj.metadata.generation && obj.metadata.generation !== undefined) return memo.hash;
    const hash = specHash(catalogPathOf(obj), playbookYaml(obj));
    hashes.set(key, { uid: obj.metadata.uid, generation: obj.metadata.generation, hash });
    return hash;
  }

  function sharedWithOther(obj: PlaybookResource, path: string): boolean {
    return cache.byPath(path).some((o) => o.metadata.uid !== obj.metadata.uid && !o.metadata.deletionTimestamp);
  }

  async function conflict(obj: PlaybookResource, message: string): Promise<ReconcileResult> {
    if (obj.status?.conditions?.find((c) => c.type === 'Ready')?.message !== message) {
      await writeStatus(obj, {
        observedGeneration: obj.metadata.generation,
        conditions: conditions(obj, { reason: 'Conflict', message }, { type: 'Ready', status: 'False', reason: 'Conflict', message }),
      });
      await ctx.events.record(obj, 'Warning', 'Conflict', message);
    }
    return { requeueAfterMs: CONFLICT_RETRY_MS };
  }

  async function release(obj: PlaybookResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    await ctx.events.record(obj, type, reason, message);
    await removeFinalizer(ctx, PLAYBOOK_PLURAL, obj);
    log.info({ key: `${obj.metadata.namespace}/${obj.metadata.name}`, reason }, message);
  }

  async function finalize(obj: PlaybookResource): Promise<void> {
    if (!hasFinalizer(obj)) return;
    const path = obj.status?.catalogPath;
    const registered = path !== undefined && obj.status?.catalogVersion !== undefined;
    if (!registered) return release(obj, 'Normal', 'Released', 'Nothing was registered; finalizer released');
    if (forceDeleteRequested(obj)) {
      return release(obj, 'Warning', 'ForceDeleted', `Finalizer released at once (annotation playflow.io/force-delete); ${path} was left in the catalog`);
    }
    if (deletionPolicyOf(obj) === 'Retain') {
      return release(obj, 'Normal', 'Retained', `Kept ${path} in the catalog (deletionPolicy Retain)`);
    }
    if (sharedWithOther(obj, path)) return release(obj, 'Normal', 'Released', `${path} is claimed by another Playbook; left in the catalog`);
    try {
      await ctx.api.deletePlaybook(path, ownerRef(PLAYBOOK_KIND, obj));
    } catch (err) {
      if (isOwnedByOther(err)) return release(obj, 'Warning', 'NotOwned', `${path} was left in the catalog: ${err.message}`);
      ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
      if (!isServerUnavailable(err)) throw err;
      if (finalizerExpired(ctx, obj)) {
        return release(obj, 'Warning', 'CleanupAbandoned',
          `The Playflow server stayed unreachable past the finalizer timeout; ${path} may remain in the catalog (${(err as Error).message})`);
      }
      await writeStatus(obj, {
        conditions: conditions(obj, undefined, { type: 'Ready', status: 'False', reason: 'ServerUnavailable', message: `removing ${path} from the catalog: ${(err as Error).message}` }),
      }).catch(() => undefined);
      throw err;
    }
    return release(obj, 'Normal', 'Unregistered', `Removed ${path} from the catalog`);
  }

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = splitKey(key);
    let obj = cache.get(namespace, name);
    if (!obj) {
      hashes.delete(key);
      drifted.delete(key);
      return;
    }
    if (obj.metadata.deletionTimestamp) return finalize(obj);
    if (!hasFinalizer(obj)) obj = await addFinalizer(ctx, PLAYBOOK_PLURAL, obj);

    const generation = obj.metadata.generation;
    const path = catalogPathOf(obj);
    const hash = hashOf(key, obj);
    const st = obj.status ?? {};

    const pathOwner = owner(cache.byPath(path));
    if (pathOwner && pathOwner.metadata.uid !== obj.metadata.uid) {
      return conflict(obj, `catalog path ${path} is owned by Playbook ${pathOwner.metadata.namespace}/${pathOwner.metadata.name}`);
    }

    if (st.specHash === hash && !drifted.has(key)) {
      // Already registered (or already known invalid) for exactly this document: nothing to send.
      if (st.observedGeneration !== generation) {
        await writeStatus(obj, { observedGeneration: generation, conditions: (st.conditions ?? []).map((c) => ({ ...c, observedGeneration: generation })) });
      }
      return;
    }
    if (drifted.has(key)) log.info({ key, path, expected: st.catalogVersion }, 'catalog entry changed outside the operator; registering again');

    const content = playbookYaml(obj);
    let result;
    try {
      const wrote = st.catalogPath === path && st.catalogVersion !== undefined ? st.catalogVersion : undefined;
      result = await ctx.api.registerPlaybook(content, path, ownerOf(PLAYBOOK_KIND, obj), wrote);
    } catch (err) {
      if (isOwnedByOther(err)) return conflict(obj, err.message);
      ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
      if (err instanceof ApiError && (err.status === 422 || err.status === 400)) {
        drifted.delete(key);
        const problems = problemsOf(err);
        const message = problems.join('; ');
        const summary = `the playbook is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'})`;
        await writeStatus(obj, {
          observedGeneration: generation,
          specHash: hash,
          conditions: conditions(obj, { reason: 'Invalid', message: summary },
            { type: 'Valid', status: 'False', reason: 'Invalid', message },
            { type: 'Ready', status: 'False', reason: 'Invalid', message: summary }),
        });
        await ctx.events.record(obj, 'Warning', 'InvalidPlaybook', message);
        log.info({ key, problems: problems.length }, 'playbook rejected by the server; waiting for a spec change');
        return;
      }
      const unavailable = isServerUnavailable(err);
      await writeStatus(obj, {
        observedGeneration: generation,
        conditions: conditions(obj, undefined, {
          type: 'Ready', status: 'False',
          reason: unavailable ? 'ServerUnavailable' : 'RegistrationFailed',
          message: (err as Error).message,
        }),
      });
      throw err;
    }
    drifted.delete(key);

    const oldPath = st.catalogPath;
    if (oldPath && oldPath !== path && st.catalogVersion !== undefined && !sharedWithOther(obj, oldPath)) {
      try {
        await ctx.api.deletePlaybook(oldPath, ownerRef(PLAYBOOK_KIND, obj));
      } catch (err) {
        if (!isOwnedByOther(err)) throw err;
      }
    }

    const warnings = result.warnings?.length ?? 0;
    await writeStatus(obj, {
      observedGeneration: generation,
      catalogPath: result.path ?? path,
      catalogVersion: result.version,
      catalogId: String(result.catalog_id),
      specHash: hash,
      lastRegisteredTime: nowIso(),
      conditions: conditions(obj, undefined,
        { type: 'Valid', status: 'True', reason: 'Valid', message: warnings ? `${warnings} warning(s): ${result.warnings.map((w) => `${w.path}: ${w.message}`).join('; ')}` : '' },
        { type: 'Ready', status: 'True', reason: 'Registered', message: `registered as ${result.path ?? path} version ${result.version}` }),
    });
    if (result.created) {
      await ctx.events.record(obj, 'Normal', 'Registered', `Registered ${result.path ?? path} version ${result.version}`);
    }
    log.info({ key, path, version: result.version, created: result.created }, 'playbook registered');
  }

  return Object.assign(reconcile, { markDrifted: (key: string) => drifted.add(key) });
}
