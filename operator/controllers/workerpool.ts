/**
 * WorkerPool controller: scales a worker StatefulSet (through its `/scale` subresource) from the
 * server's queue depth, read with GET /api/queue/stats every `pollIntervalSeconds`.
 *
 * - depth = queued + leased (see scaling.ts for why delayed is left out);
 *   desired = clamp(ceil(depth / targetQueueDepthPerReplica), minReplicas, maxReplicas),
 *   stabilised: up at once (scale-up window 0 by default), down only after the scale-down window.
 * - Within `tolerance` (default 0.1, the HPA's) of what the current replicas are sized for, the
 *   count is kept; `scaleUp`/`scaleDown` rate policies (the HPA's behavior) bound each change.
 * - Stats cannot be read: the replica count is kept — after `fallbackFailureThreshold` failed
 *   reads in a row (default 3, KEDA's failureThreshold) set to `fallbackReplicas` when given — a
 *   Warning Event QueueReadFailed is recorded and Ready=False reason ServerUnavailable.
 * - Two pools targeting one StatefulSet would fight over its count: the oldest scales it, the
 *   others get Ready=False + Stalled=True reason Conflict naming it, and touch nothing.
 * - `spec.replicas` (written by `kubectl scale workerpool …` through the WorkerPool's own scale
 *   subresource) pins the count, clamped to min/max, until it is removed.
 * - Every change records an Event ScaledUp/ScaledDown; status carries replicas, desiredReplicas,
 *   queueDepth, lastScaleTime and conditions (Ready, ScalingLimited). Status is written only when it
 *   changes, and status writes do not enqueue the pool (the informer filters on generation), so
 *   polling never feeds on itself.
 */
import type { V1Scale } from '@kubernetes/client-node';
import type { QueueStats } from '../../common/protocol.js';
import { setCondition, withStalled, type Condition, type ConditionInput } from '../conditions.js';
import type { ReconcileResult } from '../controller.js';
import { isNotFound, mergePatchOptions, messageOf, patchCustomStatus } from '../kube.js';
import { clamp, desiredWithTolerance, owningPool, RateLimiter, Stabilizer } from '../scaling.js';
import type { WorkerPoolResource, WorkerPoolStatus } from '../types.js';
import { nowIso, splitKey, type ControllerContext } from './common.js';
import { DEFAULT_POOL } from '../../playbook/types.js';

export const WORKERPOOL_PLURAL = 'workerpools';
const CONTROLLER = 'workerpool';

export interface WorkerPoolDefaults {
  pollIntervalMs: number;
  targetQueueDepthPerReplica: number;
  scaleDownStabilizationSeconds: number;
  tolerance: number;
  fallbackFailureThreshold: number;
}

export const DEFAULT_WORKERPOOL: WorkerPoolDefaults = {
  pollIntervalMs: 15_000,
  targetQueueDepthPerReplica: 20,
  scaleDownStabilizationSeconds: 300,
  tolerance: 0.1,
  fallbackFailureThreshold: 3,
};

/** Index of pools by the StatefulSet they target (`namespace/statefulSetName`). */
export const STATEFULSET_INDEX = 'statefulSet';
export const statefulSetKey = (o: WorkerPoolResource): string[] => (o.spec?.statefulSetName ? [`${o.metadata.namespace}/${o.spec.statefulSetName}`] : []);

