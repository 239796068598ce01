/**
 * Python tool overhead on a warm interpreter pool: the wall time of one `runTool` call to a
 * trivial `main` (JSON over the pipe to a pre-spawned python3 and back), against the cost of a
 * fresh interpreter start for reference. Run after a build (or with tsx):
 *
 *   npx tsc -p tsconfig.json && node dist/bench/python.js [calls=500]
 *
 * Also prints the interpreter's own CPU per call (/proc), which the peers' W1 counts too, and the
 * CPU of an interpreter's start, with its share per call at the default retirement.
 *
 * The runner script is read from worker/python/runner.py of the source tree when the build
 * output has no copy. No assertion: prints the figures.
 */
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { processCpuMs } from './proc-cpu.js';
import { runTool } from '../worker/tools/index.js';
import { closePythonPool, configurePython, pythonPool } from '../worker/tools/python.js';
import { DEFAULT_MAX_CALLS, PythonPool } from '../worker/python/pool.js';
import { silentLogger } from '../common/logger.js';

const N = Number(process.argv[2] ?? 500);

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { median: q(0.5), p90: q(0.9), p99: q(0.99), min: s[0], max: s[s.length - 1] };
}
const f = (n: number) => `${n.toFixed(3)} ms`;

async function main() {
  configurePython({ size: 1, maxCallsPerProcess: 1_000_000 });
  await pythonPool().start();
  const ctx = { args: {}, execution_id: '1', step: 'bench', resolveAuth: async () => ({}), signal: new AbortController().signal, logger: silentLogger };
  const tool = { kind: 'python' as const, code: 'def main(x):\n    return x + 1', args: { x: 1 } };
  for (let i = 0; i < 50; i++) await runTool(tool, ctx); // warm-up (imports, JIT)
  const interpreter = pythonPool().stats.pids[0];
  const cpu0 = processCpuMs(interpreter);
  const times: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    const out = await runTool(tool, ctx);
    times.push(performance.now() - t0);
    if (out.response !== 2) throw new Error(`unexpected outcome ${JSON.stringify(out)}`);
  }
  const warm = stats(times);
  const interpreterUs = ((processCpuMs(interpreter) - cpu0) * 1000) / N;

  const parallel = 4;
  configurePython({ size: parallel });
  await closePythonPool();
  await pythonPool().start();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: parallel }, async () => {
    for (let i = 0; i < N / parallel; i++) await runTool(tool, ctx);
  }));
  const throughput = (N / (performance.now() - t0)) * 1000;
  await closePythonPool();

  // An interpreter's start (runner.py up to its ready line), in CPU: what each retirement costs.
  const starts: number[] = [];
  for (let i = 0; i < 10; i++) {
    const pool = new PythonPool({ size: 1 });
    await pool.start();
    starts.push(processCpuMs(pool.stats.pids[0]!));
    await pool.close();
  }
  const startMs = starts.reduce((a, b) => a + b, 0) / starts.length;

  const cold: number[] = [];
  for (let i = 0; i < 10; i++) {
    const c0 = performance.now();
    spawnSync('python3', ['-c', 'import json, sys; print(json.dumps({"x": 2}))']);
    cold.push(performance.now() - c0);
  }

  console.log(`python tool, warm pool (${N} sequential calls to a trivial main):`);
  console.log(`  median ${f(warm.median)}  p90 ${f(warm.p90)}  p99 ${f(warm.p99)}  min ${f(warm.min)}  max ${f(warm.max)}`);
  console.log(`  the interpreter's own CPU: ${interpreterUs.toFixed(0)} µs per call (Linux /proc; 10 ms ticks, so use calls=5000 or more)`);
  console.log(`  throughput with ${parallel} interpreters: ${throughput.toFixed(0)} calls/s`);
  console.log(`  an interpreter's start: ${startMs.toFixed(0)} ms of CPU (mean of ${starts.length}); retired after ${DEFAULT_MAX_CALLS} calls (the default), ${((startMs * 1000) / DEFAULT_MAX_CALLS).toFixed(0)} µs per call`);
  console.log(`reference: fresh python3 process start + exit, median ${f(stats(cold).median)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
