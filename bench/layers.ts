/**
 * Where a step's server CPU goes, layer by layer, in one process (server and client): an eager
 * step (call.done with claim_next) of a long chain
 *
 * - `service`: handed to the execution service directly (engine, group commit, pg client);
 * - `http`: the same over HTTP from PlayflowClient on the worker's transport, as a worker sends it;
 * - `route`: the POST /api/v2/events route alone, over HTTP, with the service answering a canned
 *   ack at once (parsing, validation, hooks, serialisation, sockets, and the client);
 * - `bare`: a fastify app with one schema-less route and a bare undici client, for reference.
 *
 * Interleaved rounds; prints the process CPU per step (or request) and PostgreSQL's. Figures only.
 *
 *   npm run build && node dist/bench/layers.js [rounds=3] [steps=400]
 */
import Fastify from 'fastify';
import pg from 'pg';
import { request } from 'undici';
import type { AddressInfo } from 'node:net';
import type { ClaimedCommand, EventsAck, WorkerEvent } from '../common/protocol.js';
import { callDone, chainPlaybook } from '../server/executions/testkit.js';
import { startStack } from './support.js';

const ROUNDS = Number(process.argv[2] ?? 3);
const STEPS = Number(process.argv[3] ?? 400);
const EAGER = { claimNext: { worker_id: 'bench', max: 1 } };

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function main() {
  const stack = await startStack({ workers: 0 });
  const bare = Fastify({ logger: false });
  try {
    await stack.client.registerPlaybook(chainPlaybook('bench/layers', STEPS + 1));
    const ex = stack.server.core.deps.executions;
    const db = new pg.Client({ connectionString: stack.server.config.databaseUrl });
    await db.connect();

    /** One chain of STEPS eager steps, each sent the given way: CPU per step of this process and of PostgreSQL. */
    const chain = async (send: (ev: WorkerEvent) => Promise<EventsAck>) => {
      const { execution_id: id } = await ex.start({ path: 'bench/layers', payload: {} });
      const { rows: [first] } = await db.query<{ queue_id: string }>('SELECT queue_id::text FROM queue WHERE execution_id = $1', [id]);
      let cmd: ClaimedCommand | undefined = await ex.claim(first!.queue_id, { worker_id: 'bench' });
      const p0 = await stack.pg.read();
      const c0 = cpuMs();
      let n = 0;
      for (; n < STEPS && cmd; n++) cmd = (await send(callDone(cmd, { response: { i: n, note: 'a step result of some size' } }))).claimed?.[0];
      const c1 = cpuMs();
      const p1 = await stack.pg.read();
      return { cpu: (c1 - c0) / n, pg: stack.pg.since(p0, p1) / n };
    };
    const service = (ev: WorkerEvent) => ex.handleEvents([ev], EAGER);
    const http = (ev: WorkerEvent) => stack.client.sendEvents([ev], EAGER);

    // the route alone: a copy of the service whose handleEvents answers at once with a command
    let canned: EventsAck | undefined;
    const routeOnly = async (repeat: number) => {
      const real = ex.handleEvents;
      ex.handleEvents = async () => canned!;
      try {
        const ev = callDone(canned!.claimed![0]!, { response: { i: 1, note: 'a step result of some size' } });
        const c0 = cpuMs();
        for (let i = 0; i < repeat; i++) await stack.client.sendEvents([ev], EAGER);
        return (cpuMs() - c0) / repeat;
      } finally {
        ex.handleEvents = real;
      }
    };
    bare.post('/events', async () => canned);
    await bare.listen({ port: 0, host: '127.0.0.1' });
    const bareUrl = `http://127.0.0.1:${(bare.server.address() as AddressInfo).port}/events`;
    const bareOnly = async (repeat: number) => {
      const body = JSON.stringify({ events: [callDone(canned!.claimed![0]!, { response: { i: 1 } })], claim_next: EAGER.claimNext });
      const c0 = cpuMs();
      for (let i = 0; i < repeat; i++) await (await request(bareUrl, { method: 'POST', body, headers: { 'content-type': 'application/json' } })).body.json();
      return (cpuMs() - c0) / repeat;
    };

    // warm-up, which also takes a real answer to can
    await chain(service);
    await chain(async (ev) => (canned = await http(ev)));
    await routeOnly(500);
    await bareOnly(500);
    const f = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
    for (let r = 1; r <= ROUNDS; r++) {
      const s = await chain(service);
      const h = await chain(http);
      const route = await routeOnly(STEPS);
      const b = await bareOnly(STEPS);
      console.log(`round ${r}: CPU per eager step, this process (PostgreSQL): service ${f(s.cpu)} (${f(s.pg)}), http ${f(h.cpu)} (${f(h.pg)}); per request: route alone ${f(route)}, bare fastify + undici ${f(b)}`);
    }
    await db.end();
  } finally {
    await bare.close();
    await stack.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
