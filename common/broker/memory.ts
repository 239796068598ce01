/**
 * In-process broker with the consumer semantics of the JetStream one (see types.ts): one shared
 * durable queue, explicit ack, nak with optional delay, ack-wait redelivery, max deliveries,
 * `working()`, retention by age. For `playflow dev` (server and worker in one process) and tests.
 */
import type { CommandNotification } from '../protocol.js';
import { consumeWithFetch, DEFAULT_BROKER_SETTINGS, type Broker, type BrokerMessage, type BrokerSettings, type ConsumeOptions, type ConsumerHandle, type FetchOptions, type MessageHandler } from './types.js';
import { type Logger, silentLogger } from '../logger.js';
import { DEFAULT_POOL } from '../../playbook/types.js';

interface Entry {
  seq: number;
  data: CommandNotification;
  publishedAt: number;
  deliveries: number;
  /** Ready for delivery at this time (ms); undefined while delivered and unacked. */
  readyAt?: number;
  ackTimer?: NodeJS.Timeout;
  /** Identifies the current delivery: settling a stale delivery does nothing. */
  token: number;
}

interface Waiter {
  max: number;
  resolve: (msgs: BrokerMessage[]) => void;
  timer: NodeJS.Timeout;
}

export class MemoryBroker implements Broker {
  readonly kind = 'memory' as const;
  readonly settings: BrokerSettings;
  private readonly log: Logger;
  private readonly entries = new Map<number, Entry>();
  private seq = 0;
  private tokens = 0;
  private waiters: Waiter[] = [];
  private wakeTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(settings: Partial<BrokerSettings> = {}, logger: Logger = silentLogger) {
    this.settings = { ...DEFAULT_BROKER_SETTINGS, ...settings };
    this.log = logger;
  }

  async ensure(): Promise<void> {
    if (this.closed) throw new Error('broker closed');
  }

  async publish(n: CommandNotification): Promise<void> {
    if (this.closed) throw new Error('broker closed');
    const e: Entry = { seq: ++this.seq, data: { ...n }, publishedAt: Date.now(), deliveries: 0, readyAt: Date.now(), token: 0 };
    this.entries.set(e.seq, e);
    this.dispatch();
  }

  fetch(opts: FetchOptions = {}): Promise<BrokerMessage[]> {
    if (this.closed) return Promise.reject(new Error('broker closed'));
    const max = Math.max(1, opts.max ?? 1);
    const now = this.take(max);
    if (now.length > 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const w: Waiter = {
        max,
        resolve,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          resolve([]);
        }, opts.expiresMs ?? 1000),
      };
      this.waiters.push(w);
      this.dispatch(); // arms the wake-up for a message that becomes ready (nak delay) while waiting
    });
  }

  consume(handler: MessageHandler, opts: ConsumeOptions = {}): ConsumerHandle {
    return consumeWithFetch((o) => this.fetch(o), handler, { ...opts, isClosed: () => this.closed });
  }

  async ping(): Promise<boolean> {
    return !this.closed;
  }

  async outstanding(pool?: string): Promise<number | null> {
    if (this.closed) return null;
    this.expire(Date.now());
    let waiting = 0;
    for (const e of this.entries.values()) {
      if (e.readyAt !== undefined && e.deliveries === 0 && (pool === undefined ? this.consumes(e.data.pool) : (e.data.pool ?? DEFAULT_POOL) === pool)) waiting++;
    }
    return waiting;
  }

  /** Whether this broker's consumer takes a notification of `pool` (`*`: every pool, as `playflow dev`'s one worker). */
  private consumes(pool: string | undefined): boolean {
    const mine = this.settings.pool ?? DEFAULT_POOL;
    return mine === '*' || (pool ?? DEFAULT_POOL) === mine;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.resolve([]);
    }
    this.waiters = [];
    for (const e of this.entries.values()) clearTimeout(e.ackTimer);
    clearTimeout(this.wakeTimer);
    this.entries.clear();
  }

  /** Messages stored and not yet acked or dropped (for tests and `dev` diagnostics). */
  pending(): number {
    return this.entries.size;
  }

  private expire(now: number) {
    for (const [seq, e] of this.entries) {
      if (now - e.publishedAt >= this.settings.maxAgeMs) {
        clearTimeout(e.ackTimer);
        this.entries.delete(seq);
      }
    }
  }

  /** Takes up to max ready messages (oldest first) and marks them delivered. */
  private take(max: number): BrokerMessage[] {
    const now = Date.now();
    this.expire(now);
    const out: BrokerMessage[] = [];
    for (const e of this.entries.values()) {
      if (out.length >= max) break;
      if (e.readyAt === undefined || e.readyAt > now || !this.consumes(e.data.pool)) continue;
      out.push(this.deliver(e));
    }
    return out;
  }

  private deliver(e: Entry): BrokerMessage {
    e.deliveries += 1;
    e.readyAt = undefined;
    const token = ++this.tokens;
    e.token = token;
    const live = () => this.entries.get(e.seq) === e && e.token === token;
    const armAckWait = () => {
      clearTimeout(e.ackTimer);
      e.ackTimer = setTimeout(() => {
        if (live()) this.redeliver(e, 0);
      }, this.settings.ackWaitMs);
      e.ackTimer.unref?.();
    };
    armAckWait();
    const deliveryCount = e.deliveries;
    return {
      data: { ...e.data },
      info: { deliveryCount, redeliveryCount: deliveryCount - 1, redelivered: deliveryCount > 1 },
      ack: () => {
        if (!live()) return;
        clearTimeout(e.ackTimer);
        this.entries.delete(e.seq);
      },
      nak: (delayMs?: number) => {
        if (live()) this.redeliver(e, delayMs ?? 0);
      },
      working: () => {
        if (live()) armAckWait();
      },
      term: () => {
        if (!live()) return;
        clearTimeout(e.ackTimer);
        this.entries.delete(e.seq);
      },
    };
  }

  private redeliver(e: Entry, delayMs: number) {
    clearTimeout(e.ackTimer);
    e.token = 0;
    if (e.deliveries >= this.settings.maxDeliver) {
      this.entries.delete(e.seq);
      this.log.warn({ queue_id: e.data.queue_id, deliveries: e.deliveries }, 'notification reached max deliveries; dropped (the sweeper republishes rows still queued)');
      return;
    }
    e.readyAt = Date.now() + Math.max(0, delayMs);
    this.dispatch();
  }

  /** Hands ready messages to waiting fetches; schedules itself for the next delayed one. */
  private dispatch() {
    if (this.closed) return;
    while (this.waiters.length > 0) {
      const w = this.waiters[0];
      const msgs = this.take(w.max);
      if (msgs.length === 0) break;
      this.waiters.shift();
      clearTimeout(w.timer);
      w.resolve(msgs);
    }
    clearTimeout(this.wakeTimer);
    if (this.waiters.length === 0) return;
    let next = Infinity;
    for (const e of this.entries.values()) if (e.readyAt !== undefined) next = Math.min(next, e.readyAt);
    if (next !== Infinity) {
      this.wakeTimer = setTimeout(() => this.dispatch(), Math.max(0, next - Date.now()));
      this.wakeTimer.unref?.();
    }
  }
}
