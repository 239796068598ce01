/**
 * Syscalls per step of Playflow, Restate and DBOS on the peers' W1 chains: `strace -c -f` attached
 * to every process of a system (the Playflow worker with its interpreters) and to its PostgreSQL
 * backends while it runs a few executions, after 5 of warm-up. Prints all syscalls, the writes
 * (write, writev, send*, pwrite*), the reads and the fsyncs per step. strace slows what it
 * traces: the counts are what to read, not the times. From a scratch copy of ../shared/peers:
 *
 *   cp -r ../shared/peers /tmp/peers && cp bench/peers/*.mjs /tmp/peers/ && cd /tmp/peers && npm install
 *   PLAYFLOW_ROOT=<this checkout, built> node syscalls.mjs [executions=5]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { startTarget, startNats, startPlayflow, startRestate, startDbos, pfChainPlaybook } from './lib/systems.mjs';
import { stopAll, closeAdmin, withDescendants, pgBackendPids } from './lib/common.mjs';

const STEPS = 40;
const N = Number(process.argv[2] ?? 5);
const WRITES = ['write', 'writev', 'sendto', 'sendmsg', 'pwrite64', 'pwritev', 'pwritev2'];
const READS = ['read', 'readv', 'recvfrom', 'recvmsg', 'pread64', 'preadv', 'preadv2'];
const SYNCS = ['fsync', 'fdatasync', 'sync_file_range'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** `strace -c` summary files, summed: calls by syscall name. */
function callsOf(files) {
  const sum = {};
  for (const f of files) {
    if (!fs.existsSync(f)) continue;
    for (const line of fs.readFileSync(f, 'utf8').split('\n')) {
      const cols = line.trim().split(/\s+/);
      const name = cols[cols.length - 1];
      if (cols.length >= 5 && /^\d/.test(cols[0]) && name !== 'total') sum[name] = (sum[name] ?? 0) + Number(cols[3]);
    }
    fs.rmSync(f);
  }
  return sum;
}

async function main() {
  await startTarget();
  const nats = await startNats();
  const pf = await startPlayflow({ workerConcurrency: 8, natsPid: nats.pid });
  await pf.register(pfChainPlaybook('sys_python', STEPS, 'python'), 'peers/sys_python');
  await pf.register(pfChainPlaybook('sys_http', STEPS, 'http'), 'peers/sys_http');
  const rs = await startRestate();
  const db = await startDbos();
  const variants = [
    ['playflow / python', pf, () => pf.runToEnd('peers/sys_python')],
    ['playflow / http', pf, () => pf.runToEnd('peers/sys_http')],
    ['restate / js', rs, () => rs.call('chain', { steps: STEPS, kind: 'fibo' })],
    ['restate / http', rs, () => rs.call('chain', { steps: STEPS, kind: 'http' })],
    ['dbos / js', db, () => db.call('chain', { steps: STEPS, kind: 'fibo' })],
    ['dbos / http', db, () => db.call('chain', { steps: STEPS, kind: 'http' })],
  ];
  for (const [name, sys, run] of variants) {
    for (let i = 0; i < 5; i++) await run();
    const pids = withDescendants(sys.pids());
    if (sys.db) pids.push(...(await pgBackendPids(sys.db)));
    const tracers = pids.map((p, i) => {
      const file = `/tmp/peers-syscalls-${process.pid}-${i}.txt`;
      return { file, child: spawn('strace', ['-c', '-f', '-o', file, '-p', String(p)], { stdio: 'ignore' }) };
    });
    await sleep(1500); // attached
    for (let i = 0; i < N; i++) await run();
    for (const t of tracers) t.child.kill('SIGINT');
    await sleep(1500); // summaries written
    const calls = callsOf(tracers.map((t) => t.file));
    const per = (names) => names.reduce((s, k) => s + (calls[k] ?? 0), 0) / (N * STEPS);
    console.log(`${name}: per step ${per(Object.keys(calls)).toFixed(1)} syscalls; writes ${per(WRITES).toFixed(1)}, reads ${per(READS).toFixed(1)}, fsync ${per(SYNCS).toFixed(2)} (${pids.length} processes)`);
  }
}

main()
  .catch((e) => { console.error(e); process.exitCode = 1; })
  .finally(async () => { await stopAll(); await closeAdmin(); });
