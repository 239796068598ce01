/**
 * The CLI as users run it: `node dist/cli/index.js …` subprocesses against a real server — first
 * one started in this process (buildApp over the real core, listening), then `playflow server
 * start` itself as a subprocess, stopped with SIGTERM.
 *
 * Needs the compiled CLI (`npx tsc -p .`, which `npm test` runs first).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../cli/dev/embedded-db.js';
import { createTestDatabase } from '../helpers/pg.js';
import { fixture, simplePlaybook, startTestServer, type TestServer } from './helpers.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'dist/cli/index.js');
const EXAMPLE = join(ROOT, 'examples/hello_world.yaml');
const TOKEN = 'cli-token';

interface Run { code: number | null; stdout: string; stderr: string }

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], {
      env: { ...process.env, SERVER_API_URL: '', PLAYFLOW_API_TOKEN: '', ...env },
      timeout: 20_000,
    }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? 1) : 0;
      resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
    });
  });
}

let s: TestServer;
let base: string;
let tmp: string;
const auth = () => ['--server', base, '--token', TOKEN];

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first with \`npx tsc -p .\` (npm test does)`);
  s = await startTestServer({ apiToken: TOKEN });
  base = await s.app.listen({ port: 0, host: '127.0.0.1' });
  tmp = mkdtempSync(join(tmpdir(), 'pf-cli-'));
});
afterAll(async () => {
  await s?.close();
});

describe('catalog register playbook', () => {
  it('registers a file, then reports it unchanged', async () => {
    const first = await cli(['catalog', 'register', 'playbook', EXAMPLE, ...auth()]);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^registered: examples\/hello_world version 1 \(catalog_id \d+\)/);
    const again = await cli(['catalog', 'register', 'playbook', EXAMPLE, ...auth(), '--output', 'json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ path: 'examples/hello_world', version: 1, created: false });
  });

  it('an invalid playbook: exit 1 listing each problem with its path', async () => {
    const file = join(tmp, 'bad.yaml');
    writeFileSync(file, fixture('invalid/step-when.yaml'));
    const r = await cli(['catalog', 'register', 'playbook', file, ...auth()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('playbook invalid (422)');
    expect(r.stderr).toContain('  - workflow[1].when:');
  });

  it('a missing file: exit 1 naming it', async () => {
    const r = await cli(['catalog', 'register', 'playbook', join(tmp, 'nope.yaml'), ...auth()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot read playbook file '.*nope\.yaml': no such file/);
  });

  it('a wrong token: exit 1 saying unauthorized; no token: same', async () => {
    const r = await cli(['catalog', 'register', 'playbook', EXAMPLE, '--server', base, '--token', 'wrong']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('unauthorized (401)');
    expect(r.stderr).toContain('PLAYFLOW_API_TOKEN');
    const none = await cli(['catalog', 'register', 'playbook', EXAMPLE, '--server', base]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('unauthorized (401)');
  });

  it('reads --server and --token from SERVER_API_URL and PLAYFLOW_API_TOKEN', async () => {
    const r = await cli(['catalog', 'list', '--output', 'json'], { SERVER_API_URL: base, PLAYFLOW_API_TOKEN: TOKEN });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).playbooks.map((p: { path: string }) => p.path)).toContain('examples/hello_world');
  });

  it('an unreachable server: exit 1 with a clear message', async () => {
    const r = await cli(['catalog', 'register', 'playbook', EXAMPLE, '--server', 'http://127.0.0.1:9']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot reach the Playflow server at http:\/\/127\.0\.0\.1:9/);
  });
});

describe('run playbook and execution status', () => {
  it('starts an execution and shows its status (text and json)', async () => {
    const run = await cli(['run', 'playbook', 'examples/hello_world', '--payload', '{"name": "Ada"}', ...auth(), '--output', 'json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const started = JSON.parse(run.stdout);
    expect(started).toMatchObject({ execution_id: expect.stringMatching(/^\d+$/), status: 'started', path: 'examples/hello_world' });

    const text = await cli(['execution', 'status', started.execution_id, ...auth()]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`execution ${started.execution_id}: started`);
    expect(text.stdout).toContain('playbook:  examples/hello_world version 1');
    expect(text.stdout).toMatch(/start\s+running/);

    const json = await cli(['execution', 'status', started.execution_id, ...auth(), '-o', 'json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ execution_id: started.execution_id, payload: { name: 'Ada' } });

    const events = await cli(['execution', 'events', started.execution_id, ...auth()]);
    expect(events.code).toBe(0);
    expect(events.stdout).toMatch(/^\s+1 {2}\S+ {2}execution_started/);
    expect(events.stdout).toContain('command_issued  [start]  #1');
    const eventsJson = JSON.parse((await cli(['execution', 'events', started.execution_id, ...auth(), '-o', 'json', '--limit', '1'])).stdout);
    expect(eventsJson.events).toHaveLength(1);

    const plain = await cli(['run', 'playbook', 'examples/hello_world', ...auth()]);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/^execution \d+ started: examples\/hello_world version 1/);
  });

  it('an unknown playbook: exit 1 with 404', async () => {
    const r = await cli(['run', 'playbook', 'examples/none', ...auth()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('not found (404)');
  });

  it('a payload that is not a JSON object: exit 1 before any request', async () => {
    const bad = await cli(['run', 'playbook', 'examples/hello_world', '--payload', '{oops', ...auth()]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--payload is not valid JSON');
    const arr = await cli(['run', 'playbook', 'examples/hello_world', '--payload', '[1]', ...auth()]);
    expect(arr.code).toBe(1);
    expect(arr.stderr).toContain('--payload must be a JSON object');
  });

  it('execution status of an unknown or malformed id: exit 1', async () => {
    const unknown = await cli(['execution', 'status', '999999', ...auth()]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not found (404): execution 999999 not found');
    const json = await cli(['execution', 'status', '999999', ...auth(), '--output', 'json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr).error).toMatchObject({ code: 'not_found', status: 404 });
    const bad = await cli(['execution', 'status', 'abc', ...auth()]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('execution id must be a decimal integer');
  });
});

describe('waiting for the end', () => {
  /** Plays the worker for a one-step execution: claim its command and report call.done. */
  async function finish(executionId: string) {
    const q = await s.core.db.pool.query('SELECT queue_id FROM queue WHERE execution_id = $1', [executionId]);
    const qid = String(q.rows[0].queue_id);
    const token = (await s.call('POST', `/api/v2/commands/${qid}/claim`, { worker_id: 'w' })).json().lease_token;
    const ack = await s.call('POST', '/api/v2/events', { execution_id: executionId, step: 'start', name: 'call.done', queue_id: qid, worker_id: 'w', lease_token: token, payload: { response: { ok: 1 }, meta: {} } });
    expect(ack.statusCode).toBe(200);
  }

  it('run playbook --wait follows the execution to completed (exit 0)', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cli/one') });
    const waiting = cli(['run', 'playbook', 'cli/one', '--wait', ...auth()]);
    let id: string | undefined;
    for (let i = 0; i < 50 && !id; i++) {
      const list = (await s.call('GET', '/api/executions?path=cli/one')).json();
      id = list.executions[0]?.execution_id;
      if (!id) await new Promise((r) => setTimeout(r, 100));
    }
    expect(id).toBeDefined();
    await finish(id!);
    const r = await waiting;
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`execution ${id}: completed`);
    expect(r.stdout).toContain('result:    {"ok":1}');
  });

  it('execution status --watch exits 1 for a cancelled execution', async () => {
    const id = (await s.call('POST', '/api/run/playbook', { path: 'cli/one' })).json().execution_id;
    await s.call('POST', `/api/execution/${id}/cancel`);
    const r = await cli(['execution', 'status', id, '--watch', '--interval', '100', ...auth()]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`execution ${id}: cancelled`);
  });
});

