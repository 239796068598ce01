/**
 * JetStream broker: stream FLOW_COMMANDS (subject flow.commands, file storage, max age 3600 s) and
 * the durable pull consumer worker-pool (explicit ack, max deliver 3, ack wait 30 s); names and
 * limits are settings (DESIGN.md §3, §7).
 *
 * `ensure()` creates what is missing, leaves an identical configuration alone and updates a
 * different one with a logged warning (what NATS cannot change in place, e.g. storage, is logged as
 * an error and left as found). The connection is made lazily and retried: a server whose NATS is
 * down keeps running, `publish` rejects quickly, and the sweeper republishes once NATS is back.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy, DeliverPolicy, jetstream, JetStreamError, jetstreamManager, StorageType,
  type Consumer, type ConsumerConfig, type ConsumerInfo, type JetStreamClient, type JetStreamManager, type JsMsg, type StreamConfig, type StreamInfo,
} from '@nats-io/jetstream';
import type { CommandNotification } from '../protocol.js';
import { consumeWithFetch, DEFAULT_BROKER_SETTINGS, poolConsumer, poolSubject, type Broker, type BrokerMessage, type BrokerSettings, type ConsumeOptions, type ConsumerHandle, type FetchOptions, type MessageHandler } from './types.js';
import { type Logger, silentLogger } from '../logger.js';
import { DEFAULT_POOL } from '../../playbook/types.js';

const nanos = (ms: number) => ms * 1_000_000;
const millis = (ns: number) => Math.round(ns / 1_000_000);

export interface JetStreamBrokerOptions extends Partial<BrokerSettings> {
  /** nats://user:pass@host:port (credentials inside, as BROKER_URL). Several separated by commas. */
  url: string;
  /** Connection attempt and request timeout, default 2000 ms. */
  timeoutMs?: number;
  /** Shortest pause between two connection attempts after a failure, default 1000 ms. */
  reconnectBackoffMs?: number;
  logger?: Logger;
  /** Connection name shown by the NATS server. */
  name?: string;
}

export class JetStreamBroker implements Broker {
  readonly kind = 'jetstream' as const;
  readonly settings: BrokerSettings;
  private readonly opts: JetStreamBrokerOptions;
  private readonly log: Logger;
  private nc: NatsConnection | null = null;
  private js: JetStreamClient | null = null;
  private jsm: JetStreamManager | null = null;
  private connecting: Promise<NatsConnection> | null = null;
  private lastFailure = 0;
  private lastError: unknown = null;
  private ensured = false;
  private closed = false;
  private consumer: Consumer | null = null;

  constructor(opts: JetStreamBrokerOptions) {
    this.opts = opts;
    this.settings = {
      stream: opts.stream ?? DEFAULT_BROKER_SETTINGS.stream,
      subject: opts.subject ?? DEFAULT_BROKER_SETTINGS.subject,
      consumer: opts.consumer ?? DEFAULT_BROKER_SETTINGS.consumer,
      maxAgeMs: opts.maxAgeMs ?? DEFAULT_BROKER_SETTINGS.maxAgeMs,
      ackWaitMs: opts.ackWaitMs ?? DEFAULT_BROKER_SETTINGS.ackWaitMs,
      maxDeliver: opts.maxDeliver ?? DEFAULT_BROKER_SETTINGS.maxDeliver,
      pool: opts.pool ?? DEFAULT_POOL,
    };
    this.log = opts.logger ?? silentLogger;
  }

  private get timeout() {
    return this.opts.timeoutMs ?? 2000;
  }

