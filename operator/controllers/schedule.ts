/**
 * Schedule controller: a Schedule custom resource → the server schedule `k8s:<namespace>:<name>`
 * (source kubernetes), through PUT /api/schedules/{name}. The server owns the ticks; this
 * controller only declares the schedule and mirrors its next/last run into the status.
 *
 * - Every reconcile PUTs the spec (idempotent: the server keeps next_run when the timing did not
 *   change) and writes Ready=True with `scheduleName`, `nextRun`, `lastRun`, `lastExecutionId`.
 *   The resource is requeued at the next run (at most every `statusRefreshMs`) so the status follows.
 * - 400 from the server (bad cron, time zone…): Ready=False reason Invalid with the server's message;
 *   not retried until the spec changes. 409 (the name is declared by the API or a playbook):
 *   Ready=False reason NameConflict. Unreachable/5xx: Ready=False ServerUnavailable, retried.
 * - Deletion: the finalizer removes the server schedule, then itself.
 */
import type { ScheduleSpec } from '../../common/protocol.js';
import { ApiError, isServerUnavailable } from '../api.js';
import { setCondition, type Condition } from '../conditions.js';
import type { ReconcileResult } from '../controller.js';
import { patchCustomStatus } from '../kube.js';
import type { ScheduleResource, ScheduleResourceStatus } from '../types.js';
import { addFinalizer, hasFinalizer, nowIso, removeFinalizer, splitKey, type ControllerContext } from './common.js';

export const SCHEDULE_PLURAL = 'schedules';
const CONTROLLER = 'schedule';

export function scheduleNameOf(obj: ScheduleResource): string {
  return `k8s:${obj.metadata.namespace}:${obj.metadata.name}`;
}

export function scheduleSpecOf(obj: ScheduleResource): ScheduleSpec {
  const s = obj.spec;
  return {
    cron: s.cron, timezone: s.timezone ?? 'UTC', path: s.path, version: s.version ?? null, payload: s.payload ?? {},
    concurrency_policy: s.concurrencyPolicy ?? 'Allow', missed_runs: s.missedRuns ?? 'RunOnce',
    starting_deadline_seconds: s.startingDeadlineSeconds ?? null, suspend: s.suspend ?? false,
  };
}

export interface ScheduleLister {
  get(namespace: string, name: string): ScheduleResource | undefined;
}

export function scheduleReconciler(ctx: ControllerContext, cache: ScheduleLister, opts: { statusRefreshMs?: number } = {}) {
  const log = ctx.log.child({ controller: CONTROLLER });
  const refreshMs = opts.statusRefreshMs ?? 60_000;

  async function writeStatus(obj: ScheduleResource, status: ScheduleResourceStatus): Promise<void> {
    await patchCustomStatus(ctx.clients, SCHEDULE_PLURAL, obj.metadata.namespace, obj.metadata.name, status);
  }
  const conditions = (obj: ScheduleResource, ...updates: Array<Parameters<typeof setCondition>[1]>): Condition[] => {
    let list = obj.status?.conditions;
    for (const u of updates) list = setCondition(list, u, obj.metadata.generation);
    return list ?? [];
  };

  return async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = splitKey(key);
    let obj = cache.get(namespace, name);
    if (!obj) return;
    const serverName = scheduleNameOf(obj);
    if (obj.metadata.deletionTimestamp) {
      if (!hasFinalizer(obj)) return;
      await ctx.api.deleteSchedule(serverName);
      await ctx.events.record(obj, 'Normal', 'Removed', `Removed schedule ${serverName}`);
      await removeFinalizer(ctx, SCHEDULE_PLURAL, obj);
      return;
    }
    if (!hasFinalizer(obj)) obj = await addFinalizer(ctx, SCHEDULE_PLURAL, obj);
    const generation = obj.metadata.generation;
    let view;
    try {
      view = await ctx.api.putSchedule(serverName, scheduleSpecOf(obj));
    } catch (err) {
      ctx.metrics.serverErrors.inc({ controller: CONTROLLER });
      if (err instanceof ApiError && (err.status === 400 || err.status === 409)) {
        const reason = err.status === 400 ? 'Invalid' : 'NameConflict';
        if (obj.status?.observedGeneration !== generation || obj.status?.conditions?.find((c) => c.type === 'Ready')?.reason !== reason) {
          await writeStatus(obj, { observedGeneration: generation, scheduleName: serverName, conditions: conditions(obj, { type: 'Ready', status: 'False', reason, message: err.message }) });
          await ctx.events.record(obj, 'Warning', reason, err.message);
        }
        return;
      }
      await writeStatus(obj, {
        conditions: conditions(obj, { type: 'Ready', status: 'False', reason: isServerUnavailable(err) ? 'ServerUnavailable' : 'SyncFailed', message: (err as Error).message }),
      }).catch(() => undefined);
      throw err;
    }
    const status: ScheduleResourceStatus = {
      observedGeneration: generation, scheduleName: serverName, lastSyncTime: nowIso(),
      conditions: conditions(obj, { type: 'Ready', status: 'True', reason: view.suspend ? 'Suspended' : 'Scheduled', message: view.suspend ? 'suspended' : `next run ${view.next_run}` }),
    };
    if (view.next_run) status.nextRun = view.next_run.replace(/\.\d+Z$/, 'Z');
    if (view.last_run) status.lastRun = view.last_run.replace(/\.\d+Z$/, 'Z');
    if (view.last_execution_id) status.lastExecutionId = view.last_execution_id;
    await writeStatus(obj, status);
    if (obj.status?.observedGeneration !== generation) log.info({ key, schedule: serverName, next_run: view.next_run }, 'schedule declared');
    const untilNext = view.next_run && !view.suspend ? Date.parse(view.next_run) - Date.now() + 1000 : refreshMs;
    return { requeueAfterMs: Math.max(1000, Math.min(refreshMs, untilNext)) };
  };
}
