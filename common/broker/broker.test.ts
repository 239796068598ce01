/**
 * One suite, two brokers: the in-process broker must behave like JetStream (real NATS, unique
 * stream/subject/consumer names per run).
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { BROKER_URL, uniqueBrokerNames } from '../../test/helpers/nats.js';
import { consumeWithFetch, JetStreamBroker, MemoryBroker, type Broker, type BrokerMessage, type BrokerSettings } from './index.js';
import { type Logger } from '../logger.js';

const created: Array<{ stream: string }> = [];

afterAll(async () => {
  const nc = await connect({ servers: BROKER_URL });
  const jsm = await jetstreamManager(nc);
  for (const c of created) await jsm.streams.delete(c.stream).catch(() => {});
  await nc.close();
});

const makers: Array<[string, (s?: Partial<BrokerSettings>, logger?: Logger) => Broker]> = [
  ['memory', (s, logger) => new MemoryBroker({ ...uniqueBrokerNames('M'), ...s }, logger)],
  ['jetstream', (s, logger) => {
    const names = { ...uniqueBrokerNames('J'), ...s };
    created.push(names);
    return new JetStreamBroker({ url: BROKER_URL, ...names, logger });
  }],
];

const note = (i: number) => ({ execution_id: '1', queue_id: String(i), step: 's', server_url: 'http://x' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(makers)('%s broker', (_kind, make) => {
  const open: Broker[] = [];
  const fresh = async (s?: Partial<BrokerSettings>, logger?: Logger) => {
    const b = make(s, logger);
    open.push(b);
    await b.ensure();
    return b;
  };
  afterEach(async () => {
    for (const b of open.splice(0)) await b.close();
  });

  it('delivers what was published, once when acked', async () => {
    const b = await fresh();
    await b.publish(note(1));
    await b.publish(note(2));
    const got = await b.fetch({ max: 5, expiresMs: 1000 });
    expect(got.map((m) => m.data.queue_id)).toEqual(['1', '2']);
    expect(got[0].data).toEqual(note(1));
    expect(got[0].info).toMatchObject({ deliveryCount: 1, redeliveryCount: 0, redelivered: false });
    got.forEach((m) => m.ack());
    expect(await b.fetch({ max: 5, expiresMs: 1000 })).toEqual([]);
  });

  it('redelivers after nak until max deliveries, then stops', async () => {
    const b = await fresh({ maxDeliver: 3 });
    await b.publish(note(7));
    const counts: number[] = [];
    for (let i = 0; i < 4; i++) {
      const [m] = await b.fetch({ max: 1, expiresMs: 1500 });
      if (!m) break;
      counts.push(m.info.deliveryCount);
      m.nak();
    }
    expect(counts).toEqual([1, 2, 3]);
  });

  it('honours a nak delay', async () => {
    const b = await fresh();
    await b.publish(note(3));
    const [m] = await b.fetch({ max: 1 });
    const t0 = Date.now();
    m.nak(1200);
    const [again] = await b.fetch({ max: 1, expiresMs: 4000 });
    expect(again.data.queue_id).toBe('3');
    expect(again.info.redelivered).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
    again.ack();
  });

  it('redelivers a message not acked within ack wait; working() extends it', async () => {
    const b = await fresh({ ackWaitMs: 1500 });
    await b.publish(note(4));
    await b.publish(note(5));
    const got = await b.fetch({ max: 2 });
    expect(got).toHaveLength(2);
    const [keep, forget] = got[0].data.queue_id === '4' ? got : [got[1], got[0]];
    // keep one alive beyond ack wait with working(), let the other lapse
    const beat = setInterval(() => keep.working(), 500);
    try {
      await sleep(2200);
      // a pull may end empty on a loaded machine (its heartbeats missed): pull again
      const redelivered: BrokerMessage[] = [];
      for (let i = 0; i < 3 && redelivered.length === 0; i++) redelivered.push(...await b.fetch({ max: 2, expiresMs: 1500 }));
      expect(redelivered.map((m) => m.data.queue_id)).toEqual([forget.data.queue_id]);
      expect(redelivered[0].info.deliveryCount).toBe(2);
      redelivered[0].ack();
    } finally {
      clearInterval(beat);
    }
    keep.ack();
  });

  it('consume(): handlers share the work, a throwing handler gets the message again', async () => {
    const b = await fresh();
    const seen: string[] = [];
    let failedOnce = false;
    const h = b.consume(async (m) => {
      if (m.data.queue_id === '12' && !failedOnce) {
        failedOnce = true;
        throw new Error('tool crashed');
      }
      seen.push(`${m.data.queue_id}#${m.info.deliveryCount}`);
    }, { concurrency: 3, onError: () => {} });
    for (let i = 10; i < 15; i++) await b.publish(note(i));
    const deadline = Date.now() + 10_000;
    while (seen.length < 5 && Date.now() < deadline) await sleep(50);
    await h.stop();
    expect(seen.sort()).toEqual(['10#1', '11#1', '12#2', '13#1', '14#1']);
    expect(await b.fetch({ max: 5, expiresMs: 1000 })).toEqual([]);
  });

  it('competing fetchers never get the same message', async () => {
    const b = await fresh();
    for (let i = 20; i < 30; i++) await b.publish(note(i));
    const [a, c] = await Promise.all([b.fetch({ max: 5 }), b.fetch({ max: 5 })]);
    const ids = [...a, ...c].map((m) => m.data.queue_id);
    expect(new Set(ids).size).toBe(ids.length);
    [...a, ...c].forEach((m) => m.ack());
    const rest = await b.fetch({ max: 10, expiresMs: 1000 });
    rest.forEach((m) => m.ack());
    expect(new Set([...ids, ...rest.map((m) => m.data.queue_id)]).size).toBe(10);
  });

  it('outstanding() counts notifications waiting for a first delivery', async () => {
    const b = await fresh();
    expect(await b.outstanding()).toBe(0);
    await b.publish(note(50));
    await b.publish(note(51));
    expect(await b.outstanding()).toBe(2);
    const [m] = await b.fetch({ max: 1 });
    expect(await b.outstanding()).toBe(1);
    m.ack();
    const rest = await b.fetch({ max: 5, expiresMs: 1000 });
    rest.forEach((x) => x.ack());
    expect(await b.outstanding()).toBe(0);
  });

  it('ensure() is idempotent', async () => {
    const b = await fresh();
    await b.ensure();
    await b.ensure();
    await b.publish(note(40));
    const [m] = await b.fetch();
    m.ack();
    expect(m.data.queue_id).toBe('40');
  });
});

describe('jetstream configuration', () => {
  it('updates a consumer whose configuration differs, with a warning', async () => {
    const names = uniqueBrokerNames('C');
    created.push(names);
    const first = new JetStreamBroker({ url: BROKER_URL, ...names, maxDeliver: 5, ackWaitMs: 10_000 });
    await first.ensure();
    await first.close();
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, error() {}, warn: (_o: object, msg?: string) => warnings.push(msg ?? '') };
    const second = new JetStreamBroker({ url: BROKER_URL, ...names, logger });
    await second.ensure();
    await second.close();
    expect(warnings.some((w) => w.includes('consumer configuration differs'))).toBe(true);
    const nc = await connect({ servers: BROKER_URL });
    const jsm = await jetstreamManager(nc);
    const ci = await jsm.consumers.info(names.stream, names.consumer);
    const si = await jsm.streams.info(names.stream);
    await nc.close();
    expect(ci.config.max_deliver).toBe(3);
    expect(ci.config.ack_wait).toBe(30_000 * 1_000_000);
    expect(ci.config.ack_policy).toBe('explicit');
    expect(si.config.storage).toBe('file');
    expect(si.config.max_age).toBe(3600 * 1e9);
    // same config again: nothing to say
    warnings.length = 0;
    const third = new JetStreamBroker({ url: BROKER_URL, ...names, logger });
    await third.ensure();
    await third.close();
    expect(warnings).toEqual([]);
  });

  it('publish fails quickly (no throw at construction) when NATS is unreachable', async () => {
    const b = new JetStreamBroker({ url: 'nats://127.0.0.1:1', ...uniqueBrokerNames('D'), timeoutMs: 500 });
    await expect(b.publish(note(1))).rejects.toThrow();
    await expect(b.publish(note(1))).rejects.toThrow(); // within backoff: fails without a new attempt
    expect(await b.ping()).toBe(false);
    await b.close();
  });
});

describe('jetstream recovery', () => {
  it('a broker created while NATS is unreachable recovers in place once it is reachable', async () => {
    const net = await import('node:net');
    const target = new URL(BROKER_URL.replace(/^nats:/, 'http:'));
    // a plain TCP relay in front of the real NATS, started later on a port chosen now
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const names = uniqueBrokerNames('R');
    created.push(names);
    const b = new JetStreamBroker({ url: `nats://127.0.0.1:${port}`, ...names, timeoutMs: 500, reconnectBackoffMs: 200 });
    const relay = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 4222), target.hostname);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    try {
      await expect(b.publish(note(1))).rejects.toThrow();
      await new Promise<void>((r) => relay.listen(port, '127.0.0.1', r));
      await sleep(300); // past the reconnect backoff
      await b.publish(note(2));
      const [m] = await b.fetch({ max: 1, expiresMs: 2000 });
      expect(m.data.queue_id).toBe('2');
      m.ack();
    } finally {
      await b.close();
      await new Promise<void>((r) => relay.close(() => r()));
    }
  });
});

describe('jetstream heartbeats missed', () => {
  it("a fetch whose idle heartbeats go missing ends with what it got instead of failing", async () => {
    const net = await import('node:net');
    const target = new URL(BROKER_URL.replace(/^nats:/, 'http:'));
    // a TCP relay in front of the real NATS that can hold back what the server sends, as a busy
    // event loop or a slow network does
    let held: Buffer[] | null = null;
    const clients = new Set<import('node:net').Socket>();
    const relay = net.createServer((client) => {
      clients.add(client);
      const upstream = net.connect(Number(target.port || 4222), target.hostname);
      client.pipe(upstream);
      upstream.on('data', (d: Buffer) => (held ? held.push(d) : client.write(d)));
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const names = uniqueBrokerNames('H');
    created.push(names);
    const b = new JetStreamBroker({ url: `nats://127.0.0.1:${(relay.address() as { port: number }).port}`, ...names });
    try {
      await b.ensure();
      const pending = b.fetch({ max: 1, expiresMs: 1000 }); // idle heartbeat every 500 ms
      await sleep(100);
      held = [];
      const got = await pending; // two heartbeats missed: `heartbeats missed` from the client
      expect(got).toEqual([]);
      const release = held;
      held = null;
      for (const c of clients) for (const d of release) c.write(d);
      // the broker goes on as before
      await b.publish(note(7));
      const [m] = await b.fetch({ max: 1, expiresMs: 2000 });
      expect(m?.data.queue_id).toBe('7');
      m!.ack();
    } finally {
      await b.close();
      for (const c of clients) c.destroy();
      await new Promise<void>((r) => relay.close(() => r()));
    }
  });
});

describe('jetstream stream deleted under a running broker', () => {
  it('the next publish after a failure re-creates the stream and the consumer', async () => {
    const names = uniqueBrokerNames('X');
    created.push(names);
    const b = new JetStreamBroker({ url: BROKER_URL, ...names });
    try {
      await b.ensure();
      const nc = await connect({ servers: BROKER_URL });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(names.stream);
      await nc.close();
      await expect(b.publish(note(1))).rejects.toThrow();
      await b.publish(note(2));
      const [m] = await b.fetch({ max: 1, expiresMs: 2000 });
      expect(m.data.queue_id).toBe('2');
      m.ack();
    } finally {
      await b.close();
    }
  });
});

describe('consumeWithFetch', () => {
  /** A fetch that answers after `ms`: the next queued message, or nothing. Counts pulls and the most at once. */
  function fakeFetch(queue: BrokerMessage[], ms: number) {
    const seen = { pulls: 0, now: 0, most: 0 };
    const fetch = async (): Promise<BrokerMessage[]> => {
      seen.pulls++;
      seen.most = Math.max(seen.most, ++seen.now);
      await sleep(ms);
      seen.now--;
      const m = queue.shift();
      return m ? [m] : [];
    };
    return { fetch, seen };
  }
  const message = (i: number): BrokerMessage => ({
    data: note(i), info: { deliveryCount: 1, redeliveryCount: 0, redelivered: false },
    ack() {}, nak() {}, term() {}, working() {},
  });

  it('idle, one slot pulls for all of them', async () => {
    const { fetch, seen } = fakeFetch([], 10);
    const h = consumeWithFetch(fetch, async () => {}, { concurrency: 8, isClosed: () => false });
    await sleep(300);
    await h.stop();
    expect(seen.most).toBe(1);
    // one slot pulling back to back (8 slots each pulling would be about 8 times as many)
    expect(seen.pulls).toBeGreaterThan(5);
    expect(seen.pulls).toBeLessThan(40);
  });

  it('every slot ends when the broker closes under them, the waiting ones too', async () => {
    let closed = false;
    const fetch = async (): Promise<BrokerMessage[]> => {
      await sleep(10);
      if (closed) throw new Error('broker closed');
      return [];
    };
    const h = consumeWithFetch(fetch, async () => {}, { concurrency: 4, isClosed: () => closed });
    await sleep(50);
    closed = true;
    const ended = await Promise.race([h.closed.then(() => true), sleep(2000).then(() => false)]);
    expect(ended).toBe(true);
  });

  it('a pull that brings a message sets every free slot pulling: a burst runs at full concurrency', async () => {
    const queue = Array.from({ length: 6 }, (_, i) => message(i));
    const { fetch } = fakeFetch(queue, 5);
    let running = 0;
    let most = 0;
    const done: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const h = consumeWithFetch(fetch, async (m) => {
      most = Math.max(most, ++running);
      await gate;
      running--;
      done.push(m.data.queue_id);
    }, { concurrency: 4, isClosed: () => false });
    const deadline = Date.now() + 5000;
    while (most < 4 && Date.now() < deadline) await sleep(10);
    expect(most).toBe(4);
    release();
    while (done.length < 6 && Date.now() < deadline) await sleep(10);
    await h.stop();
    expect(done.sort()).toEqual(['0', '1', '2', '3', '4', '5']);
  });
});
