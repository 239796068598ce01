/**
 * The leases of the commands in flight, kept alive by ONE timer: each held command is beaten
 * `everyMs` after it was taken (or last beaten), checked a few times per interval. A timer per
 * command (set as the call started, cleared as it ended, set again while its result was reported)
 * cost every step two timers made and two cleared, on a path where a step's whole worker side is
 * a fraction of a millisecond; the leases are 3 heartbeats long, so a beat up to a quarter interval
 * late loses nothing.
 *
 * The timer stops by itself once a check finds nothing held, so a worker between commands (a
 * chain's next step arrives within a millisecond) does not stop and start it at every step.
 *
 * A beat that failed (the server or its database briefly away) is tried again at the next check,
 * then backing off to the interval: waiting a whole interval lost the lease after three failures
 * in a row, while the server's sweeper, retrying every second, reclaims it at once.
 */
export class LeaseKeeper<K> {
  private readonly due = new Map<K, number>();
  /** Beats failed in a row, per key (none: the last one went through). */
  private readonly failures = new Map<K, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly everyMs: number, private readonly beat: (key: K) => void, private readonly now: () => number = Date.now) {}

  /** Start (or restart) keeping `key`'s lease: its first beat is due `everyMs` from now. */
  hold(key: K): void {
    this.due.set(key, this.now() + this.everyMs);
    this.failures.delete(key);
    if (!this.timer) {
      this.timer = setInterval(() => this.check(), this.quarter());
      this.timer.unref();
    }
  }

  release(key: K): void {
    this.due.delete(key);
    this.failures.delete(key);
  }

  /** The beat of `key` went through: the next one is an interval after it. */
  beaten(key: K): void {
    this.failures.delete(key);
  }

  /** The beat of `key` failed: try again a quarter interval from now, doubling up to the interval. */
  failed(key: K): void {
    if (!this.due.has(key)) return; // released meanwhile
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    this.due.set(key, this.now() + Math.min(this.everyMs, this.quarter() * 2 ** (n - 1)));
  }

  get size(): number {
    return this.due.size;
  }

  /** Stops the timer (shutdown); held keys are forgotten. */
  close(): void {
    this.due.clear();
    this.failures.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private quarter(): number {
    return Math.max(1, Math.floor(this.everyMs / 4));
  }

  private check(): void {
    if (this.due.size === 0) {
      clearInterval(this.timer!);
      this.timer = null;
      return;
    }
    const now = this.now();
    for (const [key, at] of this.due) {
      if (at > now) continue;
      this.due.set(key, now + this.everyMs);
      this.beat(key);
    }
  }
}
