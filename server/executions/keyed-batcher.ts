/**
 * A keyed group commit: items of one key wait while that key's batch runs, then go together in the
 * next one (at most `max` a batch); different keys run independently. The batcher knows nothing of
 * what an item is: it is handed the function that applies a batch, which settles every item itself
 * and never throws (graphile-worker's batch jobs work the same way).
 */

/** Most items of one key applied in one batch. */
export const MAX_BATCH = 256;

export class KeyedBatcher<I> {
  /** Per key with a batch running: the items waiting for the next one. */
  private readonly waiting = new Map<string, I[]>();

  constructor(private readonly apply: (key: string, batch: I[]) => Promise<void>, private readonly max = MAX_BATCH) {}

  /** A batch of `key` is running (its items were accepted, so what the key names exists). */
  busy(key: string): boolean {
    return this.waiting.has(key);
  }

  add(key: string, item: I): void {
    const queue = this.waiting.get(key);
    if (queue) {
      queue.push(item);
      return;
    }
    const fresh = [item];
    this.waiting.set(key, fresh);
    void this.drain(key, fresh);
  }

  private async drain(key: string, queue: I[]): Promise<void> {
    try {
      while (queue.length) await this.apply(key, queue.splice(0, this.max));
    } finally {
      this.waiting.delete(key); // no await since the queue emptied: nothing was added in between
    }
  }
}
