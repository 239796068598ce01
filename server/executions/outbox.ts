/**
 * Transactional outbox for command notifications. Queue rows are committed first; only then does
 * the server publish `{execution_id, queue_id, step, server_url}` and set `published_at`. A failed
 * publish (NATS down) is logged and left: `published_at` stays NULL and the sweeper publishes the
 * row later (`publishDue`), so nothing is lost. Duplicated notifications are harmless: a claim of a
 * row already taken answers 409/410 and the worker acks.
 */
import type { Broker } from '../broker/types.js';
import { metrics } from '../metrics.js';
import type { Db } from '../services.js';
import * as queue from '../store/queue.js';
import type { CoreLogger } from './types.js';

export interface OutboxItem {
  queue_id: string;
  execution_id: string;
  step: string;
}

/** After a failed publish, requests stop publishing inline for this long (the sweeper keeps trying). */
const INLINE_PAUSE_MS = 5_000;

export class Outbox {
  private lastWarn = 0;
  private inlinePausedUntil = 0;

  constructor(
    private readonly db: Db,
    private readonly broker: Broker,
    private readonly serverUrl: string,
    private readonly log: CoreLogger,
  ) {}

  /**
   * Publishes after commit; never throws. Returns the queue ids published. While the broker is
   * known to be down, requests do not wait on it: rows are left to the sweeper.
   */
  async publish(items: OutboxItem[]): Promise<string[]> {
    if (Date.now() < this.inlinePausedUntil) return [];
    const ok = await this.send(items);
    // the broker is down: requests stop waiting on it and the sweeper publishes the rest
    if (ok.length < items.length) this.inlinePausedUntil = Date.now() + INLINE_PAUSE_MS;
    if (ok.length > 0) {
      try {
        await queue.markPublished(this.db.pool, ok);
      } catch (err) {
        this.log.warn({ err: String(err) }, 'could not record published_at; the sweeper may publish again (harmless)');
      }
    }
    return ok;
  }

  /**
   * Sweeper part: publishes queued, due rows never published (delayed commands, failed inline
   * publishes) and — only while no notification waits for delivery in the broker, so a backlog
   * never multiplies its own notifications — rows published longer ago than `republishAfterMs` (a
   * notification lost, or dropped after max deliveries). Rows are locked with SKIP LOCKED while
   * published, so replicas sweeping together share the work.
   */
  async publishDue(opts: { republishAfterMs: number; batch: number }): Promise<number> {
    const outstanding = await this.broker.outstanding().catch(() => null);
    const stale = outstanding === 0;
    return this.db.tx(async (client) => {
      const { rows } = await client.query<OutboxItem>(
        `SELECT queue_id, execution_id, step FROM queue
          WHERE status = 'queued' AND available_at <= now()
            AND (published_at IS NULL OR ($3 AND published_at < now() - make_interval(secs => $1)))
          ORDER BY available_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [opts.republishAfterMs / 1000, opts.batch, stale]);
      const ok = await this.send(rows);
      await queue.markPublished(client, ok);
      if (ok.length === rows.length) this.inlinePausedUntil = 0; // the broker is back
      return ok.length;
    });
  }

  /** Publishes in order until the first failure; returns the queue ids published. */
  private async send(items: OutboxItem[]): Promise<string[]> {
    const ok: string[] = [];
    for (const it of items) {
      try {
        await this.broker.publish({ execution_id: it.execution_id, queue_id: it.queue_id, step: it.step, server_url: this.serverUrl });
        ok.push(it.queue_id);
        metrics.notificationsPublished.inc({ result: 'ok' });
      } catch (err) {
        metrics.notificationsPublished.inc({ result: 'error' });
        this.warn(err, items.length - ok.length);
        break;
      }
    }
    return ok;
  }

  private warn(err: unknown, pending: number) {
    // one line per 10 s at most while the broker is down
    if (Date.now() - this.lastWarn < 10_000) return;
    this.lastWarn = Date.now();
    this.log.warn({ err: String((err as Error)?.message ?? err), pending }, 'publishing command notifications failed; the sweeper will republish');
  }
}
