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
