/**
 * Large tool results (issue 20 item 7): time of a python call whose answer is N MB of JSON, and of
 * an http call reading an N MB JSON body, for 5 and 30 MB, in two shapes — `strings` (1000-char
 * strings: bytes dominate) and `rows` (small objects with numbers and short strings: values
 * dominate, the shape of a query result). Prints, never asserts.
 *
 *   node dist/bench/results.js [--runs 3] [--sizes 5,30] [--only python,http,e2e] [--e2e-sizes 8,30] [--e2e-shapes strings,rows] [--body-bytes N]
 *
 * Each figure is wall ms and the CPU ms it took (this process; for python also the interpreter,
 * from /proc): on a shared machine the CPU figure moves less than the wall figure. The http body
 * is served by a child process, so its sending is not counted as the tool's.
 *
 * `e2e`: a one-step playbook whose python step returns N MB (each shape), through the real
 * server (in this process), a worker process, JetStream and PostgreSQL (bench/support.ts): run
 * request (with `wait`, as `playflow run --wait`) → its answer with the result, with the
 * server's and the worker's CPU. The result is reported to the server (call.done), stored and
 * folded into the execution. The server takes request bodies
 * up to PLAYFLOW_MAX_BODY_BYTES (10 MiB by default): a larger result ends the step `too_large`;
 * `--body-bytes N` starts the server with N instead.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { PythonPool } from '../worker/python/pool.js';
import { runTool } from '../worker/tools/index.js';
import { configureHttp } from '../worker/tools/http.js';
import { silentLogger } from '../common/logger.js';
import { processCpuMs } from './proc-cpu.js';
import { runWaiting, startStack } from './support.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    sizes: { type: 'string', default: '5,30' },
    only: { type: 'string', default: 'python,http,e2e' },
    'e2e-sizes': { type: 'string', default: '8,30' },
    'e2e-shapes': { type: 'string', default: 'strings,rows' },
    'body-bytes': { type: 'string' },
  },
});
const RUNS = Number(args.runs);
const SIZES = args.sizes!.split(',').map(Number);
const ONLY = new Set(args.only!.split(','));
const SHAPES = ['strings', 'rows'] as const;
type Shape = (typeof SHAPES)[number];

function ownCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Python expression of about `mb` MB of JSON in the given shape. */
function pythonValue(shape: Shape, mb: number): string {
  // rows: {"id": 123456, "name": "row 123456", "score": 123456.5, "ok": true} is ~70 bytes.
  return shape === 'strings'
    ? `["x" * 1000 for _ in range(${mb * 1000})]`
    : `[{"id": i, "name": "row %d" % i, "score": i + 0.5, "ok": i % 2 == 0} for i in range(${Math.round((mb * 1e6) / 70)})]`;
}

function line(what: string, ms: number, cpu: Record<string, number>): void {
  const c = Object.entries(cpu).map(([k, v]) => `${k} ${Math.round(v)}`).join(', ');
  console.log(`${what}: ${Math.round(ms)} ms (cpu ms: ${c})`);
}

if (ONLY.has('python')) {
  const pool = new PythonPool({ size: 1, maxResultBytes: 256 * 1024 * 1024, maxCallsPerProcess: 10_000 });
  await pool.start();
  await pool.call({ code: 'result = 1' });
  for (let run = 0; run < RUNS; run++) {
    for (const shape of SHAPES) {
      for (const mb of SIZES) {
        const pid = pool.stats.pids[0];
        const [n0, p0, t0] = [ownCpuMs(), processCpuMs(pid), performance.now()];
        const r = await pool.call({ code: `result = ${pythonValue(shape, mb)}` });
        const ms = performance.now() - t0;
        if (!r.ok) throw new Error(r.error.message);
        line(`python ${shape} ${mb} MB`, ms, { node: ownCpuMs() - n0, python: processCpuMs(pid) - p0 });
      }
    }
  }
  await pool.close();
}

if (ONLY.has('http')) {
  // The "external API": a child process holding the bodies, sending them as one buffer each.
  const api = spawn(process.execPath, ['-e', `
    const http = require('node:http');
    const sizes = ${JSON.stringify(SIZES)};
    const body = (shape, mb) => Buffer.from(JSON.stringify(shape === 'strings'
      ? Array.from({ length: mb * 1000 }, () => 'x'.repeat(1000))
      : Array.from({ length: Math.round(mb * 1e6 / 70) }, (_, i) => ({ id: i, name: 'row ' + i, score: i + 0.5, ok: i % 2 === 0 }))));
    const bodies = new Map();
    for (const shape of ['strings', 'rows']) for (const mb of sizes) bodies.set('/' + shape + '/' + mb, body(shape, mb));
    const server = http.createServer((req, res) => {
      const b = bodies.get(req.url);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': b.length }).end(b);
    });
    server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
  `], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [port] = (await once(api.stdout!, 'data')) as [Buffer];
  const url = `http://127.0.0.1:${Number(port.toString())}`;
  configureHttp({ maxResponseBytes: 256 * 1024 * 1024 });
  const ctx = { args: {}, execution_id: '1', step: 'bench', resolveAuth: async () => { throw new Error('none'); }, signal: new AbortController().signal, logger: silentLogger };
  await runTool({ kind: 'http', endpoint: `${url}/strings/${SIZES[0]}` }, ctx);
  for (let run = 0; run < RUNS; run++) {
    for (const shape of SHAPES) {
      for (const mb of SIZES) {
        const [n0, t0] = [ownCpuMs(), performance.now()];
        const r = await runTool({ kind: 'http', endpoint: `${url}/${shape}/${mb}` }, ctx);
        const ms = performance.now() - t0;
        if (r.error) throw new Error(r.error.message);
        line(`http ${shape} ${mb} MB`, ms, { node: ownCpuMs() - n0 });
      }
    }
  }
  api.kill();
}

if (ONLY.has('e2e')) {
  const bodyBytes = args['body-bytes'];
  const stack = await startStack({ workers: 1, serverEnv: bodyBytes ? { PLAYFLOW_MAX_BODY_BYTES: bodyBytes } : {} });
  try {
    await stack.client.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: big-result, path: bench/big-result }
workflow:
  - step: start
    tool:
      kind: python
      code: |
        def main(mb, shape):
            if shape == "rows":
                return [{"id": i, "name": "row %d" % i, "score": i + 0.5, "ok": i % 2 == 0} for i in range(round(float(mb) * 1e6 / 70))]
            return ["x" * 1000 for _ in range(int(mb) * 1000)]
      args: { mb: "{{ workload.mb }}", shape: "{{ workload.shape }}" }
`);
    await runWaiting(stack.client, 'bench/big-result', { mb: 1, shape: 'strings' }); // warm-up
    for (let run = 0; run < RUNS; run++) {
      for (const shape of args['e2e-shapes']!.split(',')) {
        for (const mb of args['e2e-sizes']!.split(',').map(Number)) {
          const [c0, p0] = [stack.cpu(), await stack.pg.read()];
          const r = await runWaiting(stack.client, 'bench/big-result', { mb, shape });
          const [c1, p1] = [stack.cpu(), await stack.pg.read()];
          const how = r.status === 'completed' ? 'completed' : `${r.status} (${JSON.stringify(r.error ?? null).slice(0, 120)})`;
          line(`e2e python step ${shape} ${mb} MB → ${how}`, r.wall, { server: c1.server - c0.server, worker: c1.workers - c0.workers, postgres: stack.pg.since(p0, p1) });
        }
      }
    }
  } finally {
    await stack.close();
  }
}
