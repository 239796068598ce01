/**
 * PostgreSQL's own time in `playflow_write_decision` (store/decision.ts), per kind of write, with
 * nothing else in the measurement: no client, no round trip, no commit. A procedure creates fresh
 * state for each call (an execution, the events before it, its queue row), commits it, then times
 * the call alone with clock_timestamp() and commits again (synchronous_commit off). The tables
 * are filled and analyzed first, so the functions' plans are those of a database in use.
 *
 * The four writes are shaped after a logged run of bench/executions (http steps):
 *   step   a call.done: eight events, the next command leased eagerly, the call's row closed,
 *          two summaries, the guard with one lease and a queue id reserved
 *   step_unguarded  the same write without the guard (as under the lock): the difference is
 *          what the speculation's guard costs
 *   claim  the speculated first claim of a row: one action_started, one lease (p_claims)
 *   start  an execution's first decision: three events, one queued command, one summary
 *   end    the call.done that ends it: six events, the row closed, the result, the snapshot
 *   step_one_row  the step's write with its eight events as one row (the next command given
 *          whole): what storing "fewer events per step" would save PostgreSQL's function
 *
 * --against-migration N also creates the two functions as migration N defined them (named
 * `*_before`) and times both in alternating rounds on the same writes: the ratio is what the
 * migrations after N changed. Figures only; nothing asserts.
 *
 *   npm run build && node dist/bench/decision-write.js [--calls 400] [--rounds 8] [--against-migration 340]
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) names the server; the bench
 * creates and drops a database of its own there (test/helpers/pg.ts createTestDatabase).
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadMigrations, migrate } from '../server/store/migrate.js';
import { createTestDatabase } from '../test/helpers/pg.js';

const { values: args } = parseArgs({
  options: {
    calls: { type: 'string', default: '400' },
    rounds: { type: 'string', default: '8' },
    'against-migration': { type: 'string' },
  },
});
const CALLS = Number(args.calls);
const ROUNDS = Number(args.rounds);
const AGAINST = args['against-migration'] === undefined ? undefined : Number(args['against-migration']);
for (const [k, v] of [['calls', CALLS], ['rounds', ROUNDS]] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer`);
}
if (AGAINST !== undefined && !Number.isInteger(AGAINST)) throw new Error('--against-migration must be a migration number');
const FUNCTIONS = /\bplayflow_(write_decision|decision_current)\b/g;

/** Migration N's CREATE FUNCTION statements with the functions renamed `*_before`. */
async function functionsOf(number: number): Promise<string> {
  const file = (await loadMigrations()).find((m) => m.number === number);
  if (!file) throw new Error(`--against-migration: no migration numbered ${number}`);
  if (!/CREATE (OR REPLACE )?FUNCTION playflow_write_decision\(/.test(file.sql)) throw new Error(`migration ${file.name} does not define playflow_write_decision`);
  return file.sql.replace(/^CREATE FUNCTION/gm, 'CREATE OR REPLACE FUNCTION').replace(FUNCTIONS, 'playflow_$1_before');
}

const response = {
  id: 'f7174fca-92bb-4356-bc30-9092cf964d00', data: { c: 17 }, status: 200,
  headers: { date: 'Fri, 04 Dec 2026 20:54:06 GMT', connection: 'keep-alive', 'keep-alive': 'timeout=5', 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
};
const command = (step: string, id: number) => ({
  args: {}, step, tool: { kind: 'http', method: 'GET', endpoint: `http://127.0.0.1:41581/inc?c=16&s=${id}` },
  attempt: 1, command_id: id, available_at: 1796417646222, max_deliveries: 3,
});
interface LoggedEvent {
  seq: number;
  name: string;
  step: string | null;
  command_id: number | null;
  payload: Record<string, unknown>;
}
/** A step's events after its call.done; `@Q@` is the queue id of the call's row, set per call. */
const stepEvents: LoggedEvent[] = [
  { seq: 5, name: 'call.done', step: 'start', command_id: 1, payload: { meta: { attempt: 1, queue_id: '@Q@', iteration: null, worker_id: 'w', duration_ms: 3 }, response } },
  { seq: 6, name: 'action_completed', step: 'start', command_id: 1, payload: { effects: { done: { item: null, result: response } }, outcome: 'ok' } },
  { seq: 7, name: 'step.exit', step: 'start', command_id: null, payload: { run: 1, result: response, superseded: [] } },
  { seq: 8, name: 'step_completed', step: 'start', command_id: null, payload: { run: 1, result: response } },
  { seq: 9, name: 'transition', step: 'start', command_id: null, payload: { from: 'start', targets: [{ args: {}, step: 'two', queued: false }] } },
  { seq: 10, name: 'step.enter', step: 'two', command_id: null, payload: { run: 1, args: {}, from: 'start' } },
  { seq: 11, name: 'command_issued', step: 'two', command_id: 2, payload: { run: 1, item: null, kind: 'call', command: command('two', 2), chain_index: 1 } },
  { seq: 12, name: 'action_started', step: 'two', command_id: 2, payload: { delivery: 1, queue_id: '999', worker_id: 'w', lease_until: '2026-12-04T20:54:26.222Z' } },
];

interface WriteCase {
  /** Events already in the log (seq 1..n). */
  events: number;
  /** The execution's queue row for command 1, if any. */
  queue: 'leased' | 'queued' | null;
  /** The call's arguments after the execution id, as SQL; `@E@` and `@Q@` are replaced per call. */
  args: string[];
}

const lit = (x: unknown) => `'${JSON.stringify(x).replaceAll("'", "''")}'`;
const nextCommand = { step: 'two', status: null, delay_ms: 0, queue_id: null, worker_id: 'w', command_id: 2, lease_token: 'A0', lease_until: '2036-12-04T20:54:26.222Z', max_deliveries: 3 };
const NO_SHARES = ['NULL', 'NULL', `'{}'`, `'{}'`, 'true'];
const CASES: Record<string, WriteCase> = {
  step: {
    events: 4, queue: 'leased', args: [
      lit(stepEvents),
      lit([nextCommand]),
      lit([{ status: 'done', command_id: 1 }]), `'running'`, 'NULL', 'NULL',
      lit({ two: { runs: 1, status: 'running' }, start: { runs: 1, result: response, status: 'completed' } }), 'false', 'NULL', 'NULL', 'true', ...NO_SHARES,
      '4', lit([{ queue_id: '@Q@', worker_id: 'w', lease_token: 'tok' }]), `'{}'`, '1', `'[]'`,
    ],
  },
  step_unguarded: { events: 4, queue: 'leased', args: [] }, // step's arguments with the guard's three NULL (below)
  claim: {
    events: 3, queue: 'queued', args: [
      lit([{ seq: 4, name: 'action_started', step: 'start', command_id: 1, payload: { delivery: 1, queue_id: '@Q@', worker_id: 'w', lease_until: '2026-12-04T20:54:26.240Z' } }]),
      `'[]'`, `'[]'`, `'running'`, 'NULL', 'NULL', `'{}'`, 'false', 'NULL', 'NULL', 'true', ...NO_SHARES,
      '3', `'[]'`, `'{}'`, '1', lit([{ queue_id: '@Q@', worker_id: 'w', lease_token: 'Mv4', lease_until: '2036-12-04T20:54:26.240Z' }]),
    ],
  },
  start: {
    events: 0, queue: null, args: [
      lit([
        { seq: 1, name: 'execution_started', step: null, command_id: null, payload: { execution_id: '@E@', path: 'b/c', version: 1, catalog_id: '1', payload: { c: 0 }, parent_execution_id: null, root_execution_id: '@E@', entry: 'start' } },
        { seq: 2, name: 'step.enter', step: 'start', command_id: null, payload: { run: 1, args: {}, from: null } },
        { seq: 3, name: 'command_issued', step: 'start', command_id: 1, payload: { command: command('start', 1), run: 1, kind: 'call', item: null, chain_index: 1 } },
      ]),
      lit([{ command_id: 1, step: 'start', max_deliveries: 3, delay_ms: 0, status: null }]), `'[]'`, `'started'`, 'NULL', 'NULL',
      lit({ start: { status: 'running', runs: 1 } }), 'false', 'NULL', 'NULL', 'true', ...NO_SHARES, 'NULL', 'NULL', 'NULL', '0', `'[]'`,
    ],
  },
  end: {
    events: 1, queue: 'leased', args: [
      lit(stepEvents.slice(0, 5).map((e, i) => ({ ...e, seq: 2 + i })).concat([{ seq: 7, name: 'execution_completed', step: null, command_id: null, payload: { result: response } }])),
      `'[]'`, lit([{ status: 'done', command_id: 1 }]), `'completed'`, lit(response), 'NULL',
      lit({ start: { runs: 1, result: response, status: 'completed' } }), 'true', '7',
      lit({ status: 'completed', steps: { start: { runs: 1, result: response, status: 'completed' } } }), 'true', ...NO_SHARES, 'NULL', 'NULL', 'NULL', '0', `'[]'`,
    ],
  },
};

CASES.step_unguarded!.args = CASES.step!.args.map((a, i, all) => (i >= all.length - 5 && i < all.length - 2 ? 'NULL' : a));
// the step's arguments with its events (p_events) as one row and its command (p_commands) whole,
// since no command_issued row is left to carry it
const [, , ...stepRest] = CASES.step!.args;
CASES.step_one_row = {
  ...CASES.step!,
  args: [
    lit([{ seq: 5, name: 'step', step: 'start', command_id: null, payload: { events: stepEvents } }]),
    lit([{ ...nextCommand, cmd: command('two', 2) }]),
    ...stepRest,
  ],
};

/** A procedure timing `calls` writes of one case by the function `fn`, each on fresh state; returns µs in total. */
function procedure(name: string, c: WriteCase, fns: string[]): string {
  const cmd = lit(command('start', 1));
  // replace() gives text: an argument with a placeholder is cast back to jsonb (all of them are jsonb)
  const argList = c.args.map((a) => (a.includes('@') ? `replace(replace(${a}, '@E@', eid::text), '@Q@', coalesce(qid::text, ''))::jsonb` : a)).join(', ');
  const queueRow = c.queue === 'leased'
    ? `INSERT INTO queue (execution_id, command_id, step, command, status, attempts, worker_id, lease_token, lease_until)
         VALUES (eid, 1, 'start', ${cmd}, 'leased', 1, 'w', 'tok', now() + interval '1 hour') RETURNING queue_id INTO qid;`
    : c.queue === 'queued' ? `INSERT INTO queue (execution_id, command_id, step, command) VALUES (eid, 1, 'start', ${cmd}) RETURNING queue_id INTO qid;` : '';
  const calls = fns.map((fn, i) => `${i === 0 ? 'IF' : 'ELSIF'} variant = ${i} THEN PERFORM ${fn}(eid, ${argList});`).join('\n      ');
  return `CREATE PROCEDURE ${name}(calls integer, variant integer, INOUT total_us double precision DEFAULT 0) LANGUAGE plpgsql AS $p$
DECLARE eid bigint; qid bigint; t0 timestamptz;
BEGIN
  total_us := 0;
  FOR i IN 1..calls LOOP
    INSERT INTO execution (catalog_id, path, version, root_execution_id, status) VALUES (1, 'b/c', 1, 0, 'running') RETURNING execution_id INTO eid;
    FOR s IN 1..${c.events} LOOP
      INSERT INTO event (execution_id, seq, name, step, command_id, payload)
      VALUES (eid, s, CASE s WHEN 3 THEN 'command_issued' WHEN 4 THEN 'action_started' ELSE 'step.enter' END, 'start', CASE WHEN s >= 3 THEN 1 END, '{"run":1}');
    END LOOP;
    qid := NULL;
    ${queueRow}
    COMMIT;
    t0 := clock_timestamp();
    ${calls}
    END IF;
    total_us := total_us + extract(epoch FROM clock_timestamp() - t0) * 1e6;
    COMMIT;
  END LOOP;
END $p$`;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

async function main() {
  const tdb = await createTestDatabase('pfbench_dw');
  const url = tdb.url;
  try {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    await migrate(pool);
    await pool.end();
    const fns = ['playflow_write_decision', ...(AGAINST === undefined ? [] : ['playflow_write_decision_before'])];
    const setup = new pg.Client({ connectionString: url });
    await setup.connect();
    if (AGAINST !== undefined) await setup.query(await functionsOf(AGAINST));
    await setup.query(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('b/c', 1, '', '{}', '')`);
    for (const [kind, c] of Object.entries(CASES)) await setup.query(procedure(`bench_${kind}`, c, fns));
    // tables of a database in use, analyzed, before any plan that is timed is made
    await setup.query('SET synchronous_commit = off');
    for (const kind of Object.keys(CASES)) for (let v = 0; v < fns.length; v++) await setup.query(`CALL bench_${kind}(2000, ${v})`);
    await setup.query('ANALYZE');
    await setup.end();

    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query('SET synchronous_commit = off');
    const us: Record<string, number[][]> = Object.fromEntries(Object.keys(CASES).map((k) => [k, fns.map(() => [])]));
    for (let round = 0; round <= ROUNDS; round++) {
      const order = fns.map((_, i) => i);
      if (round % 2) order.reverse();
      for (const v of order) for (const kind of Object.keys(CASES)) {
        const { rows } = await c.query<{ total_us: number }>(`CALL bench_${kind}($1, $2)`, [round === 0 ? 50 : CALLS, v]);
        if (round > 0) us[kind]![v]!.push(rows[0]!.total_us / CALLS); // round 0 warms this session's plans
      }
    }
    await c.end();
    console.log(`decision-write: PostgreSQL's time in playflow_write_decision per call, µs (median of ${ROUNDS} rounds of ${CALLS} calls; each call on fresh state)`);
    for (const [kind, v] of Object.entries(us)) {
      const now = median(v[0]!);
      const line = `  ${kind.padEnd(14)} ${now.toFixed(0).padStart(5)} µs`;
      if (fns.length === 1) console.log(line);
      else {
        // each round times both versions back to back: the ratio of a round is the paired figure
        const ratios = v[0]!.map((x, i) => x / v[1]![i]!).sort((a, b) => a - b);
        console.log(`${line}   as migration ${AGAINST} defined it ${median(v[1]!).toFixed(0).padStart(5)} µs   now ÷ then, median of the rounds ${median(ratios).toFixed(2)} (${ratios[0]!.toFixed(2)}–${ratios[ratios.length - 1]!.toFixed(2)})`);
      }
    }
  } finally {
    await tdb.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