  /** The live connection, connecting when needed (at most one attempt per backoff period). */
  private async connection(): Promise<NatsConnection> {
    if (this.closed) throw new Error('broker closed');
    if (this.nc && !this.nc.isClosed()) return this.nc;
    if (this.connecting) return this.connecting;
    const backoff = this.opts.reconnectBackoffMs ?? 1000;
    if (Date.now() - this.lastFailure < backoff) {
      throw new Error(`NATS unavailable: ${(this.lastError as Error)?.message ?? 'not connected'}`);
    }
    this.connecting = (async () => {
      try {
        const nc = await connect({
          servers: this.opts.url.split(',').map((s) => s.trim()),
          name: this.opts.name ?? 'playflow',
          timeout: this.timeout,
          reconnect: true,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 1000,
          // Without it every request, so every JetStream publish, makes an Error up front to keep
          // the caller's stack for a failure: about a fifth of a publish's CPU (44 of 206 µs,
          // measured here). Our failures are logged by message, never by that stack.
          noAsyncTraces: true,
        });
        this.nc = nc;
        this.js = jetstream(nc, { timeout: this.timeout });
        this.jsm = await jetstreamManager(nc, { timeout: this.timeout });
        void nc.closed().then((err) => {
          if (this.nc === nc) {
            this.nc = null;
            this.js = null;
            this.jsm = null;
            this.consumer = null;
            this.ensured = false;
          }
          if (err && !this.closed) this.log.warn({ err: String(err) }, 'NATS connection closed');
        });
        this.log.info({ server: nc.getServer() }, 'connected to NATS');
        return nc;
      } catch (err) {
        this.lastFailure = Date.now();
        this.lastError = err;
        throw err;
      } finally {
        this.connecting = null;
      }
    })();
    return this.connecting;
  }

