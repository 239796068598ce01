/**
 * What the worker's own process costs a step: the peers' W1 chain (40 sequential steps, each an
 * http GET to a local API or a python call, passing a counter on) run by the server with its
 * worker as deployed, in a process of its own (`separate`), and with the same worker runtime in
 * the server's process (`together`: `startWorker` in-process, still talking to the server over
 * loopback HTTP and taking notifications from JetStream). Nothing else differs, so the difference
 * is the second process: its wake-ups, its event loop, its V8. `inject` goes one step further: the
 * in-process worker's requests go through fastify's `inject` (light-my-request), so no socket and
 * no HTTP parsing either; routing, validation, the service and serialization stay. It measures
 * what a worker placed in the server's process, with a direct channel, could save at most.
 *
 * Prints wall time per execution and CPU per step: this process (server, and the worker in
 * `together`), the worker process (in `separate`) and PostgreSQL's backends. Python interpreters
 * are children either way and are not counted. Each mode in a fresh process, so run them
 * alternately:
 *
 *   npm run build
 *   for i in 1 2 3; do for m in separate together inject; do node dist/bench/colocated.js --mode $m --tool http; done; done
 *
 * [--runs 40] [--warmup 20] [--tool http|python]. Figures only; nothing asserts.
 */
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { PlayflowClient } from '../client/http.js';
import { tuneV8Tiering } from '../common/v8-tiering.js';
import { startHarness } from '../test/conformance/harness.js';
import { loadWorkerConfig } from '../worker/config.js';
import { startWorker } from '../worker/main.js';
import { createServerFetch } from '../worker/server-fetch.js';
import { pgCpu } from './pg-cpu.js';
import { processCpuMs } from './proc-cpu.js';
import { peersChainPlaybook, runWaiting, startIncApi } from './support.js';

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string', default: 'separate' },
    tool: { type: 'string', default: 'http' },
    runs: { type: 'string', default: '40' },
    warmup: { type: 'string', default: '20' },
  },
});
const MODE = args.mode!;
const TOOL = args.tool!;
const RUNS = Number(args.runs);
const WARMUP = Number(args.warmup);
const STEPS = 40;
if (!['separate', 'together', 'inject'].includes(MODE)) throw new Error(`--mode must be separate, together or inject, not ${MODE}`);
if (!['http', 'python'].includes(TOOL)) throw new Error(`--tool must be http or python, not ${TOOL}`);
if (!Number.isInteger(RUNS) || RUNS < 1 || !Number.isInteger(WARMUP) || WARMUP < 0) throw new Error('--runs must be ≥ 1 and --warmup ≥ 0');

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A `fetch` for PlayflowClient that hands each request to the app in-process (`--mode inject`). */
function injectFetch(app: FastifyInstance): typeof fetch {
  return (async (input: string | URL, init: RequestInit = {}) => {
    const url = new URL(String(input));
    const res = await app.inject({
      method: (init.method ?? 'GET') as 'GET',
      url: url.pathname + url.search,
      headers: init.headers as Record<string, string>,
      payload: init.body as string | undefined,
    });
    return {
      ok: res.statusCode >= 200 && res.statusCode < 300,
      status: res.statusCode,
      headers: new Headers(res.headers as Record<string, string>),
      text: async () => res.body,
      json: async () => JSON.parse(res.body) as unknown,
    } as Response;
  }) as typeof fetch;
}

async function main() {
  const api = await startIncApi();
  tuneV8Tiering(process.env);
  const h = await startHarness({ workers: MODE === 'separate' ? 1 : 0, concurrency: 8, sweeperIntervalMs: 10_000 });
  const inProcess = MODE === 'separate' ? null : await startWorker({
    config: loadWorkerConfig({ ...h.env, WORKER_CONCURRENCY: '8', WORKER_METRICS_PORT: '0', LOG_LEVEL: 'warn' }),
    signals: false,
    ...(MODE === 'inject' ? { runtime: { client: new PlayflowClient({ baseUrl: h.url, fetch: injectFetch(h.server.app) }) } } : {}),
  });
  const http = createServerFetch();
  const client = new PlayflowClient({ baseUrl: h.url, fetch: http.fetch });
  const pg = await pgCpu(h.db.url);
  try {
    await new Promise((r) => setTimeout(r, 1500)); // the worker connects and warms its interpreters
    await client.registerPlaybook(peersChainPlaybook(TOOL as 'python' | 'http', api.url, 'bench/colocated', STEPS));
    const run = async () => {
      const end = await runWaiting(client, 'bench/colocated');
      const r = end.result as { c?: number; data?: { c?: number } } | undefined;
      const c = r?.c ?? r?.data?.c;
      if (end.status !== 'completed' || c !== STEPS) throw new Error(`execution ${end.status}, counter ${c}: ${JSON.stringify(end.error)}`);
      return end.wall;
    };
    for (let i = 0; i < WARMUP; i++) await run();
    const walls: number[] = [];
    const workerCpu = () => h.workers.reduce((sum, w) => sum + processCpuMs(w.pid!), 0);
    const p0 = await pg.read();
    const c0 = cpuMs();
    const w0 = workerCpu();
    for (let i = 0; i < RUNS; i++) walls.push(await run());
    const steps = RUNS * STEPS;
    const own = (cpuMs() - c0) / steps;
    const worker = (workerCpu() - w0) / steps;
    const db = pg.since(p0, await pg.read()) / steps;
    console.log(`colocated ${MODE.padEnd(8)} ${TOOL}: ${median(walls).toFixed(1)} ms median per ${STEPS}-step execution over ${RUNS} (after ${WARMUP}); CPU per step: this process ${own.toFixed(2)} ms${MODE === 'separate' ? `, worker process ${worker.toFixed(2)} ms` : ' (server and worker)'}, PostgreSQL ${db.toFixed(2)} ms; ${(own + worker + db).toFixed(2)} ms in all`);
  } finally {
    await pg.close();
    await inProcess?.stop();
    await http.close();
    await h.close();
    await api.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
