/**
 * Transactional outbox for command notifications. Queue rows are committed first; only then does
 * the server publish `{execution_id, queue_id, step, server_url}` and set `published_at`. A failed
 * publish (NATS down) is logged and left: `published_at` stays NULL and the sweeper publishes the
 * row later (`publishDue`), so nothing is lost. Duplicated notifications are harmless: a claim of a
 * row already taken answers 409/410 and the worker acks.
 */
import type { Broker } from '../../common/broker/types.js';
import type { CommandNotification } from '../../common/protocol.js';
import { DEFAULT_POOL } from '../../playbook/types.js';
import { metrics } from '../metrics.js';
import type { Db } from '../db.js';
import * as queue from '../store/queue.js';
import { type Logger } from '../../common/logger.js';
import { KeyedBatcher } from './keyed-batcher.js';

export interface OutboxItem {
  queue_id: string;
  execution_id: string;
  step: string;
  /** Worker pool: the notification goes to that pool's subject. */
  pool: string;
}

/** After a failed publish, requests stop publishing inline for this long (the sweeper keeps trying). */
const INLINE_PAUSE_MS = 5_000;

/** The default pool's notifications carry no `pool`: the message is as it was before pools. */
function notification(it: OutboxItem, serverUrl: string): CommandNotification {
  const n: CommandNotification = { execution_id: it.execution_id, queue_id: it.queue_id, step: it.step, server_url: serverUrl };
  if (it.pool && it.pool !== DEFAULT_POOL) n.pool = it.pool;
  return n;
}

/** Queue ids published by one request, and what settles its wait for their mark. */
interface Marks {
  ids: string[];
  done: () => void;
}

export class Outbox {
  private lastWarn = 0;
  private inlinePausedUntil = 0;
  /**
   * `published_at` marks of concurrent requests go in one UPDATE: while one runs, the next ones
   * wait and go together. Each mark was its own autocommit transaction, one per started execution
   * when many start at once (bench/executions.ts); a request still returns only once its rows are
   * marked, as before.
   */
  private readonly marks = new KeyedBatcher<Marks>((_key, batch) => this.mark(batch));

  constructor(
    private readonly db: Db,
    private readonly broker: Broker,
    private readonly serverUrl: string,
    private readonly log: Logger,
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
    if (ok.length > 0) await new Promise<void>((done) => this.marks.add('published', { ids: ok, done }));
    return ok;
  }

  private async mark(batch: Marks[]): Promise<void> {
    try {
      await queue.markPublished(this.db.pool, batch.flatMap((m) => m.ids));
    } catch (err) {
      this.log.warn({ err: String(err) }, 'could not record published_at; the sweeper may publish again (harmless)');
    } finally {
      for (const m of batch) m.done();
    }
  }

  /**
   * Sweeper part: publishes queued, due rows never published (delayed commands, failed inline
   * publishes) and — only while no notification waits for delivery in the broker, so a backlog
   * never multiplies its own notifications — rows published longer ago than `republishAfterMs` (a
   * notification lost, or dropped after max deliveries). Rows are locked with SKIP LOCKED while
   * published, so replicas sweeping together share the work.
   */
  async publishDue(opts: { republishAfterMs: number; batch: number }): Promise<number> {
    const quiet = await this.quietPools(opts.republishAfterMs);
    return this.db.tx(async (client) => {
      const { rows } = await client.query<OutboxItem>(
        `SELECT queue_id, execution_id, step, pool FROM queue
          WHERE status = 'queued' AND available_at <= now()
            AND (published_at IS NULL OR (pool = ANY($3::text[]) AND published_at < now() - make_interval(secs => $1)))
          ORDER BY available_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [opts.republishAfterMs / 1000, opts.batch, quiet]);
      const ok = await this.send(rows);
      await queue.markPublished(client, ok);
      if (ok.length === rows.length) this.inlinePausedUntil = 0; // the broker is back
      return ok.length;
    });
  }

  /**
   * The pools with stale rows whose consumer has no notification waiting: only there has a
   * notification been lost, so only there is republishing safe (a backlog is never multiplied).
   */
  private async quietPools(republishAfterMs: number): Promise<string[]> {
    const pools = await queue.stalePools(this.db.pool, republishAfterMs / 1000).catch(() => [] as string[]);
    const quiet: string[] = [];
    for (const pool of pools) if ((await this.broker.outstanding(pool).catch(() => null)) === 0) quiet.push(pool);
    return quiet;
  }

  /** Publishes in order until the first failure; returns the queue ids published. */
  private async send(items: OutboxItem[]): Promise<string[]> {
    const ok: string[] = [];
    for (const it of items) {
      try {
        await this.broker.publish(notification(it, this.serverUrl));
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
