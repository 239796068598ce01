/**
 * WorkerPool scaling arithmetic, pure so it is tested without clocks or clusters.
 *
 * Queue depth = `queued + leased` from GET /api/queue/stats: commands ready to be claimed plus
 * commands a worker is running. `delayed` commands (retry backoff, not yet due) are left out —
 * they need no worker until they become due, and counting them would keep replicas idle through
 * long backoffs; once due they show up as `queued`.
 *
 * desired = clamp(ceil(depth / targetPerReplica), min, max)
 *
 * Stabilisation follows the HorizontalPodAutoscaler's behaviour windows: every reconciliation
 * records its raw recommendation; the pool scales up to the *lowest* recommendation seen within
 * the scale-up window (0 s: at once) and down to the *highest* seen within the scale-down window,
 * so one quiet poll never removes workers. A controller that has not yet watched a pool for a
 * whole scale-down window (a restart, a new leader) counts the current replica count as a
 * recommendation, so it never scales down on less history than the window.
 */
export function clamp(n: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, n));
}

export function desiredFromDepth(depth: number, targetPerReplica: number, min: number, max: number): number {
  const target = targetPerReplica > 0 ? targetPerReplica : 1;
  return clamp(Math.ceil(Math.max(0, depth) / target), min, max);
}

interface Rec {
  at: number;
  replicas: number;
}

export class Stabilizer {
  private readonly recs = new Map<string, Rec[]>();
  private readonly firstSeen = new Map<string, number>();

  /**
   * Records `desired` for `key` and returns the replica count to apply, given the `current` one.
   */
  recommend(key: string, now: number, current: number, desired: number, upWindowMs: number, downWindowMs: number): number {
    if (!this.firstSeen.has(key)) this.firstSeen.set(key, now);
    const keep = Math.max(upWindowMs, downWindowMs);
    const list = (this.recs.get(key) ?? []).filter((r) => r.at > now - keep);
    list.push({ at: now, replicas: desired });
    this.recs.set(key, list);

    let up = desired;
    for (const r of list) if (r.at > now - upWindowMs) up = Math.min(up, r.replicas);
    let down = desired;
    for (const r of list) if (r.at > now - downWindowMs) down = Math.max(down, r.replicas);
    if (this.firstSeen.get(key)! > now - downWindowMs) down = Math.max(down, current);

    let result = current;
    if (result < up) result = up;
    if (result > down) result = down;
    return result;
  }

  /**
   * Records a count that was kept without a queue reading (stats unavailable): the scale-down
   * window restarts, so an outage never counts as a quiet period.
   */
  hold(key: string, now: number, replicas: number): void {
    if (!this.firstSeen.has(key)) this.firstSeen.set(key, now);
    const list = this.recs.get(key) ?? [];
    list.push({ at: now, replicas });
    this.recs.set(key, list);
  }

  forget(key: string): void {
    this.recs.delete(key);
    this.firstSeen.delete(key);
  }
}

/**
 * HPA-style tolerance: while the queue is within `tolerance` of what the current replicas are
 * sized for (|depth / (current × target) − 1| ≤ tolerance), keep the count — a depth that hovers
 * around a boundary does not flap the pool. The result is still clamped to [min, max].
 */
export function desiredWithTolerance(depth: number, targetPerReplica: number, min: number, max: number, current: number, tolerance: number): number {
  const target = targetPerReplica > 0 ? targetPerReplica : 1;
  if (current > 0 && tolerance > 0 && Math.abs(Math.max(0, depth) / (current * target) - 1) <= tolerance) return clamp(current, min, max);
  return desiredFromDepth(depth, target, min, max);
}

/** A rate policy, as the HPA's `behavior.scaleUp/scaleDown.policies[]`. */
export interface ScalingPolicy {
  type: 'Pods' | 'Percent';
  value: number;
  periodSeconds: number;
}

/** `selectPolicy` Max (default: the policy allowing the biggest change), Min, or Disabled. */
export interface ScalingRules {
  policies?: ScalingPolicy[];
  selectPolicy?: 'Max' | 'Min' | 'Disabled';
}

interface ScaleEvent {
  at: number;
  /** Replicas added (> 0) or removed (< 0). */
  change: number;
}

/**
 * Scale rate limits like the HorizontalPodAutoscaler's: each policy bounds the change over its
 * last `periodSeconds` — the count at the period's start is the current one minus the changes
 * made within it, and the policy allows that plus `value` pods (Pods) or plus `value` percent
 * (Percent, rounded up so a small pool can still grow; down: rounded down). selectPolicy Max takes
 * the policy allowing the biggest change, Min the smallest, Disabled forbids that direction. No
 * policies: no limit.
 */
export class RateLimiter {
  private readonly events = new Map<string, ScaleEvent[]>();

  limit(key: string, now: number, current: number, desired: number, up?: ScalingRules, down?: ScalingRules): number {
    // A limit never turns a scale-up into a scale-down (or back), as in the HPA.
    if (desired > current) return Math.max(current, Math.min(desired, this.bound(key, now, current, up, 1)));
    if (desired < current) return Math.min(current, Math.max(desired, this.bound(key, now, current, down, -1)));
    return desired;
  }

  /** Records a change that was applied, for the next periods. */
  record(key: string, now: number, from: number, to: number): void {
    if (from === to) return;
    // Longest period the CRD allows (1800 s): nothing older is ever read.
    const list = (this.events.get(key) ?? []).filter((e) => e.at > now - 1_800_000);
    list.push({ at: now, change: to - from });
    this.events.set(key, list);
  }

  forget(key: string): void {
    this.events.delete(key);
  }

  private bound(key: string, now: number, current: number, rules: ScalingRules | undefined, dir: 1 | -1): number {
    const policies = rules?.policies ?? [];
    if (rules?.selectPolicy === 'Disabled') return current;
    if (policies.length === 0) return dir > 0 ? Infinity : -Infinity;
    const events = this.events.get(key) ?? [];
    // Up: Max takes the highest limit; down: Max (the biggest change) takes the lowest.
    const biggest = (rules?.selectPolicy ?? 'Max') === 'Max';
    let result: number | undefined;
    for (const p of policies) {
      let added = 0;
      let removed = 0;
      for (const e of events) {
        if (e.at <= now - p.periodSeconds * 1000) continue;
        if (e.change > 0) added += e.change;
        else removed -= e.change;
      }
      const start = current - added + removed;
      const proposed = dir > 0
        ? (p.type === 'Pods' ? start + p.value : Math.ceil(start * (1 + p.value / 100)))
        : (p.type === 'Pods' ? start - p.value : Math.floor(start * (1 - p.value / 100)));
      const pickHigher = dir > 0 ? biggest : !biggest;
      result = result === undefined ? proposed : pickHigher ? Math.max(result, proposed) : Math.min(result, proposed);
    }
    return result!;
  }
}

/**
 * The pool that scales a StatefulSet when several target it: the oldest (creationTimestamp, then
 * name), the same answer on every reconcile and every replica of the operator. Pools being
 * deleted do not compete.
 */
export function owningPool<T extends { metadata: { name: string; creationTimestamp?: string | Date; deletionTimestamp?: string | Date } }>(pools: T[]): T | undefined {
  const ts = (p: T) => (p.metadata.creationTimestamp ? new Date(p.metadata.creationTimestamp).getTime() : 0);
  return pools.filter((p) => !p.metadata.deletionTimestamp)
    .sort((a, b) => ts(a) - ts(b) || a.metadata.name.localeCompare(b.metadata.name))[0];
}
