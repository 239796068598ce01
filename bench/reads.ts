/**
 * What a status poll costs: GET /api/execution/{id} of a running execution whose 40 steps have
 * run, over HTTP from one client, sequentially, as a client that polls does (the peers' W1 driver
 * polls every 10 ms). Prints CPU per read for the server process (client included) and the
 * PostgreSQL backends. Figures only; nothing asserts.
 *
 *   npm run build && node dist/bench/reads.js [reads=3000]
 */
import pg from 'pg';
import { startStack } from './support.js';
import type { ClaimedCommand } from '../common/protocol.js';
import { callDone, chainPlaybook } from '../server/executions/testkit.js';

const READS = Number(process.argv[2] ?? 3000);
const STEPS = 40;

async function main() {
  const stack = await startStack({ workers: 0 });
  try {
    await stack.client.registerPlaybook(chainPlaybook('bench/reads', STEPS + 1));
    const ex = stack.server.core.deps.executions;
    const { execution_id: id } = await ex.start({ path: 'bench/reads', payload: {} });
    // run 40 steps through the service as a worker would, leaving the 41st leased: running, cached
    const db = new pg.Client({ connectionString: stack.server.config.databaseUrl });
    await db.connect();
    const { rows: [first] } = await db.query<{ queue_id: string }>('SELECT queue_id::text FROM queue WHERE execution_id = $1', [id]);
    await db.end();
    let cmd: ClaimedCommand | undefined = await ex.claim(first.queue_id, { worker_id: 'bench' });
    for (let i = 0; i < STEPS && cmd; i++) {
      cmd = (await ex.handleEvents([callDone(cmd, { response: { i, note: 'a step result of some size' } })], { claimNext: { worker_id: 'bench', max: 1 } })).claimed?.[0];
    }
    for (let i = 0; i < 200; i++) await stack.client.getExecution(id); // warm-up
    const p0 = await stack.pg.read();
    const c0 = stack.cpu();
    const t0 = performance.now();
    for (let i = 0; i < READS; i++) {
      const x = await stack.client.getExecution(id);
      if (x.status !== 'running') throw new Error(`execution ${id} is ${x.status}`);
    }
    const wall = performance.now() - t0;
    const c1 = stack.cpu();
    const p1 = await stack.pg.read();
    const per = (ms: number) => `${((ms / READS) * 1000).toFixed(0)} µs`;
    console.log(`reads: ${READS} GET /api/execution/{id} of a running ${STEPS}-step execution: ${per(wall)} wall per read; CPU per read: server process (client included) ${per(c1.server - c0.server)}, PostgreSQL backends ${per(stack.pg.since(p0, p1))}`);
  } finally {
    await stack.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
