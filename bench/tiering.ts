/**
 * V8's tiering budget (PLAYFLOW_V8_INTERRUPT_BUDGET) on fresh processes: two stacks side by side,
 * each `playflow server start` and `playflow worker start` (the built CLI) on a database and
 * JetStream names of its own, seat A with one budget and seat B with another. Every round runs a
 * 40-step chain (python, then http against a local server) on both seats, in alternating order,
 * so the machine's drift between runs, larger on this VM than the effect, weighs on both alike;
 * a second session swaps the budgets' seats, so the seats' own difference cancels out. The
 * schedule is the peers' W1: a few rounds of warm-up, then the measured rounds, so the processes
 * are about as young as there. Prints per kind the median CPU per step under each budget (server,
 * worker and its interpreters, the database's backends) and the effect of budget b against a.
 *
 * `--flags-a` / `--flags-b` add node command-line flags to a seat's server and worker (V8 options
 * that cannot be set from inside a process, such as `--max-semi-space-size`); the peak resident
 * memory of each seat's server and worker is printed beside the CPU.
 *
 *   npm run build && node dist/bench/tiering.js [--a default] [--b 8192] [--flags-a=''] [--flags-b='--max-semi-space-size=32'] [--rounds 9] [--warmup 3]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PlayflowClient } from '../client/http.js';
import { freePort } from '../cli/dev/embedded-db.js';
import { createTestDatabase, type TestDatabase } from '../test/helpers/pg.js';
import { BROKER_URL, deleteStream, uniqueBrokerNames } from '../test/helpers/nats.js';
import { stopProcesses } from '../test/helpers/processes.js';
import { pgCpu, type PgCpu } from './pg-cpu.js';
import { processCpuMs } from './proc-cpu.js';
import { peersChainPlaybook, runWaiting } from './support.js';

const { values: args } = parseArgs({
  options: {
    a: { type: 'string', default: 'default' }, b: { type: 'string', default: '8192' },
    'flags-a': { type: 'string', default: '' }, 'flags-b': { type: 'string', default: '' },
    rounds: { type: 'string', default: '9' }, warmup: { type: 'string', default: '3' },
  },
});
const STEPS = 40;
const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'cli', 'index.js');

/** pid and every descendant of it (the worker's python interpreters). */
function withDescendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [child, p] of parent) if (p === out[i]) out.push(child);
  return out;
}

/** A seat's configuration: the tiering budget and node flags of its server and worker. */
interface Setting {
  budget: string;
  flags: string[];
}
const settingA: Setting = { budget: args.a!, flags: args['flags-a']!.split(/\s+/).filter(Boolean) };
const settingB: Setting = { budget: args.b!, flags: args['flags-b']!.split(/\s+/).filter(Boolean) };
const label = (s: Setting) => [s.budget, ...s.flags].join(' ');

/** Peak resident memory of a process in MiB (VmHWM), NaN when unreadable. */
function peakRssMiB(pid: number): number {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

interface Seat {
  name: string;
  client: PlayflowClient;
  db: TestDatabase;
  stream: string;
  pg: PgCpu;
  procs: ChildProcess[];
}

async function startSeat(name: string, setting: Setting): Promise<Seat> {
  const db = await createTestDatabase(`pftier_${name.toLowerCase()}`);
  const broker = uniqueBrokerNames(`TIER_${name}`);
  const procs: ChildProcess[] = [];
  try {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, BROKER_URL,
      BROKER_STREAM: broker.stream, BROKER_SUBJECT: broker.subject, BROKER_CONSUMER: broker.consumer,
      PORT: String(port), HOST: '127.0.0.1', SERVER_API_URL: url, LOG_LEVEL: 'warn',
      PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'), PLAYFLOW_V8_INTERRUPT_BUDGET: setting.budget,
    };
    const server = spawn(process.execPath, [...setting.flags, CLI, 'server', 'start'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    procs.push(server);
    for (const until = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 100))) {
      if (await fetch(`${url}/healthz`).then((r) => r.ok, () => false)) break;
      if (server.exitCode !== null || Date.now() > until) throw new Error(`seat ${name}: the server did not start`);
    }
    procs.push(spawn(process.execPath, [...setting.flags, CLI, 'worker', 'start', '--concurrency', '8'], { env: { ...env, WORKER_METRICS_PORT: '0' }, stdio: ['ignore', 'ignore', 'inherit'] }));
    await new Promise((r) => setTimeout(r, 1500)); // the worker connects and warms its interpreters
    return { name, client: new PlayflowClient({ baseUrl: url }), db, stream: broker.stream, pg: await pgCpu(db.url), procs };
  } catch (err) {
    // a seat that did not start leaves no process, database or stream behind (a bad --flags value)
    await stopProcesses(procs);
    await db.drop();
    await deleteStream(broker.stream);
    throw err;
  }
}

async function stopSeat(s: Seat): Promise<void> {
  await stopProcesses(s.procs);
  await s.pg.close();
  await s.db.drop();
  await deleteStream(s.stream);
}

