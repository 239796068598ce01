/**
 * Many small executions: N executions (default 500) of a 3-step chain started by C concurrent
 * clients (default 32), by the real server (in this process), a worker process, PostgreSQL and
 * JetStream. Prints completed executions per second and the p50/p99 latency from the start
 * request to the result observed by the client, for each way of observing the end:
 *
 * - `poll`: POST /api/run/playbook, then GET /api/execution/{id} every --poll-ms (default 10, the
 *   interval of bench/support.ts and of the peers' Playflow driver) until it is terminal, which is
 *   what every client had to do before the wait API;
 * - `wait`: POST /api/run/playbook?wait=60, which answers with the result when the execution ends
 *   within the wait (else GET /api/execution/{id}?wait=60 until it ends).
 *
 *   npm run build && node dist/bench/executions.js [--mode both|wait|poll] [--executions 500]
 *     [--clients 32] [--poll-ms 10] [--tool http|python] [--rounds 3]
 *
 * With `both` the modes alternate per round (poll first in odd rounds), after one warm-up batch.
 * Figures only; nothing asserts.
 */
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import type { PlayflowClient } from '../client/http.js';
import { startIncApi, startStack } from './support.js';

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string', default: 'both' },
    executions: { type: 'string', default: '500' },
    clients: { type: 'string', default: '32' },
    'poll-ms': { type: 'string', default: '10' },
    tool: { type: 'string', default: 'http' },
    rounds: { type: 'string', default: '3' },
  },
});
const EXECUTIONS = Number(args.executions);
const CLIENTS = Number(args.clients);
const POLL_MS = Number(args['poll-ms']);
const ROUNDS = Number(args.rounds);
const TOOL = args.tool;
if (!['both', 'wait', 'poll'].includes(args.mode!)) throw new Error(`--mode must be both, wait or poll, not ${args.mode}`);
if (!['http', 'python'].includes(TOOL!)) throw new Error(`--tool must be http or python, not ${TOOL}`);
for (const [k, v] of [['executions', EXECUTIONS], ['clients', CLIENTS], ['rounds', ROUNDS]] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer`);
}
if (!(POLL_MS >= 0)) throw new Error('--poll-ms must be a number ≥ 0');

type Mode = 'wait' | 'poll';
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const PATH = 'bench/chain3';

function playbook(targetUrl: string): string {
  const tool = (i: number) => TOOL === 'http'
    ? `{ kind: http, method: GET, endpoint: "${targetUrl}/inc?c={{ workload.c }}&s=${i}" }`
    : `{ kind: python, code: "def main(c):\\n    return {'c': c + 1}", args: { c: "{{ workload.c }}" } }`;
  return `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: chain3, path: ${PATH} }
workflow:
  - step: start
    tool: ${tool(1)}
    next: two
  - step: two
    tool: ${tool(2)}
    next: three
  - step: three
    tool: ${tool(3)}
`;
}

/** One execution from the start request to its result, observed the given way. Returns ms. */
async function one(client: PlayflowClient, mode: Mode, c: number): Promise<number> {
  const t0 = performance.now();
  const req = { path: PATH, payload: { c } };
  if (mode === 'wait') {
    const res = await client.run(req, { wait: 60 });
    let status: string = res.status;
    while (!TERMINAL.has(status)) status = (await client.getExecution(res.execution_id, { wait: 60 })).status;
    if (status !== 'completed') throw new Error(`execution ${res.execution_id} ${status}`);
  } else {
    const res = await client.run(req);
    for (;;) {
      const x = await client.getExecution(res.execution_id);
      if (TERMINAL.has(x.status)) {
        if (x.status !== 'completed') throw new Error(`execution ${res.execution_id} ${x.status}: ${JSON.stringify(x.error)}`);
        break;
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }
  return performance.now() - t0;
}

/** `total` executions by `clients` concurrent clients; latencies sorted, and the wall time. */
async function batch(client: PlayflowClient, mode: Mode, total: number, clients: number) {
  let next = 0;
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < total) {
      const c = next++;
      latencies.push(await one(client, mode, c));
    }
  }));
  const wall = performance.now() - t0;
  latencies.sort((a, b) => a - b);
  return { latencies, wall };
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];

async function main() {
  // the chain's "external API", in its own thread so it does not take this event loop's time
  const target = await startIncApi();
  const stack = await startStack({ workers: 1, concurrency: 32 });
  try {
    await stack.client.registerPlaybook(playbook(target.url));
    const modes: Mode[] = args.mode === 'both' ? ['poll', 'wait'] : [args.mode as Mode];
    // warm-up: JIT, pools, the worker's connections (not counted; a first round without it ran at half speed)
    for (const m of modes) await batch(stack.client, m, Math.max(CLIENTS, Math.ceil(EXECUTIONS / 4)), CLIENTS);
    console.log(`executions: ${EXECUTIONS} executions of a 3-step ${TOOL} chain, ${CLIENTS} concurrent clients, 1 worker process (concurrency 32), polling every ${POLL_MS} ms in poll mode`);
    const figures: Record<Mode, Array<{ rate: number; p50: number; p99: number }>> = { wait: [], poll: [] };
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? modes : [...modes].reverse();
      for (const mode of order) {
        const p0 = await stack.pg.read();
        const c0 = stack.cpu();
        const { latencies, wall } = await batch(stack.client, mode, EXECUTIONS, CLIENTS);
        const c1 = stack.cpu();
        const p1 = await stack.pg.read();
        const rate = EXECUTIONS / (wall / 1000);
        const f = { rate, p50: pct(latencies, 50), p99: pct(latencies, 99) };
        figures[mode].push(f);
        const per = { server: (c1.server - c0.server) / EXECUTIONS, worker: (c1.workers - c0.workers) / EXECUTIONS, pg: stack.pg.since(p0, p1) / EXECUTIONS };
        const total = per.server + per.worker + per.pg;
        // what the cores could complete if they did nothing else: the rate is CPU-bound when near it
        const ceiling = (availableParallelism() * 1000) / total;
        console.log(`round ${round} ${mode.padEnd(4)}: ${rate.toFixed(1)} completed executions/s (${(wall / 1000).toFixed(2)} s), latency p50 ${f.p50.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms; CPU per execution: server process (incl. the clients and the target) ${per.server.toFixed(2)} ms, worker ${per.worker.toFixed(2)} ms, PostgreSQL backends ${per.pg.toFixed(2)} ms; ${total.toFixed(2)} ms in all, at most ${ceiling.toFixed(0)}/s on ${availableParallelism()} cores`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    for (const mode of modes) {
      const fs = figures[mode];
      console.log(`executions ${mode}: median over ${fs.length} round(s): ${median(fs.map((f) => f.rate)).toFixed(1)} executions/s, p50 ${median(fs.map((f) => f.p50)).toFixed(1)} ms, p99 ${median(fs.map((f) => f.p99)).toFixed(1)} ms (issue 16's goal: 3× the 142/s wait measured before it, ≥ 426/s on that machine)`);
    }
  } finally {
    await stack.close();
    await target.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
