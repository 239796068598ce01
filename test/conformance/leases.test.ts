/**
 * Leases with real processes (issue 19 item 4, issue 20 item 3): a real server (stopped and
 * started again on the same port), real NATS JetStream, worker processes of the built CLI with
 * their default lease settings, and a local HTTP server standing in for an API with a side effect.
 *
 * - the server stopped for 10 s while a worker finishes a call: the worker keeps the result and
 *   reports it when the server is back — the side effect happened exactly once;
 * - a SIGKILLed worker's command runs on another worker within 30 s (default lease 20 s);
 * - a worker restarting with the same id releases its previous leases at once (even a long lease).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, type RunningServer } from '../../server/main.js';
import { loadConfig, type ServerConfig } from '../../server/config.js';
import { createLogger } from '../../common/logger.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { freePort } from '../../cli/dev/embedded-db.js';
import { BROKER_URL, deleteStream, uniqueBrokerNames } from '../helpers/nats.js';
import { CLI } from './harness.js';

let db: TestDatabase;
let names: ReturnType<typeof uniqueBrokerNames> | undefined;
let server: RunningServer | null = null;
let config: ServerConfig & { sweeperIntervalMs: number };
let env: NodeJS.ProcessEnv;
let tmp: string;
let api: http.Server;
let apiUrl: string;
let effects = 0;
let onEffect: (() => void) | null = null;
const workers: ChildProcess[] = [];

const startPlayflow = async () => {
  server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'warn' }) });
};

function startWorker(extra: NodeJS.ProcessEnv = {}): ChildProcess {
  const child = spawn(process.execPath, [CLI, 'worker', 'start', '--v2', '--concurrency', '2'], {
    env: { ...env, WORKER_METRICS_PORT: '0', ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.resume();
  child.stderr!.resume();
  workers.push(child);
  return child;
}

function cli(args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env, timeout: 60_000 }, (err, stdout) => {
      resolve({ code: err ? 1 : 0, stdout });
    });
  });
}

async function until<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let v: T | undefined | false;
    try {
      v = await fn();
    } catch {
      v = undefined; // the server is away for a moment
    }
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function register(name: string, yaml: string): Promise<void> {
  const file = path.join(tmp, `${name}.yaml`);
  writeFileSync(file, yaml);
  expect((await cli(['catalog', 'register', 'playbook', file])).code).toBe(0);
}

async function run(pbPath: string, payload: object): Promise<string> {
  const r = await cli(['run', 'playbook', pbPath, '--payload', JSON.stringify(payload), '--output', 'json']);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout).execution_id as string;
}

async function status(id: string): Promise<{ status: string; result: unknown }> {
  const r = await cli(['execution', 'status', id, '--output', 'json']);
  return JSON.parse(r.stdout);
}

const ended = (id: string, timeoutMs: number) => until(`execution ${id} to end`, async () => {
  const x = await status(id);
  return ['completed', 'failed', 'cancelled'].includes(x.status) ? x : undefined;
}, timeoutMs);

const killAll = () => Promise.all(workers.map((w) => new Promise<void>((resolve) => {
  if (w.exitCode !== null || w.signalCode !== null) return resolve();
  w.once('exit', () => resolve());
  w.kill('SIGKILL');
})));

beforeAll(async () => {
  db = await createTestDatabase('pflease');
  names = uniqueBrokerNames('LEASE');
  const port = await freePort();
  env = {
    PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, BROKER_URL,
    BROKER_STREAM: names.stream, BROKER_SUBJECT: names.subject, BROKER_CONSUMER: names.consumer,
    PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'), LOG_LEVEL: 'warn', SERVER_API_URL: `http://127.0.0.1:${port}`,
  };
  config = { ...loadConfig({ ...env, PORT: String(port) }), host: '127.0.0.1', sweeperIntervalMs: 500 };
  await startPlayflow();
  tmp = mkdtempSync(path.join(tmpdir(), 'pflease-'));
  chmodSync(tmp, 0o1777); // python steps (run as another user when root) write markers here
  api = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      effects++;
      const hook = onEffect;
      onEffect = null;
      hook?.();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ effect: effects }));
    });
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  await killAll();
  await server?.stop();
  await new Promise((r) => api?.close(r));
  await db?.drop();
  if (names) await deleteStream(names.stream);
});

describe('leases', () => {
  it('the server stopped for 10 s while a worker finishes a call: the side effect happens exactly once', async () => {
    await register('effect', `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: effect, path: lease/effect }
workflow:
  - step: charge
    tool: { kind: http, method: POST, endpoint: "${apiUrl}/charge", json: { amount: 1 } }
    next: [{ step: after }]
  - step: after
    tool: { kind: python, code: "result = 'after'" }
`);
    startWorker();
    effects = 0;
    let outage: Promise<void> | undefined;
    // The POST reaches the API and the server goes away before the worker can report it.
    onEffect = () => {
      outage = (async () => {
        const s = server!;
        server = null;
        await s.stop();
        await new Promise((r) => setTimeout(r, 10_000));
        await startPlayflow();
      })();
    };
    const id = await run('lease/effect', {});
    await until('the side effect', () => effects > 0, 60_000);
    await until('the outage to start', () => outage !== undefined, 5000);
    await outage;
    const done = await ended(id, 90_000);
    expect(done.status).toBe('completed');
    expect(effects).toBe(1);
    const { rows } = await server!.core.deps.db.pool.query(
      `SELECT step, attempts, status FROM queue WHERE execution_id = $1 ORDER BY queue_id`, [id]);
    expect(rows).toEqual([{ step: 'charge', attempts: 1, status: 'done' }, { step: 'after', attempts: 1, status: 'done' }]);
    await killAll();
  }, 180_000);

  const slow = (name: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: ${name}, path: lease/${name} }
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import os, time
        def main(marker):
            with open(marker, "a") as f:
                f.write(str(os.getpid()) + "\\n")
            time.sleep(2)
            return "done"
      args: { marker: "{{ workload.marker }}" }
`;
  const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []);

  it('a SIGKILLed worker\'s command runs on another worker within 30 s (default lease)', async () => {
    await register('slow_default', slow('slow_default'));
    const marker = path.join(tmp, 'default.txt');
    const first = startWorker();
    const id = await run('lease/slow_default', { marker });
    await until('the first run', () => lines(marker).length === 1, 60_000);
    first.kill('SIGKILL');
    startWorker();
    // the default lease (20 s) runs out, the sweeper queues the command again, the other worker runs it
    await until('the second run, on another worker', () => lines(marker).length === 2, 30_000);
    expect((await ended(id, 30_000)).status).toBe('completed');
    await killAll();
  }, 150_000);

  it('a worker restarting with the same id releases its previous leases at once', async () => {
    await register('slow_same_id', slow('slow_same_id'));
    const marker = path.join(tmp, 'same-id.txt');
    // a lease of 10 minutes: only the release brings the command back in time
    const fixed = { WORKER_ID: 'lease-test-worker', WORKER_LEASE_SECONDS: '600', WORKER_HEARTBEAT_SECONDS: '1' };
    const first = startWorker(fixed);
    const id = await run('lease/slow_same_id', { marker });
    await until('the first run', () => lines(marker).length === 1, 60_000);
    first.kill('SIGKILL');
    startWorker(fixed);
    await until('the second run, after the restart', () => lines(marker).length === 2, 30_000);
    expect((await ended(id, 30_000)).status).toBe('completed');
  }, 150_000);
});
