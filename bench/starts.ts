/**
 * Top-level starts, the two ways the server makes them (executions/service.ts):
 *
 * - `two trips`: BEGIN with the insert of the catalog's live row (values inlined), then the first
 *   decision's write with its values inlined and COMMIT;
 * - `pipeline`: the insert under an execution id taken ahead, of the catalog row the previous start
 *   found live, the write and the next start's id, bound, in one pipeline (`startAhead`).
 *
 * Two server cores on one database, one with `startAhead: false`, in this process; each round
 * starts a 3-step chain `--starts` times on each, one at a time (`--clients 1`) or from several
 * concurrent callers. No worker runs: the first command stays queued (its notification is published
 * to an in-memory broker). Prints the wall time, the PostgreSQL backends' CPU and this process's
 * CPU per start, medians of alternating rounds, and how many starts went in one pipeline.
 *
 *   npm run build && node dist/bench/starts.js [--starts 400] [--rounds 6] [--clients 1]
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) names the server; the bench
 * creates and drops a database of its own there. Figures only; nothing asserts.
 */
import { parseArgs } from 'node:util';
import { createServerCore, type ServerCore } from '../server/core.js';
import { secretsHooks } from '../server/secrets/hooks.js';
import type { PgExecutionService } from '../server/executions/service.js';
import { createTestDatabase } from '../test/helpers/pg.js';
import { pgCpu } from './pg-cpu.js';
import { processCpuMs } from './proc-cpu.js';

const { values: args } = parseArgs({ options: {
  starts: { type: 'string', default: '400' }, rounds: { type: 'string', default: '6' }, clients: { type: 'string', default: '1' },
} });
const STARTS = Number(args.starts);
const ROUNDS = Number(args.rounds);
const CLIENTS = Number(args.clients);
for (const [k, v] of [['starts', STARTS], ['rounds', ROUNDS], ['clients', CLIENTS]] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer`);
}

const PLAYBOOK = `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: chain, path: bench/starts }
workflow:
${[1, 2, 3].map((i) => `  - step: s${i}
    tool: { kind: http, method: GET, endpoint: "http://127.0.0.1:9/item/${i}" }${i < 3 ? `\n    next: s${i + 1}` : ''}`).join('\n')}
`;

async function main() {
  const tdb = await createTestDatabase('pfbench_st');
  const cores: Record<string, ServerCore> = {};
  try {
    for (const [way, startAhead] of [['two trips', false], ['pipeline', true]] as const) {
      cores[way] = await createServerCore({
        databaseUrl: tdb.url, brokerUrl: 'memory', serverUrl: 'http://playflow.bench', sweeper: false, poolSize: Math.max(4, CLIENTS),
        hooks: secretsHooks, startAhead, serverName: `bench-${startAhead ? 'ahead' : 'two'}`,
      });
      await cores[way].start();
    }
    await cores['two trips'].deps.catalog.register(PLAYBOOK);
    const pgc = await pgCpu(tdb.url);
    const runStarts = async (core: ServerCore, n: number) => {
      let next = 0;
      await Promise.all(Array.from({ length: CLIENTS }, async () => {
        while (next++ < n) await core.deps.executions.start({ path: 'bench/starts', payload: { n: next } });
      }));
    };
    for (const core of Object.values(cores)) await runStarts(core, 100); // JIT, pools, prepared statements

    const figures: Record<string, Array<{ wall: number; backend: number; server: number }>> = {};
    const pipelined0 = (cores.pipeline.deps.executions as PgExecutionService).startsAhead.pipelined;
    for (let round = 0; round < ROUNDS; round++) {
      const order = Object.entries(cores);
      if (round % 2) order.reverse();
      for (const [way, core] of order) {
        const [b0, m0, t0] = [await pgc.read(), processCpuMs(process.pid), performance.now()];
        await runStarts(core, STARTS);
        const wall = performance.now() - t0;
        const [b1, m1] = [await pgc.read(), processCpuMs(process.pid)];
        (figures[way] ??= []).push({ wall: wall / STARTS, backend: pgc.since(b0, b1) / STARTS, server: (m1 - m0) / STARTS });
      }
    }
    const ahead = (cores.pipeline.deps.executions as PgExecutionService).startsAhead;
    await pgc.close();
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    console.log(`starts: a top-level start, ms per start (median of ${ROUNDS} rounds of ${STARTS}, ${CLIENTS} caller(s); synchronous_commit on)`);
    for (const [way, f] of Object.entries(figures)) {
      console.log(`  ${way.padEnd(9)} wall ${median(f.map((x) => x.wall)).toFixed(3)}, PostgreSQL CPU ${median(f.map((x) => x.backend)).toFixed(3)}, server CPU ${median(f.map((x) => x.server)).toFixed(3)}`);
    }
    console.log(`  pipelined: ${ahead.pipelined - pipelined0} of ${ROUNDS * STARTS} timed starts (the others found no id taken ahead); stale guesses: ${ahead.stale}`);
  } finally {
    for (const core of Object.values(cores)) await core.stop();
    await tdb.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