export function workerPoolReconciler(
  ctx: ControllerContext,
  cache: { get(ns: string, name: string): WorkerPoolResource | undefined; byStatefulSet?(key: string): WorkerPoolResource[] },
  defaults: WorkerPoolDefaults = DEFAULT_WORKERPOOL,
  stabilizer = new Stabilizer(),
  rates = new RateLimiter(),
) {
  const log = ctx.log.child({ controller: CONTROLLER });
  /** Failed queue reads in a row, by pool key. */
  const failures = new Map<string, number>();
  const forget = (key: string) => {
    stabilizer.forget(key);
    rates.forget(key);
    failures.delete(key);
  };

  return async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = splitKey(key);
    const obj = cache.get(namespace, name);
    if (!obj || obj.metadata.deletionTimestamp) {
      forget(key);
      ctx.metrics.poolDesired.remove({ namespace, name });
      ctx.metrics.poolQueueDepth.remove({ namespace, name });
      return;
    }
    const spec = obj.spec;
    const poll = spec.pollIntervalSeconds ? spec.pollIntervalSeconds * 1000 : defaults.pollIntervalMs;
    const st = obj.status ?? {};
    let conditions: Condition[] | undefined = st.conditions;
    const cond = (c: ConditionInput) => {
      conditions = setCondition(conditions, c, obj.metadata.generation);
    };
    const stsName = spec.statefulSetName;

    const owner = owningPool(cache.byStatefulSet?.(`${namespace}/${stsName}`) ?? [obj]);
    if (owner && owner.metadata.name !== name) {
      forget(key);
      const message = `StatefulSet ${namespace}/${stsName} is scaled by WorkerPool ${namespace}/${owner.metadata.name} (the oldest pool targeting it); this pool changes nothing until that one is deleted or targets another StatefulSet`;
      const was = st.conditions?.find((c) => c.type === 'Ready');
      cond({ type: 'Ready', status: 'False', reason: 'Conflict', message });
      conditions = withStalled(conditions, { reason: 'Conflict', message }, obj.metadata.generation);
      if (was?.reason !== 'Conflict' || was.message !== message) await ctx.events.record(obj, 'Warning', 'Conflict', message);
      ctx.metrics.poolDesired.remove({ namespace, name });
      ctx.metrics.poolQueueDepth.remove({ namespace, name });
      await writeStatus(obj, st, { observedGeneration: obj.metadata.generation, conditions });
      return { requeueAfterMs: poll };
    }
    conditions = withStalled(conditions, undefined);

    let scale: V1Scale;
    try {
      scale = await ctx.clients.apps.readNamespacedStatefulSetScale({ namespace, name: stsName });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      cond({ type: 'Ready', status: 'False', reason: 'StatefulSetNotFound', message: `StatefulSet ${namespace}/${stsName} not found` });
      await writeStatus(obj, st, { observedGeneration: obj.metadata.generation, conditions });
      return { requeueAfterMs: poll };
    }
    const current = scale.spec?.replicas ?? 0;
    const min = spec.minReplicas ?? 1;
    const max = Math.max(min, spec.maxReplicas);
    const target = spec.targetQueueDepthPerReplica ?? defaults.targetQueueDepthPerReplica;

    let desired: number;
    let stats: QueueStats | undefined;
    let depth: number | undefined;
    if (spec.replicas !== undefined && spec.replicas !== null) {
      desired = clamp(spec.replicas, min, max);
      cond({ type: 'Ready', status: 'True', reason: 'ManualReplicas', message: `spec.replicas pins the pool at ${desired}` });
    } else {
      try {
        stats = await ctx.api.queueStats(spec.pool ?? DEFAULT_POOL);
      } catch (err) {
        ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
        const failed = (failures.get(key) ?? 0) + 1;
        failures.set(key, failed);
        const threshold = spec.fallbackFailureThreshold ?? defaults.fallbackFailureThreshold;
        const fallback = spec.fallbackReplicas;
        const useFallback = fallback !== undefined && fallback !== null && failed >= threshold;
        desired = useFallback ? clamp(fallback, min, max) : current;
        stabilizer.hold(key, Date.now(), desired);
        const pending = fallback !== undefined && fallback !== null && !useFallback ? ` (fallbackReplicas after ${threshold} failed reads in a row, ${failed} so far)` : '';
        const message = `cannot read queue stats: ${(err as Error).message}; ${useFallback ? `using fallbackReplicas ${desired}` : `keeping ${current} replicas${pending}`}`;
        cond({ type: 'Ready', status: 'False', reason: 'ServerUnavailable', message });
        await ctx.events.record(obj, 'Warning', 'QueueReadFailed', message);
        log.warn({ key, err: (err as Error).message }, 'queue stats unavailable');
      }
      if (stats) {
        failures.delete(key);
        depth = stats.queued + stats.leased;
        const raw = desiredWithTolerance(depth, target, min, max, current, spec.tolerance ?? defaults.tolerance);
        const upMs = (spec.scaleUpStabilizationSeconds ?? 0) * 1000;
        const downMs = (spec.scaleDownStabilizationSeconds ?? defaults.scaleDownStabilizationSeconds) * 1000;
        const now = Date.now();
        // Rate policies bound the stabilised recommendation, as the HPA applies its behavior.
        desired = rates.limit(key, now, current, stabilizer.recommend(key, now, current, raw, upMs, downMs), spec.scaleUp, spec.scaleDown);
        const limited = raw !== Math.ceil(depth / (target > 0 ? target : 1));
        cond({ type: 'Ready', status: 'True', reason: 'QueueRead', message: '' });
        cond(limited
          ? { type: 'ScalingLimited', status: 'True', reason: raw === max ? 'TooManyReplicas' : 'TooFewReplicas', message: `the queue asks for ${Math.ceil(depth / (target > 0 ? target : 1))} replicas; bounded to [${min}, ${max}]` }
          : { type: 'ScalingLimited', status: 'False', reason: 'DesiredWithinRange', message: '' });
      } else desired ??= current;
    }

    let lastScaleTime = st.lastScaleTime;
    if (desired !== current) {
      await ctx.clients.apps.patchNamespacedStatefulSetScale(
        { namespace, name: stsName, body: { spec: { replicas: desired } } }, mergePatchOptions,
      );
      rates.record(key, Date.now(), current, desired);
      lastScaleTime = nowIso();
      const why = depth !== undefined
        ? `queue depth ${depth} (queued ${stats!.queued}, leased ${stats!.leased}), target ${target} per replica`
        : spec.replicas !== undefined ? 'spec.replicas' : 'queue stats unavailable (fallbackReplicas)';
      const up = desired > current;
      await ctx.events.record(obj, 'Normal', up ? 'ScaledUp' : 'ScaledDown', `Scaled StatefulSet ${stsName} from ${current} to ${desired}: ${why}`);
      log.info({ key, from: current, to: desired, depth }, up ? 'scaled up' : 'scaled down');
    }
    ctx.metrics.poolDesired.set({ namespace, name }, desired);
    if (depth !== undefined) ctx.metrics.poolQueueDepth.set({ namespace, name }, depth);

    await writeStatus(obj, st, {
      observedGeneration: obj.metadata.generation,
      // Observed replicas (the StatefulSet's status); they catch up with desiredReplicas as pods start.
      replicas: scale.status?.replicas ?? current,
      desiredReplicas: desired,
      ...(depth !== undefined ? { queueDepth: depth, queued: stats!.queued, leased: stats!.leased } : {}),
      queueReadFailures: failures.get(key) ?? 0,
      ...(lastScaleTime ? { lastScaleTime } : {}),
      ...(scale.status?.selector ? { selector: scale.status.selector } : {}),
      conditions,
    });
    return { requeueAfterMs: poll };
  };

  async function writeStatus(obj: WorkerPoolResource, old: WorkerPoolStatus, next: WorkerPoolStatus): Promise<void> {
    const merged = { ...old, ...next };
    if (JSON.stringify(merged) === JSON.stringify(old)) return;
    try {
      await patchCustomStatus(ctx.clients, WORKERPOOL_PLURAL, obj.metadata.namespace, obj.metadata.name, next);
    } catch (err) {
      log.warn({ key: `${obj.metadata.namespace}/${obj.metadata.name}`, err: messageOf(err) }, 'could not write WorkerPool status');
      throw err;
    }
  }
}
