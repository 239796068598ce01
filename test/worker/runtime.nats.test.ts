/**
 * The runtime on JetStream (the machine's NATS, suite-unique stream/subject/consumer names): the
 * server core publishes through its own connection, the worker consumes through another, as two
 * processes would. A call longer than the ack wait stays with its worker thanks to working().
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { ApiError, PlayflowClient } from '../../client/http.js';
import { buildApp } from '../../server/app/index.js';
import { JetStreamBroker } from '../../common/broker/jetstream.js';
import { createServerCore, type ServerCore } from '../../server/core.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { BROKER_URL, uniqueBrokerNames } from '../helpers/nats.js';
import { WorkerRuntime, type WorkerClient } from '../../worker/runtime.js';

const names = uniqueBrokerNames('WRT');
const settings = { ...names, ackWaitMs: 2000, maxDeliver: 3 };
let tdb: TestDatabase;
let core: ServerCore;
let app: FastifyInstance;
let base: string;

beforeAll(async () => {
  tdb = await createTestDatabase('pfwnats');
  core = await createServerCore({ databaseUrl: tdb.url, brokerUrl: BROKER_URL, brokerSettings: settings, serverUrl: 'http://127.0.0.1', sweeper: false, poolSize: 5 });
  app = await buildApp(core.deps);
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  await core.start();
  await core.deps.catalog.register(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: long, path: w/long }
workload: { items: [1, 2, 3] }
workflow:
  - step: slow
    tool: { kind: python, code: "import time\\ndef main():\\n    time.sleep(4)\\n    return 'ok'" }
    next: fan
  - step: fan
    loop: { in: "{{ workload.items }}", iterator: item, mode: async }
    tool: { kind: python, code: "def main(x):\\n    return x * 10", args: { x: "{{ item }}" } }
`);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await core?.stop();
  await tdb?.drop();
  const nc = await connect({ servers: BROKER_URL });
  try {
    await (await jetstreamManager(nc)).streams.delete(names.stream);
  } catch {
    // already gone
  } finally {
    await nc.close();
  }
});

describe('worker runtime on JetStream', () => {
  it('a call longer than the ack wait is kept by working() and heartbeats (no redelivery); a loop fans out', async () => {
    const c = new PlayflowClient({ baseUrl: base });
    const refused: number[] = [];
    let claims = 0;
    const client: WorkerClient = {
      claim: async (q, r) => {
        claims++;
        try {
          return await c.claim(q, r);
        } catch (err) {
          if (err instanceof ApiError) refused.push(err.status);
          throw err;
        }
      },
      heartbeat: (q, r) => c.heartbeat(q, r),
      sendEvents: (e) => c.sendEvents(e),
      run: (r) => c.run(r),
      request: (m, p, o) => c.request(m, p, o),
    };
    const broker = new JetStreamBroker({ url: BROKER_URL, ...settings });
    const rt = new WorkerRuntime({ broker, client, workerId: 'w-js', concurrency: 4, python: { size: 2 }, heartbeatSeconds: 0.5 });
    await rt.start();
    try {
      const run = await c.run({ path: 'w/long', payload: {} });
      const deadline = Date.now() + 30_000;
      let status = 'started';
      while (Date.now() < deadline) {
        status = (await c.getExecution(run.execution_id)).status;
        if (['completed', 'failed', 'cancelled'].includes(status)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe('completed');
      const exec = await c.getExecution(run.execution_id);
      expect(exec.steps.fan.result).toEqual([10, 20, 30]);
      expect(refused).toEqual([]);
      expect(claims).toBe(4);
      const calls = (await c.getEvents(run.execution_id)).events.filter((e) => e.name === 'call.done');
      expect(calls).toHaveLength(4);
    } finally {
      await rt.stop();
      await broker.close();
    }
  });
});