  async ensure(): Promise<void> {
    await this.connection();
    const jsm = this.jsm!;
    const s = this.settings;
    // the default pool's subject and every other pool's `<subject>.<pool>`
    const subjects = [s.subject, `${s.subject}.>`];
    const consumer = poolConsumer(s, s.pool);
    const filter = poolSubject(s, s.pool);
    const want: Partial<StreamConfig> & { name: string } = { name: s.stream, subjects, storage: StorageType.File, max_age: nanos(s.maxAgeMs) };
    let info: StreamInfo | null = null;
    try {
      info = await jsm.streams.info(s.stream);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (!info) {
      try {
        await jsm.streams.add(want);
        this.log.info({ stream: s.stream }, 'stream created');
      } catch (err) {
        // another replica created it meanwhile
        info = await jsm.streams.info(s.stream).catch(() => { throw err; });
      }
    }
    if (info) {
      const c = info.config;
      if (c.storage !== StorageType.File) this.log.error({ stream: s.stream, storage: c.storage }, 'stream storage differs from the setting (file) and cannot be changed in place; left as found');
      const missing = subjects.filter((x) => !(c.subjects ?? []).includes(x));
      if (missing.length || c.max_age !== nanos(s.maxAgeMs)) {
        this.log.warn({ stream: s.stream, subjects: c.subjects, max_age_ms: millis(c.max_age) }, 'stream configuration differs from the settings; updating');
        await jsm.streams.update(s.stream, { ...c, subjects: [...(c.subjects ?? []), ...missing], max_age: nanos(s.maxAgeMs) });
      }
    }

    const wantConsumer: Partial<ConsumerConfig> = {
      durable_name: consumer,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_deliver: s.maxDeliver,
      ack_wait: nanos(s.ackWaitMs),
      filter_subject: filter,
    };
    let ci: ConsumerInfo | null = null;
    try {
      ci = await jsm.consumers.info(s.stream, consumer);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (!ci) {
      try {
        await jsm.consumers.add(s.stream, wantConsumer);
        this.log.info({ stream: s.stream, consumer }, 'consumer created');
      } catch (err) {
        ci = await jsm.consumers.info(s.stream, consumer).catch(() => { throw err; });
      }
    }
    if (ci) {
      const c = ci.config;
      if (c.ack_policy !== AckPolicy.Explicit) this.log.error({ consumer, ack_policy: c.ack_policy }, 'consumer ack policy is not explicit and cannot be changed in place; left as found');
      if (c.max_deliver !== s.maxDeliver || c.ack_wait !== nanos(s.ackWaitMs) || (c.filter_subject ?? '') !== filter) {
        this.log.warn({ consumer, max_deliver: c.max_deliver, ack_wait_ms: millis(c.ack_wait ?? 0), filter_subject: c.filter_subject }, 'consumer configuration differs from the settings; updating');
        await jsm.consumers.update(s.stream, consumer, { max_deliver: s.maxDeliver, ack_wait: nanos(s.ackWaitMs), filter_subject: filter });
      }
    }
    this.ensured = true;
  }

  async publish(n: CommandNotification): Promise<void> {
    await this.connection();
    if (!this.ensured) await this.ensure();
    const body = JSON.stringify(n.pool && n.pool !== DEFAULT_POOL
      ? { execution_id: n.execution_id, queue_id: n.queue_id, step: n.step, server_url: n.server_url, pool: n.pool }
      : { execution_id: n.execution_id, queue_id: n.queue_id, step: n.step, server_url: n.server_url });
    try {
      await this.js!.publish(poolSubject(this.settings, n.pool), body, { timeout: this.timeout });
    } catch (err) {
      this.ensured = false; // e.g. the stream was deleted: the next publish re-creates it
      throw err;
    }
  }

  async fetch(opts: FetchOptions = {}): Promise<BrokerMessage[]> {
    await this.connection();
    if (!this.ensured) await this.ensure();
    this.consumer ??= await this.js!.consumers.get(this.settings.stream, poolConsumer(this.settings, this.settings.pool));
    const consumer = this.consumer;
    const out: BrokerMessage[] = [];
    try {
      const iter = await consumer.fetch({ max_messages: Math.max(1, opts.max ?? 1), expires: Math.max(1000, opts.expiresMs ?? 1000) });
      for await (const m of iter) out.push(this.wrap(m));
      return out;
    } catch (err) {
      // The client ends a fetch that saw two of the server's idle heartbeats go missing: the pull's
      // own timeout, as the client treats it. Seen when this process's event loop was busy (its
      // timers ran before the socket was read), so it is no fault: the fetch ends with what it got,
      // whose messages would otherwise wait out the ack wait, and a lost consumer shows on the next.
      if (isHeartbeatsMissed(err)) return out;
      this.consumer = null; // looked up again next time (consumer or stream recreated)
      this.ensured = false;
      throw err;
    }
  }

  consume(handler: MessageHandler, opts: ConsumeOptions = {}): ConsumerHandle {
    return consumeWithFetch((o) => this.fetch(o), handler, {
      ...opts,
      isClosed: () => this.closed,
      onFetchError: (err) => this.log.warn({ err: String(err) }, 'pull from NATS failed; retrying'),
    });
  }

  async outstanding(pool?: string): Promise<number | null> {
    try {
      await this.connection();
      if (!this.ensured) await this.ensure();
      const ci = await this.jsm!.consumers.info(this.settings.stream, poolConsumer(this.settings, pool ?? this.settings.pool));
      return ci.num_pending;
    } catch (err) {
      return isNotFound(err) ? 0 : null; // no consumer yet: the pool's first worker creates it and reads the stream from its start
    }
  }

  async ping(): Promise<boolean> {
    try {
      const nc = await this.connection();
      await nc.flush();
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const nc = this.nc;
    this.nc = null;
    if (nc && !nc.isClosed()) await nc.drain().catch(() => nc.close());
  }

  private wrap(m: JsMsg): BrokerMessage {
    let data: CommandNotification;
    try {
      data = m.json<CommandNotification>();
    } catch {
      data = { execution_id: '', queue_id: '', step: '', server_url: '' };
    }
    const deliveryCount = m.info.deliveryCount;
    return {
      data,
      info: { deliveryCount, redeliveryCount: deliveryCount - 1, redelivered: m.redelivered },
      ack: () => m.ack(),
      nak: (delayMs?: number) => m.nak(delayMs),
      working: () => m.working(),
      term: () => m.term(),
    };
  }
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; code?: number; message?: string; api_error?: { err_code?: number } };
  return e?.name === 'StreamNotFoundError' || e?.name === 'ConsumerNotFoundError' || e?.code === 404 ||
    /not found/i.test(e?.message ?? '');
}

/** The JetStream client's end of a fetch whose idle heartbeats went missing (consumer.ts, `heartbeats missed`). */
function isHeartbeatsMissed(err: unknown): boolean {
  return err instanceof JetStreamError && err.message === 'heartbeats missed';
}
