/**
 * Options and waits as users meet them, subprocesses against a real server (no worker: a run
 * stays `started` until cancelled):
 * - a subcommand's `--version <n>` reaches the subcommand; `playflow --version` is the CLI's;
 * - `--help` and usage errors never print the token or server URL taken from the environment,
 *   and --token/--server still win over the environment;
 * - `run playbook --wait` prints `execution <id> started` at once (stderr with -o json).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, CLI, ROOT, startCliServer, TOKEN, type CliServer, type Run } from './helpers.js';

const EXAMPLE = join(ROOT, 'examples/hello_world.yaml');

let s: CliServer;

beforeAll(async () => {
  s = await startCliServer('pfcliopts');
  const reg = await cli(['catalog', 'register', 'playbook', EXAMPLE, ...s.auth]);
  if (reg.code !== 0) throw new Error(reg.stderr);
});
afterAll(async () => {
  await s?.close();
});

describe('--version', () => {
  it('on the program: the CLI version', async () => {
    const r = await cli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('0.1.0\n');
  });

  it('on run playbook and catalog get (space form): the catalog version', async () => {
    const run = await cli(['run', 'playbook', 'examples/hello_world', '--version', '1', ...s.auth, '-o', 'json']);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ path: 'examples/hello_world', version: 1 });
    const missing = await cli(['run', 'playbook', 'examples/hello_world', '--version', '99', ...s.auth]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).not.toContain('0.1.0');
    const get = await cli(['catalog', 'get', 'playbook', 'examples/hello_world', '--version', '1', ...s.auth, '-o', 'json']);
    expect(get.code, get.stderr).toBe(0);
    expect(JSON.parse(get.stdout)).toMatchObject({ version: 1 });
  });
});

describe('the environment in --help and usage errors', () => {
  const env = { PLAYFLOW_API_TOKEN: 'tok-SECRET', SERVER_API_URL: 'http://admin:pw-SECRET@127.0.0.1:1' };

  it('is named, never printed', async () => {
    for (const args of [['execution', 'list', '--help'], ['run', 'playbook', '--help'], ['execution', 'list', '--bogus'], ['run', 'playbook']]) {
      const r = await cli(args, env);
      const out = r.stdout + r.stderr;
      expect(out, args.join(' ')).toContain('(env PLAYFLOW_API_TOKEN)');
      expect(out, args.join(' ')).not.toContain('SECRET');
    }
  });

  it('is used when the command runs: flag > env > default', async () => {
    const viaEnv = await cli(['catalog', 'list'], { SERVER_API_URL: s.url, PLAYFLOW_API_TOKEN: TOKEN });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    const flagWins = await cli(['catalog', 'list', '--token', 'wrong'], { SERVER_API_URL: s.url, PLAYFLOW_API_TOKEN: TOKEN });
    expect(flagWins.code).toBe(1);
    expect(flagWins.stderr).toContain('unauthorized (401)');
    const serverFlagWins = await cli(['catalog', 'list', '--server', s.url], { ...env, PLAYFLOW_API_TOKEN: TOKEN });
    expect(serverFlagWins.code, serverFlagWins.stderr).toBe(0);
    const defaultServer = await cli(['catalog', 'list']);
    expect(defaultServer.stderr).toContain('tried http://localhost:8082');
  });
});

/** Spawns the CLI; `seen(text)` resolves when stdout or stderr first contains text. */
function spawnCli(args: string[]) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, SERVER_API_URL: '', PLAYFLOW_API_TOKEN: '' } });
  let stdout = '';
  let stderr = '';
  const watchers: { text: string; resolve: () => void }[] = [];
  const check = () => {
    for (const w of watchers) if ((stdout + stderr).includes(w.text)) w.resolve();
  };
  child.stdout.on('data', (d) => { stdout += d; check(); });
  child.stderr.on('data', (d) => { stderr += d; check(); });
  const done = new Promise<Run>((resolve) => child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr })));
  const seen = (text: string, ms: number) => new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not seen within ${ms} ms: ${text}\nstdout: ${stdout}\nstderr: ${stderr}`)), ms);
    watchers.push({ text, resolve: () => { clearTimeout(timer); resolve(); } });
    check();
  });
  return { child, done, seen };
}

describe('run playbook --wait', () => {
  async function latestId(): Promise<string> {
    const list = await s.api('GET', '/api/executions?path=examples/hello_world&limit=1');
    return String(list.executions[0].execution_id);
  }

  /** `run --wait` with `extra`: once its started line is out, the execution is cancelled (no worker runs it). */
  async function cancelledWhileWaiting(extra: string[]): Promise<{ id: string; r: Run }> {
    const p = spawnCli(['run', 'playbook', 'examples/hello_world', '--wait', ...s.auth, ...extra]);
    try {
      await p.seen(' started: examples/hello_world version ', 5000);
    } catch (err) {
      p.child.kill();
      throw err;
    }
    const id = await latestId();
    await s.api('POST', `/api/execution/${id}/cancel`, {});
    return { id, r: await p.done };
  }

  it('prints the execution id at once, then the end (exit 1 when cancelled)', async () => {
    const { id, r } = await cancelledWhileWaiting([]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(new RegExp(`^execution ${id} started: examples/hello_world version \\d+; waiting…\\n`));
    expect(r.stdout).toContain(`execution ${id}: cancelled`);
    expect(r.stderr).toBe('');
  });

  it('-o json: the started line on stderr, stdout one JSON document', async () => {
    const { id, r } = await cancelledWhileWaiting(['-o', 'json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^execution ${id} started: `));
    expect(JSON.parse(r.stdout)).toMatchObject({ execution_id: id, status: 'cancelled' });
  });
});
