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
 */
export class LeaseKeeper<K> {
  private readonly due = new Map<K, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly everyMs: number, private readonly beat: (key: K) => void, private readonly now: () => number = Date.now) {}

  /** Start (or restart) keeping `key`'s lease: its first beat is due `everyMs` from now. */
  hold(key: K): void {
    this.due.set(key, this.now() + this.everyMs);
    if (!this.timer) {
      this.timer = setInterval(() => this.check(), Math.max(1, Math.floor(this.everyMs / 4)));
      this.timer.unref();
    }
  }

  release(key: K): void {
    this.due.delete(key);
  }

  get size(): number {
    return this.due.size;
  }

  /** Stops the timer (shutdown); held keys are forgotten. */
  close(): void {
    this.due.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
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
