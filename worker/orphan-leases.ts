/**
 * Leases this worker may hold without knowing it.
 *
 * A claim that got no answer (the connection dropped, the server restarted, a 5xx) may still have
 * been committed: the server then holds the command for this worker, which never runs it, and the
 * notification's redelivery meets 409 `already_claimed` wherever it lands. Nobody would run the
 * command before its lease ran out (20 s by default). So the worker asks the server to end such a
 * lease (`POST /api/v2/commands/{queue_id}/release`), which queues the command again at once if,
 * and only if, this worker id holds it; with no lease of ours it changes nothing.
 *
 * An attempt that cannot reach the server is tried again with backoff until the lease would have
 * run out anyway. `busy(queueId)` is asked before each attempt: a claim of the same command under
 * way in this worker (a redelivery) or a call running it makes the release wrong, so it is dropped.
 * A claim that the server commits after its client gave up (past the 30 s request timeout) is not
 * covered: that lease runs out as before.
 */
import type { Logger } from '../common/logger.js';

export type ReleaseOutcome = 'released' | 'none' | 'dropped' | 'failed';

export interface OrphanLeasesOptions {
  /** Ends the lease if this worker holds it; resolves to the number of leases ended (0 or 1). */
  release(queueId: string): Promise<number>;
  /** Whether this worker is claiming or running the command now (then its lease is not an orphan). */
  busy(queueId: string): boolean;
  /** Whether an error of `release` is worth another attempt (the server not reached, 5xx). */
  transient(err: unknown): boolean;
  /** How long to keep trying: the lease asked for, after which it runs out by itself. */
  maxAgeMs: number;
  log: Logger;
  onOutcome?: (outcome: ReleaseOutcome) => void;
}

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 4000;

export class OrphanLeases {
  private readonly pending = new Map<string, { since: number; timer: NodeJS.Timeout }>();
  private stopped = false;

  constructor(private readonly o: OrphanLeasesOptions) {}

  /** The claim of `queueId` went unanswered, or was refused as ours while nothing here holds it. */
  add(queueId: string): void {
    if (this.stopped || this.pending.has(queueId)) return;
    const since = Date.now();
    this.pending.set(queueId, { since, timer: this.schedule(queueId, 0, FIRST_RETRY_MS) });
  }

  /** A new claim of `queueId` starts: it decides, not an earlier attempt's release. */
  forget(queueId: string): void {
    const p = this.pending.get(queueId);
    if (!p) return;
    clearTimeout(p.timer);
    this.pending.delete(queueId);
  }

  has(queueId: string): boolean {
    return this.pending.has(queueId);
  }

  stop(): void {
    this.stopped = true;
    for (const p of this.pending.values()) clearTimeout(p.timer);
    this.pending.clear();
  }

  private schedule(queueId: string, delayMs: number, nextDelayMs: number): NodeJS.Timeout {
    return setTimeout(() => void this.attempt(queueId, nextDelayMs), delayMs).unref();
  }

  private async attempt(queueId: string, nextDelayMs: number): Promise<void> {
    const p = this.pending.get(queueId);
    if (!p || this.stopped) return;
    if (this.o.busy(queueId)) return this.finish(queueId, p, 'dropped');
    try {
      // the command it queues again may be announced, and claimed here, before this answer arrives
      const released = await this.o.release(queueId);
      if (released > 0) this.o.log.info({ queue_id: queueId }, 'ended a lease whose claim went unanswered; the command is queued again');
      this.finish(queueId, p, released > 0 ? 'released' : 'none');
    } catch (err) {
      if (this.pending.get(queueId) !== p) return this.finish(queueId, p, 'dropped'); // a new claim decides
      if (!this.o.transient(err) || Date.now() - p.since + nextDelayMs >= this.o.maxAgeMs) {
        this.o.log.warn({ queue_id: queueId, err: (err as Error)?.message }, 'could not end a lease whose claim went unanswered; it runs out by itself');
        return this.finish(queueId, p, 'failed');
      }
      p.timer = this.schedule(queueId, nextDelayMs, Math.min(MAX_RETRY_MS, nextDelayMs * 2));
    }
  }

  private finish(queueId: string, p: { since: number }, outcome: ReleaseOutcome): void {
    if (this.pending.get(queueId) === p) this.pending.delete(queueId);
    this.o.onOutcome?.(outcome);
  }
}
