/**
 * Loops and long playbooks in linear time (issue 20): is the cost of one loop item, or one step,
 * independent of how many came before? Two workloads, each timed in its first and last 10 %:
 *
 *   loop   — one async loop step over N items (default 100,000) of a cheap tool;
 *   steps  — a linear playbook of M steps (default 10,000), each a cheap call.
 *
 * Two layers, chosen by the first argument:
 *
 *   engine (default) — the pure engine (server/engine) as the server drives it: handle() on the
 *     cached state, one worker answer at a time. No I/O, so it isolates the engine's own cost.
 *   e2e — the real server (PostgreSQL, JetStream) and one worker process (concurrency 32); the
 *     tool is a `transform` merge of one small object (no I/O) so the figure is Playflow's cost.
 *     Progress is read from the event table.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/loops.js [engine|e2e] [items=100000] [steps=10000]
 *
 * Prints items/s (steps/s) over the first and the last 10 % and their ratio (goal: within 20 %).
 * Figures only; nothing asserts. The machine may be shared: compare ratios, not absolutes.
 */
import { performance } from 'node:perf_hooks';
import { parsePlaybook } from '../playbook/index.js';
import type { Playbook } from '../playbook/types.js';
import type { Command, EngineEvent, EngineInput } from '../server/engine/contract.js';
import { engine, type EngineState } from '../server/engine/index.js';

const MODE = process.argv[2] ?? 'engine';
const ITEMS = Number(process.argv[3] ?? 100_000);
const STEPS = Number(process.argv[4] ?? 10_000);

function parse(text: string): Playbook {
  const r = parsePlaybook(text);
  if (!r.playbook) throw new Error(JSON.stringify(r.errors));
  return r.playbook;
}

const loopText = (items: number, inFlight: number) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: bench-loops, path: bench/loops}
workflow:
  - step: each
    loop: {in: "{{ range(${items}) | list }}", iterator: i, mode: async, max_in_flight: ${inFlight}}
    tool: {kind: transform, operation: merge, objects: [{i: "{{ i }}"}]}
`;

function stepsText(n: number): string {
  const steps: string[] = [];
  for (let i = 1; i <= n; i++) {
    steps.push(`  - step: s${i}
    tool: {kind: transform, operation: merge, objects: [{n: ${i}}]}${i < n ? `\n    next: s${i + 1}` : ''}`);
  }
  return `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: bench-steps, path: bench/steps}
