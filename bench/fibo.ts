/**
 * 40 sequential python steps, each computing fibo(10), run by the real server and one worker
 * process on this machine (PostgreSQL, JetStream, python3): total wall time from the run request
 * to the completed status. Published figures for the same workload: Hatchet 1.22 s,
 * Temporal 2.97 s, Windmill 2.09–4.38 s, Prefect 4.87 s, Kestra 6.04 s, Airflow 116 s.
 *
 *   npm run build && node dist/bench/fibo.js [runs=5]   (BENCH_WAIT=1: long poll instead of polling)
 */
import { startStack, runToEnd } from './support.js';

const STEPS = 40;
const RUNS = Number(process.argv[2] ?? 5);

function playbook(): string {
  const steps = Array.from({ length: STEPS }, (_, i) => {
    const next = i + 1 < STEPS ? `\n    next: step_${i + 2}` : '';
    return `  - step: ${i === 0 ? 'start' : `step_${i + 1}`}
    tool:
      kind: python
      code: |
        def main(n):
            a, b = 0, 1
            for _ in range(n):
                a, b = b, a + b
            return a
      args: { n: 10 }${next}`;
  });
  return `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: { name: fibo40, path: bench/fibo40 }\nworkflow:\n${steps.join('\n')}\n`;
}

async function main() {
  const stack = await startStack({ workers: 1 });
  try {
    await stack.client.registerPlaybook(playbook());
    await runToEnd(stack.client, 'bench/fibo40'); // warm-up: interpreters, pools, JIT
    const walls: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const p0 = await stack.pg.read();
      const c0 = stack.cpu();
      const r = await runToEnd(stack.client, 'bench/fibo40');
      const c1 = stack.cpu();
      const p1 = await stack.pg.read();
      if (r.execution.status !== 'completed') throw new Error(`run ended ${r.execution.status}`);
      walls.push(r.wall);
      const perStep = (a: number, b: number) => `${((b - a) / STEPS).toFixed(2)} ms`;
      console.log(`run ${i + 1}: ${(r.wall / 1000).toFixed(3)} s wall, ${(r.serverMs / 1000).toFixed(3)} s between created_at and finished_at, result ${JSON.stringify(r.execution.result)}; CPU per step: server process ${perStep(c0.server, c1.server)}, worker ${perStep(c0.workers, c1.workers)}, PostgreSQL backends ${perStep(0, stack.pg.since(p0, p1))}`);
    }
    walls.sort((a, b) => a - b);
    const median = walls[Math.floor(walls.length / 2)];
    console.log(`fibo40: ${STEPS} sequential python steps, median ${(median / 1000).toFixed(3)} s (${(median / STEPS).toFixed(1)} ms per step), best ${(walls[0] / 1000).toFixed(3)} s over ${RUNS} runs (goal ≤ 0.4 s)`);
  } finally {
    await stack.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