/** One execution start to end (the run request's long poll); CPU per step of the seat's processes and backends. */
async function runOnce(s: Seat, playbookPath: string): Promise<{ cpu: number; wall: number }> {
  const pids = s.procs.flatMap((p) => withDescendants(p.pid!));
  const cpu0 = new Map(pids.map((p) => [p, processCpuMs(p)]));
  const pg0 = await s.pg.read();
  const { wall, status, error } = await runWaiting(s.client, playbookPath);
  if (status !== 'completed') throw new Error(`seat ${s.name}: ${playbookPath} ${status} ${JSON.stringify(error)}`);
  let cpu = s.pg.since(pg0, await s.pg.read());
  // an interpreter retired meanwhile took its CPU with it; one started meanwhile counts from zero
  for (const p of new Set([...pids, ...s.procs.flatMap((c) => withDescendants(c.pid!))])) {
    const now = processCpuMs(p);
    if (Number.isFinite(now)) cpu += now - (cpu0.get(p) ?? 0);
  }
  return { cpu: cpu / STEPS, wall };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface SessionResult { kind: 'python' | 'http'; cpuA: number; cpuB: number; cpu: number; wall: number }
/** Peak resident MiB of each seat's server and worker at the end of a session. */
type PeakRss = Record<'A' | 'B', { server: number; worker: number }>;

/** Both seats started fresh with these budgets; per kind the medians and the median ratios B/A. */
async function session(a: Setting, b: Setting, rounds: number, warmup: number, targetUrl: string): Promise<{ results: SessionResult[]; rss: PeakRss }> {
  const seats: Seat[] = [];
  try {
    seats.push(await startSeat('A', a)); // one at a time: a seat B that fails to start still stops A
    seats.push(await startSeat('B', b));
    for (const s of seats) for (const kind of ['python', 'http'] as const) await s.client.registerPlaybook(peersChainPlaybook(kind, targetUrl, `bench/tier_${kind}`, STEPS));
    const rows: Record<string, Array<Record<string, { cpu: number; wall: number }>>> = { python: [], http: [] };
    for (let r = 0; r < warmup + rounds; r++) {
      for (const kind of ['python', 'http'] as const) {
        const order = r % 2 ? seats : [...seats].reverse();
        const got: Record<string, { cpu: number; wall: number }> = {};
        for (const s of order) got[s.name] = await runOnce(s, `bench/tier_${kind}`);
        if (r >= warmup) rows[kind].push(got);
      }
    }
    const rssOf = (s: Seat) => ({ server: peakRssMiB(s.procs[0]!.pid!), worker: peakRssMiB(s.procs[1]!.pid!) });
    const rss = { A: rssOf(seats[0]!), B: rssOf(seats[1]!) };
    const results = (['python', 'http'] as const).map((kind) => {
      const rs = rows[kind];
      return {
        kind,
        cpuA: median(rs.map((x) => x.A!.cpu)),
        cpuB: median(rs.map((x) => x.B!.cpu)),
        cpu: median(rs.map((x) => x.B!.cpu / x.A!.cpu)),
        wall: median(rs.map((x) => x.B!.wall / x.A!.wall)),
      };
    });
    return { results, rss };
  } finally {
    for (const s of seats) await stopSeat(s);
  }
}

async function main() {
  const rounds = Number(args.rounds);
  const warmup = Number(args.warmup);
  const target: Server = createServer((req, res) => {
    const c = Number(new URL(req.url!, 'http://x').searchParams.get('c'));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ c: c + 1 }));
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  const targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
  try {
    // The seats are not alike (which process started first, which database): the second session
    // swaps the budgets, so ratio1/ratio2 is the budgets' effect squared and ratio1*ratio2 the
    // seats' bias squared.
    const first = await session(settingA, settingB, rounds, warmup, targetUrl);
    const second = await session(settingB, settingA, rounds, warmup, targetUrl);
    const f = (x: number) => x.toFixed(2);
    const [la, lb] = [label(settingA), label(settingB)];
    console.log(`tiering: ${lb} against ${la}; two sessions of two fresh stacks side by side (the settings swap seats in the second), each ${warmup} rounds of warm-up, then ${rounds}; a ${STEPS}-step chain per kind and seat each round`);
    for (let i = 0; i < first.results.length; i++) {
      const [x, y] = [first.results[i]!, second.results[i]!];
      console.log(`${x.kind}: CPU per step ${la} ${f(x.cpuA)} / ${f(y.cpuB)} ms, ${lb} ${f(x.cpuB)} / ${f(y.cpuA)} ms; ` +
        `${lb} ÷ ${la}: CPU ${f(Math.sqrt(x.cpu / y.cpu))}, wall ${f(Math.sqrt(x.wall / y.wall))} (seat B ÷ seat A: CPU ${f(Math.sqrt(x.cpu * y.cpu))})`);
    }
    const mib = (x: number) => x.toFixed(0);
    console.log(`peak resident memory (server / worker, MiB): ${la} ${mib(first.rss.A.server)} / ${mib(first.rss.A.worker)} and ${mib(second.rss.B.server)} / ${mib(second.rss.B.worker)}; ` +
      `${lb} ${mib(first.rss.B.server)} / ${mib(first.rss.B.worker)} and ${mib(second.rss.A.server)} / ${mib(second.rss.A.worker)}`);
  } finally {
    target.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
