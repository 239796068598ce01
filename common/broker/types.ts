/**
 * Command notifications (spec "Command notifications on the broker", DESIGN.md §3). A notification
 * only says "queue row N of execution E is ready"; the worker claims the row from the server, so a
 * lost, late or duplicated notification never loses or duplicates work (the sweeper republishes).
 *
 * Two implementations with the same semantics: JetStream (production) and in-process (`playflow
 * dev`, unit tests). Consumer semantics, both: one shared durable work queue (every consumer of a
 * broker competes for messages); explicit ack; `nak(delay)` redelivers after the delay; a message
 * not acked within ackWait is redelivered; after maxDeliver deliveries it is dropped; `working()`
 * restarts the ack-wait clock.
 */
import type { CommandNotification } from '../protocol.js';
import { DEFAULT_POOL } from '../../playbook/types.js';

export interface BrokerNames {
  /** Default `FLOW_COMMANDS`. */
  stream: string;
  /** Default `flow.commands`. */
  subject: string;
  /** Durable pull consumer, default `worker-pool`. */
  consumer: string;
}

export interface BrokerSettings extends BrokerNames {
  /**
   * The worker pool this broker consumes, default `default`. Pool P's notifications are published
   * on `<subject>.P` (the default pool's on `<subject>` itself) and pulled by the durable consumer
   * `<consumer>-P` (`<consumer>` for the default pool); `*` (in-process broker only) consumes every pool.
   */
  pool?: string;
  /** Stream retention, default 3600 s. */
  maxAgeMs: number;
  /** Default 30 s. */
  ackWaitMs: number;
  /** Default 3. */
  maxDeliver: number;
}

export const DEFAULT_BROKER_SETTINGS: BrokerSettings = {
  stream: 'FLOW_COMMANDS',
  subject: 'flow.commands',
  consumer: 'worker-pool',
  maxAgeMs: 3_600_000,
  ackWaitMs: 30_000,
  maxDeliver: 3,
};

/** The subject a pool's notifications are published on. */
export function poolSubject(s: BrokerNames, pool: string | undefined): string {
  return !pool || pool === DEFAULT_POOL ? s.subject : `${s.subject}.${pool}`;
}

/** The durable consumer of a pool's workers. */
export function poolConsumer(s: BrokerNames, pool: string | undefined): string {
  return !pool || pool === DEFAULT_POOL ? s.consumer : `${s.consumer}-${pool}`;
}

export interface BrokerMessage {
  readonly data: CommandNotification;
  readonly info: {
    /** 1 on the first delivery. */
    deliveryCount: number;
    /** deliveryCount - 1. */
    redeliveryCount: number;
    redelivered: boolean;
  };
  ack(): void;
  /** Negative acknowledgement: redeliver (after delayMs when given) unless maxDeliver is reached. */
  nak(delayMs?: number): void;
  /** In progress: restart the ack-wait clock. */
  working(): void;
  /** Never redeliver this message. */
  term(): void;
}

export interface FetchOptions {
  /** Largest batch, default 1. */
  max?: number;
  /** How long to wait for the first message, default 1000 ms. */
  expiresMs?: number;
}

export interface ConsumeOptions {
  /** Messages handled at once, default 1. */
  concurrency?: number;
  /** Called when the handler throws (the message is then nak'ed). */
  onError?: (err: unknown, msg: BrokerMessage) => void;
  /**
   * Awaited before each pull: a consumer that cannot use messages now (its server unreachable)
   * leaves them to the others instead of spending their deliveries. Should resolve on stop.
   */
  ready?: () => Promise<void>;
}

export interface ConsumerHandle {
  /** Stops pulling; waits for handlers in flight. */
  stop(): Promise<void>;
  /** Resolves when the loop has ended (after stop, or when the broker closes). */
  readonly closed: Promise<void>;
}

export type MessageHandler = (msg: BrokerMessage) => Promise<void>;

export interface Broker {
  readonly kind: 'jetstream' | 'memory';
  readonly settings: BrokerSettings;
  /** Creates the stream and the durable consumer when missing (and reconciles their config). */
  ensure(): Promise<void>;
  /** Resolves once the broker stored the message; rejects when it could not. */
  publish(n: CommandNotification): Promise<void>;
  /** Pulls up to `max` messages, waiting up to `expiresMs` for them. */
  fetch(opts?: FetchOptions): Promise<BrokerMessage[]>;
  /**
   * Runs `handler` for each message until stopped. A message the handler leaves unsettled is
   * acked when the handler resolves and nak'ed when it throws.
   */
  consume(handler: MessageHandler, opts?: ConsumeOptions): ConsumerHandle;
  /** Liveness probe for /health. */
  ping(): Promise<boolean>;
  /**
   * Notifications waiting for a first delivery (JetStream `num_pending`), or null when unknown
   * (broker down). The sweeper republishes stale rows only when this is 0, so a backlog never
   * multiplies its own notifications. (A delivered notification is claimed at once, so a row still
   * queued with nothing waiting has lost its notification.) `pool`: that pool's consumer (default:
   * this broker's own pool).
   */
  outstanding(pool?: string): Promise<number | null>;
  close(): Promise<void>;
}

