/**
 * An execution's end as the server sent it until migration 360, against the pipeline it sends now
 * (executions/lazy-tx.ts `writeAndEnd`, server/pipeline.ts).
 *
 * Before: two simple queries, `BEGIN; SELECT … FROM playflow_write_decision(<values inlined>)`,
 * then the queue closed, the hooks' cleanup, NOTIFY and the open children with COMMIT. Their text
 * was parsed and planned each time, with several KB of JSON inlined as literals.
 *
 * Now: every statement is bound and prepared once per connection, and ONE Sync ends them.
 * PostgreSQL runs the statements before a Sync in one implicit transaction and commits at the
 * Sync: one round trip. (The server's speculative write is `playflow_write_decision_or_stale`,
 * which raises when its guard fails; here the write runs without a guard, as under the lock.)
 *
 * Each end runs on fresh state (an execution, its first event, its leased queue row) with
 * synchronous_commit on. Prints the wall time, the backend's CPU and this process's CPU per end
 * for both ways, in alternating rounds, and checks that every execution ended with its row closed.
 *
 *   npm run build && node dist/bench/pipelined-end.js [--ends 500] [--rounds 6]
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) names the server; the bench
 * creates and drops a database of its own there (test/helpers/pg.ts createTestDatabase).
 * Figures only; nothing asserts.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { migrate } from '../server/store/migrate.js';
import { createTestDatabase } from '../test/helpers/pg.js';
import { WRITE_DECISION_OR_STALE, writeDecisionSql } from '../server/store/decision.js';
import { sqlLiterals } from '../server/store/sql.js';
import { END_PREPARED, endQuery, endStatements } from '../server/executions/decision-write.js';
import { secretsHooks } from '../server/secrets/hooks.js';
import { sendPipeline } from '../server/pipeline.js';
import { processCpuMs } from './proc-cpu.js';

const { values: args } = parseArgs({ options: { ends: { type: 'string', default: '500' }, rounds: { type: 'string', default: '6' } } });
const ENDS = Number(args.ends);
const ROUNDS = Number(args.rounds);
for (const [k, v] of [['ends', ENDS], ['rounds', ROUNDS]] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer`);
}

const response = { id: 'f7174fca', data: { c: 17 }, status: 200, headers: { date: 'Fri, 04 Dec 2026 20:54:06 GMT', connection: 'keep-alive', 'content-type': 'application/json' } };
const steps = { start: { runs: 1, result: response, status: 'completed' } };
const events = [
  { seq: 2, name: 'call.done', step: 'start', command_id: 1, payload: { meta: { attempt: 1, queue_id: '1', worker_id: 'w', duration_ms: 3 }, response } },
  { seq: 3, name: 'action_completed', step: 'start', command_id: 1, payload: { effects: { done: { item: null, result: response } }, outcome: 'ok' } },
  { seq: 4, name: 'step.exit', step: 'start', command_id: null, payload: { run: 1, result: response, superseded: [] } },
  { seq: 5, name: 'step_completed', step: 'start', command_id: null, payload: { run: 1, result: response } },
  { seq: 6, name: 'transition', step: 'start', command_id: null, payload: { from: 'start', targets: [] } },
  { seq: 7, name: 'execution_completed', step: null, command_id: null, payload: { result: response } },
];
/** The end's write (store/decision.ts parameter order): its call.done, the row closed, the result, the snapshot; no guard. */
const writeValues = (id: string): unknown[] => [
  id, JSON.stringify(events), '[]', JSON.stringify([{ status: 'done', command_id: 1 }]), 'completed', JSON.stringify(response), null,
  JSON.stringify(steps), true, 7, JSON.stringify({ status: 'completed', steps }), true, null, null, '{}', '{}', true, null, null, null, 0, '[]',
];

async function main() {
  const tdb = await createTestDatabase('pfbench_pe');
  const url = tdb.url;
  try {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    await migrate(pool);
    await pool.end();
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const { rows: [{ pid }] } = await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await c.query(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('b/c', 1, '', '{}', '')`);
    await c.query(END_PREPARED.map((p) => p.text).join('; '));

    const fresh = async (): Promise<string> => {
      const { rows: [{ id }] } = await c.query<{ id: string }>(`INSERT INTO execution (catalog_id, path, version, root_execution_id, status)
        VALUES (1, 'b/c', 1, 0, 'running') RETURNING execution_id::text AS id`);
      await c.query(`INSERT INTO event (execution_id, seq, name, payload) VALUES (${id}, 1, 'execution_started', '{}');
        INSERT INTO queue (execution_id, command_id, step, command, status, attempts, worker_id, lease_token) VALUES (${id}, 1, 'start', '{}', 'leased', 1, 'w', 't')`);
      return id;
    };
    // the statements decision-write.ts `ended` and `planEnd` send, with the secrets hooks' cleanup of a root
    const terminal = (id: string) => ({ execution_id: id, root_execution_id: id, catalog_id: '1', status: 'completed' as const });
    const ways: Record<string, (id: string) => Promise<void>> = {
      inlined: async (id) => {
        await c.query(`BEGIN; ${writeDecisionSql(sqlLiterals(writeValues(id))!)}`);
        await c.query(`${endQuery(id, secretsHooks.onExecutionTerminalSql!(terminal(id)), true)}; COMMIT`);
      },
      pipelined: async (id) => {
        const [written] = await sendPipeline(c, [
          { ...WRITE_DECISION_OR_STALE, values: writeValues(id) },
          ...endStatements(id, secretsHooks.onExecutionTerminalStatements!(terminal(id))),
        ]);
        if (written?.rows[0]?.current !== true) throw new Error(`execution ${id}: the pipelined write did not apply`);
      },
    };
    for (const f of Object.values(ways)) for (let i = 0; i < 50; i++) await f(await fresh());

    const figures: Record<string, Array<{ wall: number; backend: number; client: number }>> = {};
    for (let round = 0; round < ROUNDS; round++) {
      const order = Object.entries(ways);
      if (round % 2) order.reverse();
      for (const [way, end] of order) {
        const ids: string[] = [];
        for (let i = 0; i < ENDS; i++) ids.push(await fresh());
        const [b0, m0, t0] = [processCpuMs(pid), processCpuMs(process.pid), performance.now()];
        for (const id of ids) await end(id);
        (figures[way] ??= []).push({ wall: (performance.now() - t0) / ENDS, backend: (processCpuMs(pid) - b0) / ENDS, client: (processCpuMs(process.pid) - m0) / ENDS });
      }
    }
    const { rows: [check] } = await c.query<{ open: string; running: string }>(
      `SELECT (SELECT count(*) FROM queue WHERE status IN ('queued', 'leased'))::text AS open, (SELECT count(*) FROM execution WHERE status <> 'completed')::text AS running`);
    await c.end();
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    console.log(`pipelined-end: an execution's end, ms per end (median of ${ROUNDS} rounds of ${ENDS}; synchronous_commit on)`);
    for (const [way, f] of Object.entries(figures)) {
      console.log(`  ${way.padEnd(9)} wall ${median(f.map((x) => x.wall)).toFixed(3)}, backend CPU ${median(f.map((x) => x.backend)).toFixed(3)}, client CPU ${median(f.map((x) => x.client)).toFixed(3)}`);
    }
    console.log(`  left open: ${check!.open} queue rows, ${check!.running} executions not completed (both 0: every end applied)`);
  } finally {
    await tdb.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
