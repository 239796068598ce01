/**
 * Schedules for real: the in-process server of the harness plus a second server process (the CLI's
 * `server start`) on the same PostgreSQL, both running the schedule ticker; a worker process;
 * local HTTP services. Ticks are claimed in the database, so every tick is decided once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { startHarness, type Harness } from './harness.js';
import type { ServerCore } from '../../server/core.js';

let h: Harness;
let serverB: ChildProcess | undefined;
const PORT_B = 31611;
const urlB = `http://127.0.0.1:${PORT_B}`;
let api: Server;
let apiUrl: string;
const held: Array<() => void> = [];
let holding = true;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const core = () => h.server.core as unknown as ServerCore;

async function call(method: string, url: string, body?: unknown, base = h.url): Promise<{ status: number; body: any }> {
  const r = await fetch(`${base}${url}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

async function register(name: string, yaml: string): Promise<void> {
  const file = path.join(h.tmp, `${name}.yaml`);
  writeFileSync(file, yaml);
  const r = await h.cli(['catalog', 'register', 'playbook', file]);
  expect(r.code, r.stderr).toBe(0);
}

async function ticksOf(name: string): Promise<Array<{ tick: string; outcome: string; execution_id: string | null; reason: string | null }>> {
  const r = await call('GET', `/api/schedules/${encodeURIComponent(name)}/ticks?limit=1000`);
  expect(r.status).toBe(200);
  return r.body.ticks.reverse();
}

async function executionsOf(name: string): Promise<Array<{ execution_id: string; schedule_tick: string; status: string }>> {
  const { rows } = await core().db.pool.query<{ execution_id: string; schedule_tick: Date; status: string }>(
    `SELECT e.execution_id::text, e.schedule_tick, e.status FROM execution e JOIN schedule s USING (schedule_id) WHERE s.name = $1 ORDER BY e.schedule_tick`, [name]);
  return rows.map((r) => ({ ...r, schedule_tick: r.schedule_tick.toISOString() }));
}

const startServerB = () => h.startServer(PORT_B);

const head = (p: string) => `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: ${p.replace(/\//g, '-')}, path: ${p}}\nworkflow:\n`;

beforeAll(async () => {
  api = createServer((req, res) => {
    const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok": true}');
    if (holding) held.push(answer);
    else answer();
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  h = await startHarness();
  await register('noop', `${head('sched/noop')}  - step: start\n    next: end\n  - step: end\n`);
  await register('hold', `${head('sched/hold')}  - step: wait\n    tool: {kind: http, method: GET, url: "${apiUrl}/hold"}\n`);
  serverB = await startServerB();
}, 120_000);

afterAll(async () => {
  holding = false;
  held.splice(0).forEach((f) => f());
  await h?.close(); // stops server B too
  await new Promise((r) => api?.close(r));
});

describe('schedules', () => {
  it('an every-second schedule fires exactly once per tick with two server processes', async () => {
    const put = await call('PUT', '/api/schedules/every-second', { cron: '* * * * * *', path: 'sched/noop', payload: { from: 'schedule' } });
    expect(put.status).toBe(201);
    expect(put.body).toMatchObject({ name: 'every-second', source: 'api', timezone: 'UTC', concurrency_policy: 'Allow', missed_runs: 'RunOnce', suspend: false });
    // the second server sees and serves the same schedule
    expect((await call('GET', '/api/schedules/every-second', undefined, urlB)).body.next_run).toBe(put.body.next_run);
    await sleep(10_000);
    expect((await call('PUT', '/api/schedules/every-second', { cron: '* * * * * *', path: 'sched/noop', payload: { from: 'schedule' }, suspend: true })).status).toBe(200);
    await sleep(1500); // a pass in flight settles
    const ticks = await ticksOf('every-second');
    const execs = await executionsOf('every-second');
    // every second between the first and the last decided tick was decided exactly once
    const times = ticks.map((t) => Date.parse(t.tick));
    expect(new Set(times).size).toBe(times.length);
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1000);
    expect(ticks.length).toBeGreaterThanOrEqual(5);
    // each started tick has exactly one execution, recorded with its schedule and tick
    const started = ticks.filter((t) => t.outcome === 'started');
    expect(started.length).toBeGreaterThanOrEqual(5);
    expect(execs.map((e) => e.schedule_tick)).toEqual(started.map((t) => t.tick));
    expect(started.map((t) => t.execution_id)).toEqual(execs.map((e) => e.execution_id));
    const one = (await call('GET', `/api/execution/${execs[0].execution_id}`)).body;
    expect(one).toMatchObject({ path: 'sched/noop', payload: { from: 'schedule' }, schedule_tick: execs[0].schedule_tick });
    expect(one.schedule_id).toMatch(/^\d+$/);
  }, 60_000);

  it('Forbid skips the ticks while an execution of the schedule runs', async () => {
    holding = true;
    expect((await call('PUT', '/api/schedules/forbid', { cron: '* * * * * *', path: 'sched/hold', concurrency_policy: 'Forbid' })).status).toBe(201);
    for (let i = 0; i < 100 && held.length === 0; i++) await sleep(100);
    await sleep(3000);
    await call('PUT', '/api/schedules/forbid', { cron: '* * * * * *', path: 'sched/hold', concurrency_policy: 'Forbid', suspend: true });
    await sleep(1500);
    const ticks = await ticksOf('forbid');
    const execs = await executionsOf('forbid');
    expect(execs).toHaveLength(1);
    expect(ticks.filter((t) => t.outcome === 'started')).toHaveLength(1);
    const skipped = ticks.filter((t) => t.outcome === 'skipped');
    expect(skipped.length).toBeGreaterThanOrEqual(2);
    expect(skipped[0].reason).toContain(`execution ${execs[0].execution_id} still running`);
    holding = false;
    held.splice(0).forEach((f) => f());
  }, 60_000);

  it('ticks missed while no server ran: RunOnce starts one execution for them, Skip none (a real server restart)', async () => {
    // server B is the only one ticking: the in-process server keeps serving the API with its
    // ticker off (as PLAYFLOW_SCHEDULER=off), and B is stopped, then started again 3 ticks later
    await core().ticker.stop();
    const exited = new Promise((r) => serverB!.once('exit', r));
    serverB!.kill('SIGTERM');
    await exited;
    try {
      for (const name of ['missed-once', 'missed-skip']) {
        const put = await call('PUT', `/api/schedules/${name}`, { cron: '* * * * * *', path: 'sched/noop', missed_runs: name === 'missed-once' ? 'RunOnce' : 'Skip' });
        expect(put.status).toBe(201);
      }
      await sleep(3600); // three ticks or more pass with no server to fire them
      serverB = await startServerB(); // the server comes back
      for (let i = 0; i < 300 && !(await ticksOf('missed-once')).some((t) => /RunOnce for \d+ missed/.test(t.reason ?? '')); i++) await sleep(100);
      for (let i = 0; i < 300 && !(await ticksOf('missed-skip')).some((t) => t.outcome !== 'missed'); i++) await sleep(100);
      for (const name of ['missed-once', 'missed-skip']) {
        await call('PUT', `/api/schedules/${name}`, { cron: '* * * * * *', path: 'sched/noop', missed_runs: name === 'missed-once' ? 'RunOnce' : 'Skip', suspend: true });
      }
      await sleep(1500); // a pass in flight settles

      // RunOnce: the ticks nobody fired are recorded missed, and the latest of them started once
      const once = await ticksOf('missed-once');
      const caughtUp = once.findIndex((t) => /RunOnce for \d+ missed/.test(t.reason ?? ''));
      expect(caughtUp).toBeGreaterThanOrEqual(2);
      expect(once.slice(0, caughtUp).every((t) => t.outcome === 'missed')).toBe(true);
      expect(once[caughtUp].outcome).toBe('started');
      const onceExecs = await executionsOf('missed-once');
      const upToCatchUp = onceExecs.filter((e) => Date.parse(e.schedule_tick) <= Date.parse(once[caughtUp].tick));
      expect(upToCatchUp.map((e) => e.schedule_tick)).toEqual([once[caughtUp].tick]);
      // after that the restarted server fires ticks again (on a loaded machine a late pass may record more missed ones)
      expect(once.slice(caughtUp + 1).every((t) => t.outcome === 'started' || t.outcome === 'missed')).toBe(true);

      // Skip: three or more missed ticks, none of them started
      const skip = await ticksOf('missed-skip');
      const missed = skip.filter((t) => t.outcome === 'missed');
      expect(missed.length).toBeGreaterThanOrEqual(3);
      expect(skip.slice(0, 3).every((t) => t.outcome === 'missed')).toBe(true);
      const missedTimes = new Set(missed.map((t) => t.tick));
      expect((await executionsOf('missed-skip')).filter((e) => missedTimes.has(e.schedule_tick))).toEqual([]);
    } finally {
      core().ticker.start();
    }
  }, 90_000);

  it('a playbook declares its schedules: registered with it, changed and removed with it; the CLI manages API schedules', async () => {
    const yaml = (cron: string, extra = '') => `${head('sched/declared')}  - step: start\nschedules:\n  - {name: nightly, cron: "${cron}", timezone: Europe/Berlin, concurrency_policy: Forbid, payload: {k: 1}}\n${extra}`;
    await register('declared', yaml('0 30 2 * * *', '  - {name: hourly, cron: "0 0 * * * *"}\n'));
    let list = (await call('GET', '/api/schedules?path=sched/declared')).body.schedules;
    expect(list.map((s: any) => s.name)).toEqual(['sched.declared:hourly', 'sched.declared:nightly']);
    expect(list[1]).toMatchObject({ source: 'playbook', cron: '0 30 2 * * *', timezone: 'Europe/Berlin', concurrency_policy: 'Forbid', payload: { k: 1 }, version: null });
    expect(new Date(list[1].next_run).getUTCMinutes()).toBe(30);
    // the API may not change what the playbook declares
    expect((await call('PUT', '/api/schedules/sched.declared:nightly', { cron: '* * * * *', path: 'sched/declared' })).status).toBe(409);
    // a new version without `hourly`: it is removed
    await register('declared2', yaml('0 45 2 * * *'));
    list = (await call('GET', '/api/schedules?path=sched/declared')).body.schedules;
    expect(list.map((s: any) => [s.name, s.cron])).toEqual([['sched.declared:nightly', '0 45 2 * * *']]);
    // a bad cron in the playbook is refused before anything is stored
    const file = path.join(h.tmp, 'bad-sched.yaml');
    writeFileSync(file, yaml('61 * * * * *'));
    const bad = await h.cli(['catalog', 'register', 'playbook', file]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('schedules[0].cron');
    expect((await call('GET', '/api/catalog/playbook/sched/declared')).body.version).toBe(2);

    const set = await h.cli(['schedule', 'set', 'cli-made', '--cron', '0 0 3 * * *', '--path', 'sched/noop', '--concurrency', 'Replace', '--output', 'json']);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ name: 'cli-made', concurrency_policy: 'Replace', suspend: false });
    expect((await h.cli(['schedule', 'suspend', 'cli-made'])).code).toBe(0);
    expect((await call('GET', '/api/schedules/cli-made')).body.suspend).toBe(true);
    const table = await h.cli(['schedule', 'list']);
    expect(table.stdout).toMatch(/cli-made\s+api\s+0 0 3 \* \* \*/);
    expect((await h.cli(['schedule', 'delete', 'cli-made'])).code).toBe(0);
    expect((await call('GET', '/api/schedules/cli-made')).status).toBe(404);
  });

  it('bad declarations are 400 naming the field; the source owns a schedule', async () => {
    const bad = async (body: object, field: string) => {
      const r = await call('PUT', '/api/schedules/bad', body);
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain(field);
    };
    await bad({ cron: 'every day', path: 'sched/noop' }, 'cron');
    await bad({ cron: '* * * * *', timezone: 'Mars/Olympus', path: 'sched/noop' }, 'timezone');
    await bad({ cron: '* * * * *', path: 'sched/noop', concurrency_policy: 'Sometimes' }, 'concurrency_policy');
    await bad({ cron: '* * * * *' }, 'path');
    expect((await call('GET', '/api/schedules/bad')).status).toBe(404);
    expect((await call('PUT', '/api/schedules/k8s-owned', { cron: '0 0 * * *', path: 'sched/noop', source: 'kubernetes' })).status).toBe(201);
    const clash = await call('PUT', '/api/schedules/k8s-owned', { cron: '0 0 * * *', path: 'sched/noop' });
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe('owned_elsewhere');
    expect((await call('DELETE', '/api/schedules/k8s-owned')).status).toBe(409);
    expect((await call('DELETE', '/api/schedules/k8s-owned?source=kubernetes')).status).toBe(200);
    expect((await call('GET', '/api/schedules/k8s-owned')).status).toBe(404);
  });
});