/** The execution core's logger (a pino-compatible subset): the broker logs through the same one. */

/** Wraps a raw message so that settling twice is a no-op and the consume loop knows it settled. */
export function settleOnce<M extends BrokerMessage>(m: M): M & { settled(): boolean } {
  let settled = false;
  const once = <A extends unknown[]>(f: (...a: A) => void) => (...a: A) => {
    if (settled) return;
    settled = true;
    f(...a);
  };
  return {
    data: m.data,
    info: m.info,
    ack: once(() => m.ack()),
    nak: once((d?: number) => m.nak(d)),
    term: once(() => m.term()),
    working: () => {
      if (!settled) m.working();
    },
    settled: () => settled,
  } as M & { settled(): boolean };
}

/**
 * The consume loop on top of `fetch`, shared by both implementations: `concurrency` slots, each
 * pulling ONE message at a time (a pull of one returns as soon as a message exists, so no handler
 * waits for a batch to fill) and settling what the handler left unsettled: ack when it resolved,
 * nak when it threw.
 *
 * While nothing comes, one free slot pulls for all: the others wait until a pull brings a
 * message, then every free slot pulls again, until pulls come back empty. An idle worker so
 * sends one pull a second instead of one per slot (each pull is a request to the broker, a
 * timer and garbage on both sides), and a burst still finds every free slot pulling.
 */
export function consumeWithFetch(
  fetch: (opts: FetchOptions) => Promise<BrokerMessage[]>,
  handler: MessageHandler,
  opts: ConsumeOptions & { isClosed: () => boolean; onFetchError?: (err: unknown) => void },
): ConsumerHandle {
  const concurrency = Math.max(1, opts.concurrency ?? 1);
  let stopping = false;
  const sleeps = new Set<() => void>();
  const pause = (ms: number) => new Promise<void>((r) => {
    const done = () => {
      clearTimeout(t);
      sleeps.delete(done);
      r();
    };
    const t = setTimeout(done, ms);
    sleeps.add(done);
  });
  /** Pulls under way, and whether the last one to end brought messages (every free slot pulls then). */
  let pulling = 0;
  let busy = false;
  const waiting = new Set<() => void>();
  const wakeAll = () => {
    for (const wake of [...waiting]) wake();
  };
  /** Resolves when this slot should pull: nobody else is pulling, or messages are coming. */
  const turn = () => new Promise<void>((r) => {
    if (busy || pulling === 0 || stopping) return r();
    const wake = () => {
      waiting.delete(wake);
      r();
    };
    waiting.add(wake);
  });

  const slot = async () => {
    while (!stopping && !opts.isClosed()) {
      if (opts.ready) {
        await opts.ready();
        if (stopping || opts.isClosed()) break;
      }
      await turn();
      if (!busy && pulling > 0) continue; // woken with others, and another took the turn
      if (stopping || opts.isClosed()) break;
      let batch: BrokerMessage[];
      pulling++;
      try {
        batch = await fetch({ max: 1, expiresMs: 1000 });
      } catch (err) {
        if (stopping || opts.isClosed()) break;
        opts.onFetchError?.(err);
        wakeAll(); // another slot takes the turn while this one pauses
        await pause(1000);
        continue;
      } finally {
        pulling--;
      }
      // an empty pull keeps the turn (this slot pulls again); messages wake every free slot
      busy = batch.length > 0;
      if (busy) wakeAll();
      for (const raw of batch) {
        if (stopping) {
          raw.nak();
          continue;
        }
        const m = settleOnce(raw);
        try {
          await handler(m);
          m.ack();
        } catch (err) {
          opts.onError?.(err, m);
          m.nak();
        }
      }
    }
    // a slot waiting for the turn would otherwise never see the broker closed
    wakeAll();
  };
  const closed = Promise.all(Array.from({ length: concurrency }, slot)).then(() => undefined);
  return {
    closed,
    async stop() {
      stopping = true;
      for (const wake of [...sleeps]) wake();
      wakeAll();
      await closed;
    },
  };
}
