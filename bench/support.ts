/**
 * Shared set-up for the end-to-end benchmarks: a fresh PostgreSQL database, the real server
 * (in this process) on JetStream with stream names of its own, and worker processes started with
 * the built CLI — the same parts as production, on one machine. Figures only; nothing asserts.
 */
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { PlayflowClient } from '../client/http.js';
import type { RunningServer } from '../server/main.js';
import { startHarness } from '../test/conformance/harness.js';
import { createServerFetch } from '../worker/server-fetch.js';
import { pgCpu, type PgCpu } from './pg-cpu.js';
import { processCpuMs } from './proc-cpu.js';
import { tuneV8Tiering } from '../common/v8-tiering.js';


export interface BenchStack {
  client: PlayflowClient;
  url: string;
  server: RunningServer;
  /** CPU time used so far (ms): this process (server and the benchmark's client) and the worker processes (Linux /proc; NaN elsewhere). */
  cpu(): { server: number; workers: number };
  /** CPU time of the PostgreSQL backends serving the stack's database (bench/pg-cpu.ts). */
  pg: PgCpu;
  close(): Promise<void>;
}

export async function startStack(opts: { workers?: number; concurrency?: number; serverEnv?: NodeJS.ProcessEnv } = {}): Promise<BenchStack> {
  // The conformance harness's stack: fresh database, in-process server, worker processes.
  // The sweeper runs at the server's default pace so it does not weigh on the figures.
  // PLAYFLOW_* settings of the bench's own environment reach the server (A/B runs of a switch)
  const fromEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('PLAYFLOW_')));
  // the server runs in this process: tiered as `server start` tiers it (the workers' CLI does it itself)
  tuneV8Tiering(process.env);
  const h = await startHarness({ workers: opts.workers ?? 1, concurrency: opts.concurrency, sweeperIntervalMs: 10_000, serverEnv: { ...fromEnv, ...opts.serverEnv } });
  // The benchmark's client (run + status polling) lives in the server's process: give it the
  // worker's cheap keep-alive transport so it takes as little of the server's CPU as it can.
  const http = createServerFetch();
  const client = new PlayflowClient({ baseUrl: h.url, fetch: http.fetch });
  // Let the workers connect and warm their python interpreters before anything is timed.
  await new Promise((r) => setTimeout(r, 1500));
  const pg = await pgCpu(h.db.url);
  return {
    pg,
    client,
    url: h.url,
    server: h.server,
    cpu() {
      const own = process.cpuUsage();
      return { server: (own.user + own.system) / 1000, workers: h.workers.reduce((sum, w) => sum + processCpuMs(w.pid), 0) };
    },
    async close() {
      await pg.close();
      await http.close();
      await h.close();
    },
  };
}

/**
 * Polling interval of runToEnd (BENCH_POLL_MS, default 10 ms). The poll runs in the server's own
 * process and each one is an HTTP request and a query: at 2 ms it doubled the server process's CPU
 * per fibo step (~16–19 ms instead of ~7–9 ms, measured) and slowed what it measured. 10 ms bounds
 * the wall-time error to 10 ms; `created_at → finished_at` is printed as well.
 */
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 10);

/**
 * BENCH_WAIT=1: wait with the API's long poll (`wait` on the run request, then
 * `GET /api/execution/{id}?wait=`) instead of polling — no request per POLL_MS in the server's
 * process, and the answer comes at the commit that ends the execution.
 */
const WAIT = process.env.BENCH_WAIT === '1';

/** Runs a registered playbook and waits for its end, polling every POLL_MS (or BENCH_WAIT). Returns wall ms. */
export async function runToEnd(client: PlayflowClient, playbookPath: string, payload: Record<string, unknown> = {}) {
  const t0 = performance.now();
  const started = await client.run({ path: playbookPath, payload: payload as never }, WAIT ? { wait: 60 } : {});
  for (;;) {
    const x = await client.getExecution(started.execution_id, WAIT ? { wait: 60 } : {});
    if (['completed', 'failed', 'cancelled'].includes(x.status)) {
      const wall = performance.now() - t0;
      const serverMs = x.finished_at ? Date.parse(x.finished_at) - Date.parse(x.created_at) : NaN;
      return { wall, serverMs, execution: x };
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}


/**
 * Starts a run and waits for its end with the API's long poll, as `playflow run --wait` does: the
 * start request's answer carries the result when the execution ends within the wait, so a large
 * result crosses the wire once (runToEnd then reads the whole record again, with every step's).
 */
export async function runWaiting(client: PlayflowClient, playbookPath: string, payload: Record<string, unknown> = {}) {
  const t0 = performance.now();
  const started = await client.run({ path: playbookPath, payload: payload as never }, { wait: 60 });
  let end: { status: string; result?: unknown; error?: unknown } = started;
  while (!['completed', 'failed', 'cancelled'].includes(end.status)) end = await client.getExecution(started.execution_id, { wait: 60 });
  return { wall: performance.now() - t0, status: end.status, result: end.result, error: end.error };
}

/**
 * The peers' W1 chain (../shared/peers lib/systems.mjs pfChainPlaybook) at `path`: `steps` steps
 * passing a counter on, each a python fib(10) or a GET of `${apiUrl}/inc` (startIncApi). The
 * execution's result is `{c: steps}` (python) or `{data: {c: steps}}` (http).
 */
export function peersChainPlaybook(kind: 'python' | 'http', apiUrl: string, path: string, steps = 40): string {
  const name = (i: number) => (i === 1 ? 'start' : `step_${i}`);
  const prev = (i: number) => (i === 1 ? '{{ payload.c | default(0) }}' : `{{ ${name(i - 1)}.c }}`);
  const body = Array.from({ length: steps }, (_, k) => {
    const i = k + 1;
    const next = i < steps ? `\n    next: ${name(i + 1)}` : '';
    const tool = kind === 'python'
      ? `      kind: python\n      code: |\n        def main(n, c):\n            a, b = 0, 1\n            for _ in range(n):\n                a, b = b, a + b\n            return {"fib": a, "c": c + 1}\n      args: { n: 10, c: "${prev(i)}" }`
      : `      kind: http\n      method: GET\n      endpoint: "${apiUrl}/inc"\n      params: { c: "${prev(i)}" }`;
    return `  - step: ${name(i)}\n    tool:\n${tool}${next}`;
  });
  return `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: { name: ${path.split('/').pop()}, path: ${path} }\nworkflow:\n${body.join('\n')}\n`;
}

/**
 * A local "external API" in a worker thread, so its requests do not wait on the server's event loop
 * (its CPU is still this process's). `respond` is the body of `(req, res) => { … }` in that thread.
 */
async function startApiThread(respond: string): Promise<{ url: string; stop(): Promise<number> }> {
  const api = new Worker(`
    const http = require('node:http');
    const { parentPort } = require('node:worker_threads');
    const server = http.createServer((req, res) => { ${respond} });
    server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
  `, { eval: true });
  const [port] = (await once(api, 'message')) as [number];
  return { url: `http://127.0.0.1:${port}`, stop: () => api.terminate() };
}

/** Answers every request 200 with `{path, ok}`. */
export const startEchoApi = () => startApiThread(`
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, ok: true }));`);

/** The peers' target (../shared/peers lib/target.mjs): GET /inc?c=N answers `{c: N + 1}`. */
export const startIncApi = () => startApiThread(`
      const c = Number(new URL(req.url, 'http://x').searchParams.get('c'));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ c: c + 1 }));`);
