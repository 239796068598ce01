/**
 * Kill a worker process (SIGKILL) in the middle of a python call: its lease expires, the server
 * queues the command again, another worker process runs it and the execution completes. Each run
 * of the python code appends its worker's pid to a file, so the test sees exactly two runs, one
 * per worker — and a duplicate notification afterwards runs nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { startHarness, type Harness } from './harness.js';

/** A python call that records which worker ran it (its pid) in a marker file, then takes 3 s. */
const slowTool = `
    tool:
      kind: python
      code: |
        import os, time
        def main(marker):
            with open(marker, "a") as f:
                f.write(str(os.getppid()) + "\\n")
            time.sleep(3)
            return {"done_by": os.getppid()}
      args: { marker: "{{ workload.marker }}" }
`;

const playbook = `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: slow_python, path: conformance/slow_python }
workflow:
  - step: start${slowTool}`;

/** The slow call as the second step: the worker of the first gets it with its call.done (eager dispatch). */
const chained = `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: chained_slow_python, path: conformance/chained_slow_python }
workflow:
  - step: quick
    tool: { kind: python, code: "result = 1" }
    next: [{ step: slow }]
  - step: slow${slowTool}`;

let h: Harness;

async function until<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  // Short leases so an abandoned command comes back within seconds (the minimum a worker asks for is 5 s).
  h = await startHarness({ workers: 0, sweeperIntervalMs: 300, workerEnv: { WORKER_LEASE_SECONDS: '5', WORKER_HEARTBEAT_SECONDS: '1' } });
}, 120_000);

afterAll(async () => {
  await h?.close();
});

describe('worker crash', () => {
  it('a command abandoned by a killed worker runs again on another worker and the execution completes', async () => {
    const file = path.join(h.tmp, 'slow.yaml');
    writeFileSync(file, playbook);
    expect((await h.cli(['catalog', 'register', 'playbook', file])).code).toBe(0);
    const marker = path.join(h.tmp, 'runs.txt');

    const first = await h.startWorker();
    const run = await h.cli(['run', 'playbook', 'conformance/slow_python', '--payload', JSON.stringify({ marker }), '--output', 'json']);
    expect(run.code).toBe(0);
    const executionId = JSON.parse(run.stdout).execution_id as string;

    // The first worker is inside the python call: kill it without a chance to report or nak.
    await until('the first run to start', () => existsSync(marker) && readFileSync(marker, 'utf8').trim().length > 0);
    first.kill('SIGKILL');
    const second = await h.startWorker();

    const status = await until('the execution to end', async () => {
      const r = await h.cli(['execution', 'status', executionId, '--output', 'json']);
      const x = JSON.parse(r.stdout);
      return ['completed', 'failed'].includes(x.status) ? x : undefined;
    }, 90_000);

    expect(status.status).toBe('completed');
    const runs = readFileSync(marker, 'utf8').trim().split('\n').map(Number);
    expect(runs).toEqual([first.pid, second.pid]);
    expect(status.result).toEqual({ done_by: second.pid });

    // A duplicate notification of the finished command (as a broker redelivery would bring) is
    // acknowledged without running anything.
    const queue = await h.server.core.deps.db.pool.query('SELECT queue_id::text AS queue_id FROM queue WHERE execution_id = $1', [executionId]);
    const rowsNow = `SELECT queue_id, status, attempts, worker_id FROM queue WHERE execution_id = $1 ORDER BY queue_id`;
    const rowsBefore = (await h.server.core.deps.db.pool.query(rowsNow, [executionId])).rows;
    const nc = await connect({ servers: h.env.BROKER_URL });
    try {
      const js = jetstream(nc);
      const jsm = await jetstreamManager(nc);
      /** The workers' consumer once nothing in it waits for delivery or for an ack. */
      const settled = async () => {
        const ci = await jsm.consumers.info(h.env.BROKER_STREAM!, h.env.BROKER_CONSUMER!);
        return ci.num_pending === 0 && ci.num_ack_pending === 0 ? ci : undefined;
      };
      // Earlier notifications settled first (the killed worker's unacked one comes back after the
      // ack wait), so every delivery counted below is a duplicate's.
      const before = await until('the earlier notifications to be settled', settled);
      let last = 0;
      for (const row of queue.rows) {
        last = (await js.publish(h.env.BROKER_SUBJECT!, JSON.stringify({ execution_id: executionId, queue_id: row.queue_id, step: 'start', server_url: h.url }))).seq;
      }
      // The worker took every duplicate and settled it: the ack floor passed the last one and
      // nothing waits. (A claimed command is acked only after its run, so a duplicate that ran
      // has written the marker by now.)
      const after = await until('the duplicate notifications to be delivered and settled', async () => {
        const ci = await settled();
        return ci && ci.ack_floor.stream_seq >= last ? ci : undefined;
      }, 30_000);
      // each delivered once and acked, none handed back for redelivery (a nak) or dropped after max deliveries
      expect(after.delivered.consumer_seq - before.delivered.consumer_seq).toBe(queue.rows.length);
    } finally {
      await nc.close();
    }
    await new Promise((r) => setTimeout(r, 1500));
    expect(readFileSync(marker, 'utf8').trim().split('\n').length).toBe(2);
    // nothing was claimed either: the queue rows are as they were
    expect((await h.server.core.deps.db.pool.query(rowsNow, [executionId])).rows).toEqual(rowsBefore);
    const after = JSON.parse((await h.cli(['execution', 'status', executionId, '--output', 'json'])).stdout);
    expect(after.status).toBe('completed');
  }, 150_000);

  it('a command a worker took with its call.done (no notification) runs again elsewhere when that worker dies', async () => {
    const file = path.join(h.tmp, 'chained.yaml');
    writeFileSync(file, chained);
    expect((await h.cli(['catalog', 'register', 'playbook', file])).code).toBe(0);
    const marker = path.join(h.tmp, 'chained-runs.txt');
    for (const w of h.workers) if (w.exitCode === null) w.kill('SIGKILL'); // the first test's second worker

    const first = await h.startWorker();
    const run = await h.cli(['run', 'playbook', 'conformance/chained_slow_python', '--payload', JSON.stringify({ marker }), '--output', 'json']);
    const executionId = JSON.parse(run.stdout).execution_id as string;
    await until('the slow step to start', () => existsSync(marker) && readFileSync(marker, 'utf8').trim().length > 0);

    // The slow step's row was leased as it was inserted: never published, one attempt, first worker's.
    const { rows } = await h.server.core.deps.db.pool.query(
      `SELECT step, status, attempts, published_at, worker_id FROM queue WHERE execution_id = $1 ORDER BY queue_id`, [executionId]);
    expect(rows.map((r) => [r.step, r.status, r.attempts])).toEqual([['quick', 'done', 1], ['slow', 'leased', 1]]);
    expect(rows[1].published_at).toBeNull();
    expect(rows[1].worker_id).toBe(rows[0].worker_id);

    first.kill('SIGKILL');
    const second = await h.startWorker();
    const status = await until('the execution to end', async () => {
      const x = JSON.parse((await h.cli(['execution', 'status', executionId, '--output', 'json'])).stdout);
      return ['completed', 'failed'].includes(x.status) ? x : undefined;
    }, 90_000);
    expect(status.status).toBe('completed');
    expect(readFileSync(marker, 'utf8').trim().split('\n').map(Number)).toEqual([first.pid, second.pid]);
    expect(status.result).toEqual({ done_by: second.pid });
  }, 150_000);
});
