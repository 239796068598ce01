/**
 * A long sequential playbook: one execution of an N-step chain (default 3,000; 10,000 with
 * `node dist/bench/long-playbook.js 10000`) driven as the worker drives it — each step's call.done
 * carries claim_next and its answer is the next command, leased — against the real server over
 * HTTP on a fresh PostgreSQL database. No tool runs, so what is measured is the server's and
 * PostgreSQL's own work per step and how it grows with the length of the execution.
 * Above 5,000 steps (or with BENCH_COMPACT=1) the same chain is written compactly: the catalog
 * refuses playbooks over 2 MiB.
 * Prints steps/s, server-process CPU per step and PostgreSQL-backend CPU per step over the first
 * and the last 10 % of the steps (flat is the goal: nothing per step should be O(steps so far)).
 *
 *   npm run build && node dist/bench/long-playbook.js [steps=3000]
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { PlayflowClient } from '../client/http.js';
import type { ClaimedCommand } from '../common/protocol.js';
import { silentLogger } from '../common/logger.js';
import { buildApp } from '../server/app/index.js';
import { createServerCore } from '../server/core.js';
import { chainPlaybook } from '../server/executions/testkit.js';
import { createSecretsHooks } from '../server/secrets/hooks.js';
import { createServerFetch } from '../worker/server-fetch.js';
import { pgCpu } from './pg-cpu.js';

const STEPS = Number(process.argv[2] ?? 3000);
const COMPACT = process.env.BENCH_COMPACT === '1' || STEPS > 5000;
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface Mark { t: number; cpu: number; pg: Map<number, number> }

/**
 * The chain of server/executions/testkit.ts (each step's args render the previous step's result)
 * in flow style, so 10,000 steps stay under the catalog's 2 MiB playbook limit.
 */
function compactChain(path: string, n: number): string {
  const steps: string[] = [];
  for (let i = 1; i <= n; i++) {
    const next = i < n ? `, next: [{ step: s${i + 1}, args: { prev: "{{ s${i}.i }}" } }]` : '';
    steps.push(`  - { step: s${i}, tool: { kind: python, code: r, args: { i: ${i}, prev: "{{ args.prev | default(0) }}" } }${next} }`);
  }
  return `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: { name: long, path: ${path} }\nworkflow:\n${steps.join('\n')}\n`;
}

async function main() {
  const name = `pfbench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const core = await createServerCore({
    databaseUrl: url.toString(), brokerUrl: 'memory', serverUrl: 'http://bench', sweeper: false, poolSize: 8,
    hooks: createSecretsHooks({ logger: silentLogger }),
  });
  await core.start();
  const app = await buildApp(core.deps);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const transport = createServerFetch();
  const client = new PlayflowClient({ baseUrl: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, fetch: transport.fetch });
  const pgc = await pgCpu(url.toString());
  try {
    await core.deps.catalog.register(COMPACT ? compactChain('bench/long', STEPS) : chainPlaybook('bench/long', STEPS));
    const mark = async (): Promise<Mark> => {
      const c = process.cpuUsage();
      return { t: performance.now(), cpu: (c.user + c.system) / 1000, pg: await pgc.read() };
    };
    const tenth = Math.max(1, Math.floor(STEPS / 10));
    const marks = new Map<number, Mark>();
    const started = await client.run({ path: 'bench/long', payload: {} });
    let msg;
    for (let i = 0; !msg && i < 12; i++) [msg] = await core.broker.fetch({ max: 1, expiresMs: 5000 }); // a long playbook starts slowly
    if (!msg) throw new Error('no notification for the first step');
    msg.ack();
    let cmd: ClaimedCommand | undefined = await client.claim(msg.data.queue_id, { worker_id: 'bench' });
    const t0 = performance.now();
    for (let i = 0; cmd; i++) {
      if (i === 0 || i === tenth || i === STEPS - tenth) marks.set(i, await mark());
      const ack = await client.sendEvents(
        { execution_id: started.execution_id, step: cmd.step, name: 'call.done', queue_id: cmd.queue_id, worker_id: cmd.worker_id, lease_token: cmd.lease_token, payload: { response: { i: i + 1 }, meta: { duration_ms: 0 } } },
        { claimNext: { worker_id: 'bench' } });
      cmd = ack.claimed?.[0];
      if (!cmd && i + 1 < STEPS) throw new Error(`no eager command after step ${i + 1}`);
    }
    const end = await mark();
    const total = (performance.now() - t0) / 1000;
    const x = await core.deps.executions.get(started.execution_id);
    if (x?.status !== 'completed') throw new Error(`execution ended ${x?.status}`);
    const span = (a: Mark, b: Mark, n: number) =>
      `${(n / ((b.t - a.t) / 1000)).toFixed(0)} steps/s, server CPU ${((b.cpu - a.cpu) / n).toFixed(2)} ms/step, PostgreSQL CPU ${(pgc.since(a.pg, b.pg) / n).toFixed(2)} ms/step`;
    console.log(`long playbook: ${STEPS} sequential steps in one execution (call.done + claim_next over HTTP, no tool): ${total.toFixed(1)} s, ${(STEPS / total).toFixed(0)} steps/s overall`);
    console.log(`  first 10 %: ${span(marks.get(0)!, marks.get(tenth)!, tenth)}`);
    console.log(`  last 10 %:  ${span(marks.get(STEPS - tenth)!, end, tenth)}`);
  } finally {
    await pgc.close();
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
