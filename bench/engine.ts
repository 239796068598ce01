/**
 * Engine benchmark: the cost of applying ONE event to an execution of a 100-step playbook after
 * 100, 1,000 and 10,000 prior events. Run after a build:
 *
 *   npx tsc -p tsconfig.json && node dist/bench/engine.js
 *
 * The playbook is a cycle of 100 http steps (step_100 → step_1), each rendering its endpoint,
 * params and headers from the workload, the previous step's result and a var, so the history can
 * grow without bound while the state stays one step run wide. Each measured event is a worker's
 * `call.done`; handling it records it, completes the step (step.exit, step_completed, vars_set,
 * transition) and enters the next one (step.enter, command_issued): 8 events and 1 command.
 * The target is ≤ 0.2 ms median per event, flat as history grows (the server caches the folded
 * state, so handle() never looks at the history). fold() over the whole history is O(n) and
 * printed for reference. A second table does the same for one 2,000-item async loop step.
 * `cpu ms/event` is process CPU time over the samples (whole bench loop, so slightly above the
 * handle() time); on a loaded machine it is steadier than the wall-clock median.
 */
import { performance } from 'node:perf_hooks';
import { parsePlaybook } from '../playbook/index.js';
import type { Playbook } from '../playbook/types.js';
import type { Command, EngineEvent, EngineInput } from '../server/engine/contract.js';
import { engine, type EngineState } from '../server/engine/index.js';

function cyclePlaybook(n: number): Playbook {
  const steps: string[] = [];
  for (let i = 1; i <= n; i++) {
    const prev = i === 1 ? n : i - 1;
    steps.push(`  - step: step_${i}
    tool:
      kind: http
      method: GET
      url: "{{ workload.base }}/items/{{ step_${prev}.id if step_${prev} is defined else 0 }}"
      params: {page: "{{ workload.page_size }}", region: "{{ vars.region | default('eu') }}"}
      headers: {Authorization: "Bearer {{ keychain.api.token }}"}
    vars: {last_${i % 5}: "{{ result.id }}"}
    next: [step_${i === n ? 1 : i + 1}]`);
  }
  const text = `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: bench, path: bench/cycle}
workload: {base: "http://api.local", page_size: 50}
keychain:
  - {name: api, kind: oauth2, scope: local, endpoint: "http://auth.local/token"}
workflow:
${steps.join('\n')}
`;
  const r = parsePlaybook(text);
  if (!r.playbook) throw new Error(JSON.stringify(r.errors));
  return r.playbook;
}

function loopPlaybook(items: number): Playbook {
  const r = parsePlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: bench-loop, path: bench/loop}
workflow:
  - step: each
    loop: {in: "{{ range(${items}) | list }}", iterator: i, mode: async}
    tool: {kind: http, method: GET, url: "http://api.local/items/{{ i }}"}
`);
  if (!r.playbook) throw new Error(JSON.stringify(r.errors));
  return r.playbook;
}

let clock = 1_700_000_000_000;
const input = (): EngineInput => ({ now: (clock += 7), random: () => 0.5 });

interface Sim {
  state: EngineState;
  queue: Command[];
  history: EngineEvent[];
}

function begin(pb: Playbook): Sim {
  const d = engine.start(pb, { execution_id: '1', path: 'bench', version: 1, catalog_id: '1', payload: {} }, input());
  return { state: d.state, queue: [...d.commands], history: [...d.events] };
}

function answer(cmd: Command, n: number): EngineEvent {
  return {
    name: 'call.done', step: cmd.step, command_id: cmd.command_id,
    payload: { response: { id: 'r', status: 200, data: { id: n, items: [n, n + 1] } }, meta: { duration_ms: 3 } },
  };
}

/** Applies the next worker answer; returns the time handle() took, in ms. */
function step(pb: Playbook, sim: Sim, n: number): number {
  const cmd = sim.queue.shift();
  if (!cmd) throw new Error('no command to answer');
  const ev = answer(cmd, n);
  const t = performance.now();
  const d = engine.handle(sim.state, pb, ev, input());
  const ms = performance.now() - t;
  sim.state = d.state;
  sim.queue.push(...d.commands);
  sim.history.push(...d.events);
  return ms;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
function p95(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length * 0.95)];
}

function run(title: string, pb: Playbook, points: number[], samples: number): void {
  console.log(`\n${title}`);
  console.log('prior events | median ms/event | p95 ms/event | cpu ms/event | events/decision | fold(history) ms');
  const sim = begin(pb);
  let n = 0;
  // warm up the template cache and the JIT on a separate execution
  const warm = begin(pb);
  for (let i = 0; i < 300 && warm.queue.length; i++) step(pb, warm, i);
  for (const target of points) {
    while (sim.history.length < target) step(pb, sim, n++);
    const times: number[] = [];
    const before = sim.history.length;
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < samples && sim.queue.length; i++) times.push(step(pb, sim, n++));
    const cpu = process.cpuUsage(cpu0);
    const cpuMs = (cpu.user + cpu.system) / 1000 / times.length;
    const perDecision = (sim.history.length - before) / times.length;
    const t = performance.now();
    const folded = engine.fold(sim.history);
    const foldMs = performance.now() - t;
    if (folded.open_commands.length !== sim.state.open_commands.length) throw new Error('fold disagrees with the state');
    console.log(
      `${String(target).padStart(12)} | ${median(times).toFixed(4).padStart(15)} | ${p95(times).toFixed(4).padStart(12)} | ${cpuMs.toFixed(4).padStart(12)} | ${perDecision
        .toFixed(1)
        .padStart(15)} | ${foldMs.toFixed(1).padStart(16)}`,
    );
  }
}

run('100-step cycle playbook: one call.done (completes a step, enters the next)', cyclePlaybook(100), [100, 1_000, 10_000], 200);
run('2,000-item async loop (bound 16): one call.done (records the item, issues the next)', loopPlaybook(2_000), [100, 1_000, 5_000], 200);
