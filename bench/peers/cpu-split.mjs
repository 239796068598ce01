/**
 * CPU per step of each process of Playflow, Restate and DBOS on the peers' W1 chains (40
 * sequential steps; python/js and http), where the peers' W1 gives one sum per system. Runs from
 * a scratch copy of ../shared/peers, whose lib/ starts the systems:
 *
 *   cp -r ../shared/peers /tmp/peers && cp bench/peers/*.mjs /tmp/peers/ && cd /tmp/peers && npm install
 *   PLAYFLOW_ROOT=<this checkout, built> node cpu-split.mjs [rounds=12] [warmup=8]
 *
 * The variants run interleaved, one execution each per round, after `warmup` rounds (the peers'
 * W1 warms up with 3; with 60 the JavaScript processes have optimized their step path, and the
 * split is the steady state's). CPU is
 * read from /proc for each process (the Playflow worker with its python interpreters) and for the
 * system's PostgreSQL backends. Figures only.
 */
import { performance } from 'node:perf_hooks';
import { startTarget, startNats, startPlayflow, startRestate, startDbos, pfChainPlaybook } from './lib/systems.mjs';
import { stopAll, closeAdmin, withDescendants, pgBackendPids, cpuMs } from './lib/common.mjs';

const STEPS = 40;
const ROUNDS = Number(process.argv[2] ?? 12);
const WARMUP = Number(process.argv[3] ?? 8);

async function main() {
  await startTarget();
  const nats = await startNats();
  const pf = await startPlayflow({ workerConcurrency: 8, natsPid: nats.pid });
  await pf.register(pfChainPlaybook('split_python', STEPS, 'python'), 'peers/split_python');
  await pf.register(pfChainPlaybook('split_http', STEPS, 'http'), 'peers/split_http');
  const rs = await startRestate();
  const db = await startDbos();
  /** The processes of a system by role, read again each round (backends come and go). */
  const roles = async (sys) => {
    if (sys === pf) return { server: [pf.server.pid], worker: withDescendants([pf.worker.pid]), nats: [nats.pid], postgres: await pgBackendPids(pf.db) };
    if (sys === rs) return { 'restate-server': [rs.server.pid], 'sdk endpoint': [rs.endpoint.pid] };
    return { app: [db.app.pid], postgres: await pgBackendPids(db.db) };
  };
  const variants = [
    ['playflow / python', pf, () => pf.runToEnd('peers/split_python')],
    ['restate / js', rs, () => rs.call('chain', { steps: STEPS, kind: 'fibo' })],
    ['dbos / js', db, () => db.call('chain', { steps: STEPS, kind: 'fibo' })],
    ['playflow / http', pf, () => pf.runToEnd('peers/split_http')],
    ['restate / http', rs, () => rs.call('chain', { steps: STEPS, kind: 'http' })],
    ['dbos / http', db, () => db.call('chain', { steps: STEPS, kind: 'http' })],
  ];
  for (let i = 0; i < WARMUP; i++) for (const [, , run] of variants) await run();
  const sums = new Map();
  const read = (g) => Object.fromEntries(Object.entries(g).map(([k, pids]) => [k, pids.reduce((s, p) => s + cpuMs(p), 0)]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, sys, run] of variants) {
      const g = await roles(sys);
      const before = read(g);
      const t0 = performance.now();
      await run();
      const ms = performance.now() - t0;
      const after = read(g);
      const acc = sums.get(name) ?? { wall: 0, cpu: {} };
      acc.wall += ms;
      for (const k in after) acc.cpu[k] = (acc.cpu[k] ?? 0) + after[k] - before[k];
      sums.set(name, acc);
    }
  }
  console.log(`CPU ms per step by process (${ROUNDS} rounds of one ${STEPS}-step execution per variant after ${WARMUP} of warm-up; /proc ticks are 10 ms, so read the sums, not single rounds)`);
  for (const [name, acc] of sums) {
    const parts = Object.entries(acc.cpu).map(([k, v]) => `${k} ${(v / ROUNDS / STEPS).toFixed(2)}`);
    console.log(`${name}: wall ${(acc.wall / ROUNDS).toFixed(0)} ms; ${parts.join(', ')}`);
  }
}

main()
  .catch((e) => { console.error(e); process.exitCode = 1; })
  .finally(async () => { await stopAll(); await closeAdmin(); });
