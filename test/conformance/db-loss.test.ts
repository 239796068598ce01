/**
 * Lost database connections: a DBA (or a failover) terminates the server's backends while
 * executions run and workers report events. The server must stay up (an error, never an exit),
 * every execution must complete and every step's side effect must have happened exactly once.
 * Each python call appends `<execution> <step>` to a marker file, so the test counts real runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { ADMIN_URL } from '../helpers/pg.js';
import { startHarness, type Harness } from './harness.js';

const step = (name: string, next?: string) => `
  - step: ${name}
    tool:
      kind: python
      code: |
        import time
        def main(marker, execution):
            with open(marker, "a") as f:
                f.write(execution + " ${name}\\n")
            time.sleep(0.05)
            return {"step": "${name}"}
      args: { marker: "{{ workload.marker }}", execution: "{{ execution_id }}" }${next ? `\n    next: [{ step: ${next} }]` : ''}`;

const playbook = `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: db_loss, path: conformance/db_loss }
workflow:${step('start', 'second')}${step('second', 'third')}${step('third')}
`;

let h: Harness;

async function api(method: string, url: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${h.url}${url}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** Terminates every backend of the server's pool (application_name playflow-server …). */
async function terminateServerBackends(admin: pg.Client): Promise<number> {
  const { rows } = await admin.query(
    `SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity
      WHERE datname = $1 AND application_name LIKE 'playflow-server%' AND pid <> pg_backend_pid()`,
    [h.db.name],
  );
  return rows.filter((r) => r.t).length;
}

/**
 * What the server recorded of a step that ran more than once: its queue rows and the deliveries
 * (action_started) and reports (call.done) in the log, so a failure says how the second run came.
 */
async function recorded(executionId: string, step: string): Promise<unknown> {
  const c = new pg.Client({ connectionString: h.db.url });
  await c.connect();
  try {
    const queue = await c.query(
      `SELECT queue_id::text, command_id, status, attempts, worker_id, created_at, finished_at FROM queue
        WHERE execution_id = $1 AND step = $2 ORDER BY queue_id`, [executionId, step]);
    const events = await c.query(
      `SELECT seq, name, command_id, created_at, payload - 'response' - 'command' AS payload FROM event
        WHERE execution_id = $1 AND step = $2 AND name IN ('command_issued', 'action_started', 'call.done') ORDER BY seq`, [executionId, step]);
    return { queue: queue.rows, events: events.rows };
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  h = await startHarness({ workers: 1, sweeperIntervalMs: 300, workerEnv: { WORKER_LEASE_SECONDS: '10', WORKER_HEARTBEAT_SECONDS: '2' } });
}, 120_000);

afterAll(async () => {
  await h?.close();
});

describe('database connections terminated under load', () => {
  it('the server stays up, every execution completes and each step ran once', async () => {
    const file = path.join(h.tmp, 'db_loss.yaml');
    writeFileSync(file, playbook);
    expect((await h.cli(['catalog', 'register', 'playbook', file])).code).toBe(0);
    const marker = path.join(h.tmp, 'runs.txt');
    writeFileSync(marker, '');
    chmodSync(marker, 0o666); // python steps run as another user (WORKER_PYTHON_USER) and append to it

    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    const ids: string[] = [];
    let terminated = 0;
    try {
      // Start executions while backends are being terminated: some starts fail with a 5xx
      // (their transaction's connection died) and are retried like a client would.
      const killer = (async () => {
        for (let i = 0; i < 25; i++) {
          terminated += await terminateServerBackends(admin);
          await new Promise((r) => setTimeout(r, 150));
        }
      })();
      for (let i = 0; i < 20; i++) {
        for (let attempt = 0; ; attempt++) {
          const r = await api('POST', '/api/run/playbook', { path: 'conformance/db_loss', payload: { marker } }).catch(() => ({ status: 0, json: null }));
          if (r.status === 201) {
            ids.push(r.json.execution_id);
            break;
          }
          // a lost connection is that request's error (5xx), never a dropped socket or an exit
          expect(r.status).toBeGreaterThanOrEqual(500);
          expect(attempt).toBeLessThan(20);
          await new Promise((res) => setTimeout(res, 50));
        }
      }
      await killer;
    } finally {
      await admin.end();
    }
    expect(terminated).toBeGreaterThan(0);

    // The server is ready again once the database answers.
    const ready = await api('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json.checks.database.status).toBe('ok');

    const deadline = Date.now() + 120_000;
    const statuses = new Map<string, string>();
    while (Date.now() < deadline) {
      for (const id of ids) {
        if (statuses.get(id) === 'completed' || statuses.get(id) === 'failed') continue;
        const r = await api('GET', `/api/execution/${id}`);
        if (r.status === 200) statuses.set(id, r.json.status);
      }
      if (ids.every((id) => ['completed', 'failed'].includes(statuses.get(id) ?? ''))) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(ids.map((id) => [id, statuses.get(id)])).toEqual(ids.map((id) => [id, 'completed']));

    const runs = readFileSync(marker, 'utf8').trim().split('\n');
    const counts = new Map<string, number>();
    for (const line of runs) counts.set(line, (counts.get(line) ?? 0) + 1);
    const expected = ids.flatMap((id) => ['start', 'second', 'third'].map((s) => `${id} ${s}`)).sort();
    expect([...counts.keys()].sort()).toEqual(expected);
    const repeated = [...counts.entries()].filter(([, n]) => n !== 1);
    const explained = await Promise.all(repeated.map(async ([line, n]) => {
      const [id, name] = line.split(' ');
      return { step: line, runs: n, recorded: await recorded(id, name) };
    }));
    expect(explained).toEqual([]);
  }, 240_000);
});
