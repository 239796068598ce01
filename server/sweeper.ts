/**
 * The sweeper: a loop every replica may run (no leader; work is shared with SKIP LOCKED and
 * re-checks under the execution lock). Each tick:
 *   1. publishes queued rows that are due and were never published (delayed commands, outbox
 *      rows whose publish failed) or whose last notification is older than `republishAfterMs`;
 *   2. reclaims expired leases: queued again while attempts < max_deliveries, else the call fails
 *      with `lease_expired` so the execution moves on;
 *   3. cancels children whose parent ended;
 *   4. heartbeats this server's runtime row;
 *   5. runs extra tasks (keychain/vars cleanup of the credentials module).
 * A failing part is logged and the next tick tries again.
 */
import type { PgExecutionService } from './executions/service.js';
import type { Outbox } from './executions/outbox.js';
import type { Db, RuntimeService } from './services.js';
import * as queue from './store/queue.js';
import { type Logger } from '../common/logger.js';

export interface SweeperOptions {
  db: Db;
  executions: PgExecutionService;
  outbox: Outbox;
  runtime?: RuntimeService;
  /** Runtime name of this server (heartbeat). */
  serverName?: string;
  logger: Logger;
  /** Tick period, default 1000 ms. */
  intervalMs?: number;
  /**
   * Republish a queued row whose notification is older than this, default 30 000 ms: about the
   * worker's lease, so a notification whose deliveries were spent waits no longer than a command
   * of a dead worker does.
   */
  republishAfterMs?: number;
  /** Rows per part per tick, default 200. */
  batch?: number;
  /** Heartbeat period of the runtime row, default 15 000 ms. */
  heartbeatMs?: number;
  /** Extra periodic tasks run after the core ones (errors logged), each at most every `intervalMs` (default 10 s). */
  tasks?: SweeperTask[];
}

export interface SweeperTask {
  name: string;
  run: () => Promise<unknown>;
  intervalMs?: number;
}

export interface SweepResult {
  published: number;
  requeued: number;
  failed: number;
  orphans: number;
}

export class Sweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;
  private closing = false;
  private lastHeartbeat = 0;
  private readonly lastTaskRun = new Map<string, number>();

  constructor(private readonly o: SweeperOptions) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.closing = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(ms: number) {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().then(() => undefined, () => undefined).finally(() => {
        this.running = null;
        this.schedule(this.o.intervalMs ?? 1000);
      });
    }, ms);
    this.timer.unref?.();
  }

  /** A failed part is a warning, except while stopping: then the database may be going away too. */
  private failed(fields: object, msg: string) {
    if (this.closing) this.o.logger.debug?.(fields, msg);
    else this.o.logger.warn(fields, msg);
  }

  /** One pass of every part (also called directly by tests). */
  async tick(): Promise<SweepResult> {
    const batch = this.o.batch ?? 200;
    const out: SweepResult = { published: 0, requeued: 0, failed: 0, orphans: 0 };
    try {
      const expired = await queue.expiredLeases(this.o.db.pool, batch);
      for (const e of expired) {
        if (this.closing) break;
        // One lease that cannot be reclaimed (its execution cannot be loaded or decided) must not
        // stop the rest: it heads the next pass's batch as well, so every later one would wait.
        try {
          const r = await this.o.executions.reclaimLease(e.queue_id, e.execution_id);
          if (r === 'requeued') out.requeued++;
          else if (r === 'failed') out.failed++;
        } catch (err) {
          this.failed({ queue_id: e.queue_id, execution_id: e.execution_id, err: String(err) }, 'sweeper: reclaiming an expired lease failed');
        }
      }
    } catch (err) {
      this.failed({ err: String(err) }, 'sweeper: reclaiming expired leases failed');
    }
    try {
      out.published = await this.o.outbox.publishDue({ republishAfterMs: this.o.republishAfterMs ?? 30_000, batch });
    } catch (err) {
      this.failed({ err: String(err) }, 'sweeper: publishing due commands failed');
    }
    try {
      out.orphans = await this.o.executions.cancelOrphans(batch);
    } catch (err) {
      this.failed({ err: String(err) }, 'sweeper: cancelling orphaned children failed');
    }
    if (this.o.runtime && this.o.serverName && Date.now() - this.lastHeartbeat >= (this.o.heartbeatMs ?? 15_000)) {
      try {
        await this.o.runtime.heartbeat('server', this.o.serverName);
        this.lastHeartbeat = Date.now();
      } catch (err) {
        this.failed({ err: String(err) }, 'sweeper: runtime heartbeat failed');
      }
    }
    for (const t of this.o.tasks ?? []) {
      if (Date.now() - (this.lastTaskRun.get(t.name) ?? 0) < (t.intervalMs ?? 10_000)) continue;
      this.lastTaskRun.set(t.name, Date.now());
      try {
        await t.run();
      } catch (err) {
        this.failed({ task: t.name, err: String(err) }, 'sweeper: task failed');
      }
    }
    return out;
  }
}
