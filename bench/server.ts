/**
 * Per-step server cost on the real database: for each step of a 100-step chain, claim the
 * command over HTTP, report its call.done over HTTP (the server folds the state, runs the engine,
 * appends the events and inserts the next queue row in one transaction), and take the next
 * notification from the in-process broker. No tool runs: what is left is the server's own work.
 * Then the same chains with eager dispatch, the worker's default: call.done carries claim_next and
 * its answer is the next command, leased; for those it also prints the CPU per step of this
 * process and of its PostgreSQL backends.
 * The client is the worker's (PlayflowClient over its pooled undici transport) and the server has
 * the production execution hooks (vars, keychain), as `server start` wires them.
 *
 *   npm run build && node dist/bench/server.js [steps=100] [runs=3]
 *   (BENCH_EXPLAIN=1: each statement's plan with its actual times goes to PostgreSQL's log, by auto_explain)
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { PlayflowClient } from '../client/http.js';
import type { ClaimedCommand, EventsAck } from '../common/protocol.js';
import { buildApp } from '../server/app/index.js';
import { createServerCore } from '../server/core.js';
import { createSecretsHooks } from '../server/secrets/hooks.js';
import { createServerFetch } from '../worker/server-fetch.js';
import { chainPlaybook } from '../server/executions/testkit.js';
import { silentLogger } from '../common/logger.js';
import { parseBool } from '../common/config.js';
import { tuneV8Tiering } from '../common/v8-tiering.js';
import { pgCpu } from './pg-cpu.js';

const STEPS = Number(process.argv[2] ?? 100);
const RUNS = Number(process.argv[3] ?? 3);
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function main() {
  tuneV8Tiering(process.env); // as `server start` does (PLAYFLOW_V8_INTERRUPT_BUDGET=default for V8's own)
  const name = `pfbench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  if (process.env.BENCH_LOG_STATEMENTS) await admin.query(`ALTER DATABASE "${name}" SET log_statement = 'all'`);
  if (process.env.BENCH_EXPLAIN) for (const s of ["session_preload_libraries = 'auto_explain'", 'auto_explain.log_min_duration = 0', 'auto_explain.log_analyze = on', 'auto_explain.log_buffers = on']) await admin.query(`ALTER DATABASE "${name}" SET ${s}`);
  if (process.env.BENCH_ASYNC_COMMIT) await admin.query(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const core = await createServerCore({
    databaseUrl: url.toString(), brokerUrl: 'memory', serverUrl: 'http://bench', sweeper: false, poolSize: 8,
    hooks: createSecretsHooks({ logger: silentLogger }),
    // PLAYFLOW_SPECULATIVE_WRITES=off: every step takes the lock first (A/B of the one-round-trip write)
    speculativeWrites: parseBool(process.env.PLAYFLOW_SPECULATIVE_WRITES, 'PLAYFLOW_SPECULATIVE_WRITES', true),
  });
  await core.start();
  const expectCompleted = async (id: string) => {
    const x = await core.deps.executions.get(id);
    if (x?.status !== 'completed') throw new Error(`execution ${id} ended ${x?.status}`);
  };
  const app = await buildApp(core.deps);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const transport = createServerFetch();
  const client = new PlayflowClient({ baseUrl: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, fetch: transport.fetch });
  try {
    await core.deps.catalog.register(chainPlaybook('bench/chain', STEPS));
    const quantile = (xs: number[], p: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(p * xs.length))].toFixed(2);
    const gc = core.executions.groupCommits;

    // Notification → claim → call.done, each step (the spec's worker flow).
    const perStep: number[] = [];
    const parts = { fetch: [] as number[], claim: [] as number[], events: [] as number[] };
    for (let run = 0; run <= RUNS; run++) {
      const started = await client.run({ path: 'bench/chain', payload: {} });
      for (let i = 0; i < STEPS; i++) {
        const t0 = performance.now();
        const [msg] = await core.broker.fetch({ max: 1, expiresMs: 5000 });
        if (!msg) throw new Error(`no notification at step ${i + 1}`);
        msg.ack();
        const t1 = performance.now();
        const cmd = await client.claim(msg.data.queue_id, { worker_id: 'bench' });
        const t2 = performance.now();
        await client.sendEvents({ execution_id: started.execution_id, step: cmd.step, name: 'call.done', queue_id: cmd.queue_id, worker_id: cmd.worker_id, lease_token: cmd.lease_token, payload: { response: { i }, meta: { duration_ms: 0 } } });
        const t3 = performance.now();
        if (run > 0) { // run 0 warms pools, JIT and caches
          perStep.push(t3 - t0);
          parts.fetch.push(t1 - t0);
          parts.claim.push(t2 - t1);
          parts.events.push(t3 - t2);
        }
      }
      await expectCompleted(started.execution_id);
    }
    const tx = { n: gc.transactions, ms: gc.ms };
    const classic = [
      `without eager dispatch (notification + claim + call.done): median ${quantile(perStep, 0.5)} ms, p90 ${quantile(perStep, 0.9)} ms, p99 ${quantile(perStep, 0.99)} ms over ${perStep.length} steps`,
      `  medians: notification ${quantile(parts.fetch, 0.5)} ms, claim ${quantile(parts.claim, 0.5)} ms, call.done ${quantile(parts.events, 0.5)} ms; ${tx.n} transactions, mean ${(tx.ms / tx.n).toFixed(2)} ms`,
    ];

    // Eager dispatch, as the worker runs a chain: call.done with claim_next answers with the next
    // command already leased (one request and one transaction per step).
    const eager: number[] = [];
    // the pool is warm (the runs above): its backends are all there to be read before and after
    const backends = await pgCpu(url.toString());
    const pg0 = await backends.read();
    const cpu0 = process.cpuUsage();
    for (let run = 0; run <= RUNS; run++) {
      const started = await client.run({ path: 'bench/chain', payload: {} });
      const [msg] = await core.broker.fetch({ max: 1, expiresMs: 5000 });
      if (!msg) throw new Error('no notification for the first step');
      msg.ack();
      let cmd: ClaimedCommand | undefined = await client.claim(msg.data.queue_id, { worker_id: 'bench' });
      for (let i = 0; cmd; i++) {
        const t0 = performance.now();
        const ack: EventsAck = await client.sendEvents(
          { execution_id: started.execution_id, step: cmd.step, name: 'call.done', queue_id: cmd.queue_id, worker_id: cmd.worker_id, lease_token: cmd.lease_token, payload: { response: { i }, meta: { duration_ms: 0 } } },
          { claimNext: { worker_id: 'bench' } });
        if (run > 0) eager.push(performance.now() - t0);
        cmd = ack.claimed?.[0];
        if (!cmd && i + 1 < STEPS) throw new Error(`no eager command after step ${i + 1}`);
      }
      await expectCompleted(started.execution_id);
    }
    const etx = { n: gc.transactions - tx.n, ms: gc.ms - tx.ms };
    // CPU, not latency, is what issue 16 compares with the peers; this process is the server and its client
    const cpu = process.cpuUsage(cpu0);
    const pgMs = backends.since(pg0, await backends.read());
    await backends.close();
    const eagerSteps = (RUNS + 1) * STEPS;
    console.log(`server per step (claim + events + next command, as the worker does it: call.done with claim_next; HTTP, PostgreSQL on this machine): median ${quantile(eager, 0.5)} ms, p90 ${quantile(eager, 0.9)} ms, p99 ${quantile(eager, 0.99)} ms over ${eager.length} steps, ${etx.n} transactions of ${(etx.ms / etx.n).toFixed(2)} ms mean (issue 16's goal: ≤ 1.5 ms median)`);
    console.log(`  CPU per eager step of this process (server + its HTTP client): user ${(cpu.user / 1000 / eagerSteps).toFixed(2)} ms, system ${(cpu.system / 1000 / eagerSteps).toFixed(2)} ms; its PostgreSQL backends ${(pgMs / eagerSteps).toFixed(2)} ms`);
    for (const line of classic) console.log(line);
  } finally {
    await app.close();
    await transport.close();
    await core.close();
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