workflow:
${steps.join('\n')}
`;
}

// ---- engine layer ----------------------------------------------------------------------------

let clock = 1_700_000_000_000;
const input = (): EngineInput => ({ now: (clock += 1), random: () => 0.5 });

/**
 * Drives an execution to its end, answering each command at once; calls `tick(done)` after
 * every answer. Returns the final state.
 */
function drive(pb: Playbook, tick: (answered: number) => void): EngineState {
  let d = engine.start(pb, { execution_id: '1', path: pb.metadata?.path ?? 'bench', version: 1, catalog_id: '1', payload: {} }, input());
  let state = d.state;
  const queue: Command[] = [...d.commands];
  let answered = 0;
  while (queue.length) {
    const cmd = queue.shift()!;
    const ev: EngineEvent = { name: 'call.done', step: cmd.step, command_id: cmd.command_id, payload: { response: { n: answered }, meta: { duration_ms: 1 } } };
    d = engine.handle(state, pb, ev, input(), { reuseSteps: true }); // the state is handed over, as the server does
    state = d.state;
    queue.push(...d.commands);
    tick(++answered);
  }
  return state;
}

/** Rate over the first and the last 10 % of `total` units, from a drive with a tick callback. */
function measure(label: string, unit: string, total: number, run: (tick: (n: number) => void) => void): void {
  const tenth = Math.max(1, Math.floor(total / 10));
  const marks = new Map<number, number>();
  const t0 = performance.now();
  marks.set(0, t0);
  run((n) => {
    if (n === tenth || n === total - tenth || n === total) marks.set(n, performance.now());
  });
  const first = tenth / ((marks.get(tenth)! - marks.get(0)!) / 1000);
  const last = tenth / ((marks.get(total)! - marks.get(total - tenth)!) / 1000);
  const all = total / ((marks.get(total)! - t0) / 1000);
  console.log(`${label}: ${total} ${unit} in ${((marks.get(total)! - t0) / 1000).toFixed(1)} s = ${Math.round(all)} ${unit}/s; `
    + `first 10 %: ${Math.round(first)} ${unit}/s, last 10 %: ${Math.round(last)} ${unit}/s, last/first = ${(last / first).toFixed(2)}`);
}

function engineBench(): void {
  // warm the JIT and the template cache on a small run of each
  drive(parse(loopText(2_000, 64)), () => {});
  drive(parse(stepsText(200)), () => {});
  const loop = parse(loopText(ITEMS, 64));
  measure(`engine, ${ITEMS}-item async loop (64 in flight)`, 'items', ITEMS, (tick) => drive(loop, tick));
  const steps = parse(stepsText(STEPS));
  measure(`engine, ${STEPS}-step playbook`, 'steps', STEPS, (tick) => drive(steps, tick));
}

// ---- end-to-end layer ------------------------------------------------------------------------

async function e2eBench(): Promise<void> {
  const { startStack } = await import('./support.js');
  const stack = await startStack({ workers: 1, concurrency: 32 });
  const pg = (await import('pg')).default;
  const pool = new pg.Pool({ connectionString: stack.server.config.databaseUrl, max: 1 });
  try {
    const runOne = async (label: string, unit: string, path: string, text: string, total: number, eventName: string) => {
      await stack.client.registerPlaybook(text);
      const t0 = performance.now();
      const { execution_id } = await stack.client.run({ path, payload: {} });
      const tenth = Math.max(1, Math.floor(total / 10));
      const marks: Array<[number, number]> = [[0, t0]];
      let status: string;
      for (;;) {
        const { rows } = await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM event WHERE execution_id = $1 AND name = $2`, [execution_id, eventName]);
        marks.push([Number(rows[0].n), performance.now()]);
        status = (await stack.client.getExecution(execution_id)).status;
        if (['completed', 'failed', 'cancelled'].includes(status)) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      const at = (n: number) => {
        // linear interpolation between the samples around n
        for (let i = 1; i < marks.length; i++) {
          const [n1, t1] = marks[i];
          const [n0, t00] = marks[i - 1];
          if (n1 >= n) return n1 === n0 ? t1 : t00 + ((n - n0) / (n1 - n0)) * (t1 - t00);
        }
        return marks[marks.length - 1][1];
      };
      const done = marks[marks.length - 1][0];
      const first = tenth / ((at(tenth) - at(0)) / 1000);
      const last = tenth / ((at(done) - at(done - tenth)) / 1000);
      const size = (await pool.query<{ s: string }>(`SELECT pg_size_pretty(pg_database_size(current_database())) AS s`)).rows[0].s;
      console.log(`${label} (${status}): ${done}/${total} ${unit} in ${((performance.now() - t0) / 1000).toFixed(1)} s; `
        + `first 10 %: ${Math.round(first)} ${unit}/s, last 10 %: ${Math.round(last)} ${unit}/s, last/first = ${(last / first).toFixed(2)}; database ${size}`);
    };
    // 0 skips a workload
    if (ITEMS > 0) await runOne(`e2e, ${ITEMS}-item async loop`, 'items', 'bench/loops', loopText(ITEMS, 64), ITEMS, 'call.done');
    if (STEPS > 0) await runOne(`e2e, ${STEPS}-step playbook`, 'steps', 'bench/steps', stepsText(STEPS), STEPS, 'call.done');
  } finally {
    await pool.end();
    await stack.close();
  }
}

if (MODE === 'e2e') {
  e2eBench().catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else engineBench();
