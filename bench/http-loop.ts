/**
 * A 1,000-item async loop of http calls to a local server, run by the real server and one worker
 * process (concurrency 32): items per second from the run request to the completed status, for
 * the first loop of the fresh processes and for a second one (the figure). The
 * called API runs on its own thread, as a service elsewhere would, so its requests do not queue
 * behind the Playflow server's on one event loop.
 *
 *   npm run build && node dist/bench/http-loop.js [items=1000] [inFlight=64]
 */
import { PgExecutionService } from '../server/executions/service.js';
import { startEchoApi, startStack, runToEnd } from './support.js';

const ITEMS = Number(process.argv[2] ?? 1000);
const IN_FLIGHT = Number(process.argv[3] ?? 64);

async function main() {
  const api = await startEchoApi();
  const apiUrl = api.url;
  const stack = await startStack({ workers: 1, concurrency: 32 });
  try {
    await stack.client.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: http_loop, path: bench/http_loop }
workflow:
  - step: start
    loop: { in: "{{ range(payload.items) | list }}", iterator: i, mode: async, max_in_flight: ${IN_FLIGHT} }
    tool:
      kind: http
      method: GET
      endpoint: "${apiUrl}/item/{{ i }}"
`);
    // The first loop of a fresh server and worker also pays for JIT compilation of their hot
    // paths; long-running processes have done that, so the figure is the second run's.
    const executions = stack.server.core.deps.executions;
    if (!(executions instanceof PgExecutionService)) throw new Error('the bench needs the PostgreSQL execution service');
    const gc = executions.groupCommits;
    const sp = executions.speculations;
    for (const label of ['first run (cold processes)', 'second run']) {
      const before = { ...gc };
      const spBefore = { ...sp };
      const p0 = await stack.pg.read();
      const c0 = stack.cpu();
      const r = await runToEnd(stack.client, 'bench/http_loop', { items: ITEMS });
      const c1 = stack.cpu();
      const p1 = await stack.pg.read();
      if (r.execution.status !== 'completed') throw new Error(`run ended ${r.execution.status}: ${JSON.stringify(r.execution.error)}`);
      const count = Array.isArray(r.execution.result) ? r.execution.result.length : 0;
      const tx = gc.transactions - before.transactions;
      const items = gc.items - before.items;
      console.log(`http-loop, ${label}: ${count} items in ${(r.wall / 1000).toFixed(2)} s wall = ${Math.round(count / (r.wall / 1000))} items/s (server-side ${(r.serverMs / 1000).toFixed(2)} s; ${IN_FLIGHT} in flight, worker concurrency 32; goal ≥ 1,000/s)`);
      console.log(`  group commit: ${items} requests in ${tx} transactions (${(items / Math.max(1, tx)).toFixed(1)} per transaction, ${((gc.ms - before.ms) / Math.max(1, tx)).toFixed(1)} ms each), ${gc.fallbacks - before.fallbacks} fallbacks`);
      const perItem = (ms: number) => `${(ms / Math.max(1, count)).toFixed(2)} ms`;
      console.log(`  CPU per item: server process ${perItem(c1.server - c0.server)}, worker ${perItem(c1.workers - c0.workers)}, PostgreSQL backends ${perItem(stack.pg.since(p0, p1))}`);
      console.log(`  speculative: ${sp.oneTrip - spBefore.oneTrip} in one round trip, ${sp.opened - spBefore.opened} opened first, ${sp.redone - spBefore.redone} decided again under the lock`);
    }
  } finally {
    await stack.close();
    await api.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