describe('server start', () => {
  it('serves the API on --port and stops cleanly on SIGTERM', async () => {
    const db = await createTestDatabase('pfcli');
    // a port the kernel just handed out and took back: a random one in 20000-40000 was sometimes an
    // ephemeral port in use (EADDRINUSE: the server never became healthy)
    const port = await freePort();
    const child = spawn(process.execPath, [CLI, 'server', 'start', '--port', String(port), '--host', '127.0.0.1'], {
      env: {
        ...process.env, DATABASE_URL: db.url, BROKER_URL: 'memory', PLAYFLOW_API_TOKEN: TOKEN, LOG_LEVEL: 'info', PORT: '',
        PLAYFLOW_ENCRYPTION_KEY: Buffer.alloc(32, 3).toString('base64'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const url = `http://127.0.0.1:${port}`;
      let healthy = false;
      for (let i = 0; i < 100 && !healthy; i++) {
        healthy = await fetch(`${url}/health`).then((r) => r.ok, () => false);
        if (!healthy) await new Promise((r) => setTimeout(r, 200));
      }
      expect(healthy, out).toBe(true);
      const reg = await cli(['catalog', 'register', 'playbook', EXAMPLE, '--server', url, '--token', TOKEN]);
      expect(reg.code, reg.stderr).toBe(0);
      const run = await cli(['run', 'playbook', 'examples/hello_world', '--server', url, '--token', TOKEN, '-o', 'json']);
      expect(run.code, run.stderr).toBe(0);
      // The credentials, keychain and vars routes are mounted by server start.
      const creds = await fetch(`${url}/api/credentials`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(creds.status).toBe(200);
      expect(out).toContain('playflow server listening');
      expect(out).not.toContain(TOKEN);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).toContain('server stopped');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await db.drop();
    }
  });

  it('a malformed setting: exit 1 naming the variable', async () => {
    const r = await cli(['server', 'start'], { PORT: 'eighty' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('PORT');
  });

  it('no encryption key: exit 1 naming PLAYFLOW_ENCRYPTION_KEY', async () => {
    const r = await cli(['server', 'start', '--port', '0'], { PLAYFLOW_ENCRYPTION_KEY: '', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('PLAYFLOW_ENCRYPTION_KEY');
  });
});
