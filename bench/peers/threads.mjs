/**
 * How much of a young Playflow stack's CPU is V8 still compiling: the CPU per step of the server's
 * and the worker's main threads and of their other threads (V8's optimizing compiler, mostly) over
 * `measured` executions of the peers' 40-step chain, after `warmup` of them (the peers' W1 warms
 * up with 3). From a scratch copy of ../shared/peers:
 *
 *   cp -r ../shared/peers /tmp/peers && cp bench/peers/*.mjs /tmp/peers/ && cd /tmp/peers && npm install
 *   PLAYFLOW_ROOT=<this checkout, built> node threads.mjs [python|http] [warmup=3] [measured=11]
 */
import fs from 'node:fs';
import { startNats, startTarget, startPlayflow, pfChainPlaybook } from './lib/systems.mjs';
import { stopAll, closeAdmin } from './lib/common.mjs';

const KIND = process.argv[2] ?? 'python';
const WARMUP = Number(process.argv[3] ?? 3);
const MEASURED = Number(process.argv[4] ?? 11);
const STEPS = 40;

/** CPU ms of a process's main thread and of all its other threads (/proc/<pid>/task). */
function threadsCpu(pid) {
  const out = { main: 0, others: 0 };
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out[tid === String(pid) ? 'main' : 'others'] += (Number(f[11]) + Number(f[12])) * 10;
  }
  return out;
}

async function main() {
  await startTarget();
  const nats = await startNats();
  const pf = await startPlayflow({ natsPid: nats.pid });
  await pf.register(pfChainPlaybook('threads_chain', STEPS, KIND), 'peers/threads_chain');
  for (let i = 0; i < WARMUP; i++) await pf.runToEnd('peers/threads_chain');
  const before = { server: threadsCpu(pf.server.pid), worker: threadsCpu(pf.worker.pid) };
  for (let i = 0; i < MEASURED; i++) await pf.runToEnd('peers/threads_chain');
  const after = { server: threadsCpu(pf.server.pid), worker: threadsCpu(pf.worker.pid) };
  const per = (p, k) => ((after[p][k] - before[p][k]) / (MEASURED * STEPS)).toFixed(2);
  console.log(`${KIND}, after ${WARMUP} executions, over ${MEASURED}: CPU ms per step: server main thread ${per('server', 'main')}, other threads ${per('server', 'others')}; worker main thread ${per('worker', 'main')}, other threads ${per('worker', 'others')}`);
}

main()
  .catch((e) => { console.error(e); process.exitCode = 1; })
  .finally(async () => { await stopAll(); await closeAdmin(); });
