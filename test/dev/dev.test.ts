/**
 * `playflow dev` as users run it: `node dist/cli/index.js dev …` subprocesses on a temporary
 * data dir — the real embedded PostgreSQL (initialised by the first run, reused by the next),
 * the in-process broker, real python3.
 *
 * Needs the compiled CLI (`npx tsc -p .`, which `npm test` runs first).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PlayflowClient } from '../../client/http.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'dist/cli/index.js');
const HELLO = join(ROOT, 'examples/hello_world.yaml');

interface Run { code: number | null; stdout: string; stderr: string }

/** The environment of a user with nothing configured. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of ['PLAYFLOW_ENCRYPTION_KEY', 'PLAYFLOW_ENCRYPTION_KEY_PREVIOUS', 'PLAYFLOW_API_TOKEN', 'SERVER_API_URL', 'DATABASE_URL', 'BROKER_URL', 'LOG_LEVEL', 'HOST', 'PORT', 'PLAYFLOW_DEV_DIR']) delete env[k];
  return env;
}

function dev(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'dev', ...args], { env: { ...cleanEnv(), ...env }, timeout: 150_000, cwd: ROOT }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? 1) : 0;
      resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
    });
  });
}

let tmp: string;
let dataDir: string;

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first with \`npx tsc -p .\` (npm test does)`);
  tmp = mkdtempSync(join(tmpdir(), 'pf-dev-'));
  // As root, PostgreSQL runs as the `postgres` user, which must pass through the temp dir (0700).
  chmodSync(tmp, 0o711);
  dataDir = join(tmp, 'data');
});
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('playflow dev <file>', () => {
  it('first run: initialises the data dir, generates the key (0600), runs hello_world to HELLO, WORLD!', async () => {
    const r = await dev([HELLO, '--data-dir', dataDir, '--port', '0']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`data ${dataDir} (initialised ${join(dataDir, 'pg')})`);
    expect(r.stdout).toContain(`PLAYFLOW_ENCRYPTION_KEY not set; generated one in ${join(dataDir, 'encryption.key')} (0600)`);
    expect(r.stdout).toMatch(/registered: examples\/hello_world version 1\n/);
    // Step progress, in order, then the result.
    expect(r.stdout).toMatch(/ {2}start: running\n {2}start: completed\n {2}shout: running\n {2}shout: completed\nexecution \d+ completed in [\d.]+ s\nresult:\n/);
    // the result, then the link to the execution's page in the web console
    expect(r.stdout.slice(r.stdout.indexOf('result:\n') + 8)).toMatch(
      /^\{\n {2}"message": "HELLO, WORLD!"\n\}\nconsole: http:\/\/127\.0\.0\.1:\d+\/ui\/executions\/\d+ {2}\(open it while `playflow dev` serves this data dir: add --serve to keep serving now\)\n$/);
    const key = join(dataDir, 'encryption.key');
    expect(statSync(key).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(key, 'utf8').trim(), 'base64')).toHaveLength(32);
  }, 180_000);

  it('second run: same database and key, --payload \'{"name":"Ada"}\' → HELLO, ADA!', async () => {
    const keyBefore = readFileSync(join(dataDir, 'encryption.key'), 'utf8');
    const r = await dev([HELLO, '--data-dir', dataDir, '--port', '0', '--payload', '{"name":"Ada"}']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain('initialised');
    expect(r.stdout).toContain(`using the dev key in ${join(dataDir, 'encryption.key')}`);
    expect(r.stdout).toContain('unchanged: examples/hello_world version 1');
    expect(r.stdout).toContain('"message": "HELLO, ADA!"');
    expect(readFileSync(join(dataDir, 'encryption.key'), 'utf8')).toBe(keyBefore);
  }, 180_000);

  it('--output json: stdout is the final execution record; PLAYFLOW_DEV_DIR picks the data dir; @file payload', async () => {
    const payloadFile = join(tmp, 'payload.json');
    writeFileSync(payloadFile, '{"name": "Grace"}');
    const r = await dev([HELLO, '--port', '0', '--output', 'json', '--payload', `@${payloadFile}`], { PLAYFLOW_DEV_DIR: dataDir });
    expect(r.code).toBe(0);
    const ex = JSON.parse(r.stdout) as { status: string; result: unknown; path: string; payload: unknown };
    expect(ex).toMatchObject({ status: 'completed', path: 'examples/hello_world', result: { message: 'HELLO, GRACE!' }, payload: { name: 'Grace' } });
    expect(r.stderr).toContain(`data ${dataDir}`);
  }, 180_000);

  it('the default port 8082 taken: a free port instead of failing', async () => {
    // Hold 8082 (retrying while another process holds it only for a moment); if something
    // holds it throughout, the case is the same.
    const blocker = net.createServer();
    for (let i = 0; i < 40 && !blocker.listening; i++) {
      await new Promise<void>((resolve) => {
        blocker.once('error', () => setTimeout(resolve, 250));
        blocker.listen(8082, '127.0.0.1', () => resolve());
      });
    }
    try {
      const r = await dev([HELLO, '--data-dir', dataDir]);
      expect(r.code).toBe(0);
      const port = Number(/API http:\/\/127\.0\.0\.1:(\d+)/.exec(r.stdout)?.[1]);
      expect(port).toBeGreaterThan(0);
      expect(port).not.toBe(8082);
      expect(r.stdout).toContain('"message": "HELLO, WORLD!"');
    } finally {
      if (blocker.listening) await new Promise((r) => blocker.close(r));
    }
  }, 180_000);

  it('a failing playbook: exit 1 with the step, the error and the python traceback', async () => {
    const dir = join(tmp, 'failing');
    mkdirSync(dir);
    writeFileSync(join(dir, 'boom.yaml'), [
      // No metadata.path: registered under metadata.name.
      'apiVersion: playflow.io/v2', 'kind: Playbook', 'metadata:', '  name: boom', 'workflow:',
      '  - step: start', '    tool:', '      kind: python', '      code: |', '        raise ValueError("boom on purpose")', '',
    ].join('\n'));
    const r = await dev([join(dir, 'boom.yaml'), '--data-dir', dataDir, '--port', '0']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/registered: boom version \d+\n/);
    expect(r.stdout).toContain('  start: failed: ValueError: boom on purpose');
    expect(r.stdout).toMatch(/execution \d+ failed in [\d.]+ s\nerror: .*ValueError: boom on purpose/);
    expect(r.stdout).toContain('raise ValueError("boom on purpose")');
    expect(r.stdout).not.toContain('result:');
  }, 180_000);

  it.skipIf(process.getuid?.() !== 0)('as root, with a data dir the postgres user cannot reach (like /root/.playflow/dev): the cluster goes to /var/lib/playflow/dev/<hash>', async () => {
    const closed = join(tmp, 'closed');
    mkdirSync(closed, { mode: 0o700 });
    const dir = join(closed, 'data');
    let cluster: string | undefined;
    try {
      const r = await dev([HELLO, '--data-dir', dir, '--port', '0']);
      cluster = /\(initialised (\/var\/lib\/playflow\/dev\/[0-9a-f]{16}\/pg)\)/.exec(r.stdout)?.[1];
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(cluster).toBeDefined();
      expect(readFileSync(join(dir, 'pg-location'), 'utf8').trim()).toBe(cluster);
      expect(r.stdout).toContain('"message": "HELLO, WORLD!"');
      expect(existsSync(join(dir, 'encryption.key'))).toBe(true);
    } finally {
      if (cluster) rmSync(join(cluster, '..'), { recursive: true, force: true });
    }
  }, 180_000);

  it('two first runs at once on different data dirs both complete (they race for the database port)', async () => {
    const dirs = [join(tmp, 'twin-a'), join(tmp, 'twin-b')];
    const runs = await Promise.all(dirs.map((d, i) => dev([HELLO, '--data-dir', d, '--port', '0', '--payload', JSON.stringify({ name: `twin${i}` })])));
    runs.forEach((r, i) => {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`"message": "HELLO, TWIN${i}!"`);
    });
  }, 180_000);

  it('registers the other playbooks of the folder first: examples/composition.yaml runs hello_world as a child', async () => {
    const r = await dev([join(ROOT, 'examples/composition.yaml'), '--data-dir', dataDir, '--port', '0', '--output', 'json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'completed', result: ['HELLO, GRACE!', 'HELLO, LINUS!'] });
    expect(r.stderr).toMatch(/registered \d+ other playbooks of examples\//);
  }, 180_000);
});

describe('playflow dev: bad input fails at once, before anything starts', () => {
  const fresh = () => join(tmp, `unused-${Math.random().toString(36).slice(2)}`);

  it('missing file', async () => {
    const dir = fresh();
    const r = await dev([join(tmp, 'nope.yaml'), '--data-dir', dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error: cannot read playbook file '${join(tmp, 'nope.yaml')}': no such file\n`);
    expect(existsSync(dir)).toBe(false);
  });

  it('invalid YAML: the line and column', async () => {
    const file = join(tmp, 'broken.yaml');
    writeFileSync(file, 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: x\n');
    const r = await dev([file, '--data-dir', fresh()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`error: playbook '${file}' is invalid (1 problem):`);
    expect(r.stderr).toMatch(/invalid YAML at line \d+, column \d+/);
  });

  it('invalid playbook: every problem with its path', async () => {
    const file = join(tmp, 'invalid.yaml');
    writeFileSync(file, [
      'apiVersion: playflow.io/v2', 'kind: Playbook', 'metadata:', '  name: invalid', 'workflow:',
      '  - step: start', '    next: nowhere', '    tool:', '      kind: python', '      code: "result = 1"',
      '  - step: start', '    tool:', '      kind: python', '      code: "result = 2"', '',
    ].join('\n'));
    const r = await dev([file, '--data-dir', fresh()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^error: playbook '${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}' is invalid \\(\\d+ problems\\):\\n`));
    expect(r.stderr).toMatch(/\n {2}- workflow\[0\]\.next: .*nowhere/);
    expect(r.stderr).toMatch(/\n {2}- workflow\[1\](\.step)?: .*start/);
  });

  it('bad --payload: not JSON, not an object, unreadable @file; --payload without a file', async () => {
    const notJson = await dev([HELLO, '--payload', '{name:', '--data-dir', fresh()]);
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toMatch(/^error: --payload is not valid JSON: /);
    const notObject = await dev([HELLO, '--payload', '[1, 2]', '--data-dir', fresh()]);
    expect(notObject.code).toBe(1);
    expect(notObject.stderr).toContain('error: --payload must be a JSON object');
    const noFile = await dev([HELLO, '--payload', `@${join(tmp, 'missing.json')}`, '--data-dir', fresh()]);
    expect(noFile.code).toBe(1);
    expect(noFile.stderr).toMatch(/^error: cannot read --payload file '.*missing\.json': (no such file|ENOENT)/);
    const serveWithPayload = await dev(['--payload', '{}', '--data-dir', fresh()]);
    expect(serveWithPayload.code).toBe(1);
    expect(serveWithPayload.stderr).toContain('--payload needs a playbook file');
  });

  it('bad --port and --output', async () => {
    const port = await dev([HELLO, '--port', 'eighty', '--data-dir', fresh()]);
    expect(port.code).toBe(1);
    expect(port.stderr).toBe('error: --port: expected a port number 0-65535, got "eighty"\n');
    const out = await dev([HELLO, '--output', 'yaml', '--data-dir', fresh()]);
    expect(out.code).toBe(1);
    expect(out.stderr).toBe('error: unknown --output "yaml" (text or json)\n');
  });
});

interface Serving {
  info: { url: string; docs: string; data_dir: string; encryption_key: string };
  stderr: () => string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** `playflow dev --port 0 --output json` in serve mode, once it printed where it listens. */
async function serve(env: NodeJS.ProcessEnv = {}): Promise<Serving> {
  const child = spawn(process.execPath, [CLI, 'dev', '--data-dir', dataDir, '--port', '0', '--output', 'json'], { env: { ...cleanEnv(), ...env }, cwd: ROOT });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const info = await new Promise<Serving['info']>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        const end = stdout.indexOf('\n}\n');
        if (end >= 0) resolve(JSON.parse(stdout.slice(0, end + 2)) as Serving['info']);
      });
      void exited.then((code) => reject(new Error(`dev exited early (${code}): ${stderr}`)));
    });
    return {
      info,
      stderr: () => stderr,
      stop: () => {
        child.kill('SIGTERM');
        return exited;
      },
    };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}

describe('playflow dev (serve)', () => {
  it('serves the API and the worker until SIGTERM, then stops and exits 0', async () => {
    const s = await serve();
    try {
      const { info } = s;
      expect(info.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(info.docs).toBe(`${info.url}/docs`);
      expect(info.data_dir).toBe(dataDir);

      const health = await fetch(`${info.url}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'ok' });

      // The in-process worker runs what the API is given.
      const client = new PlayflowClient({ baseUrl: info.url });
      await client.registerPlaybook(readFileSync(HELLO, 'utf8'));
      const run = await client.run({ path: 'examples/hello_world', payload: { name: 'Linus' } });
      const ex = await client.waitForExecution(run.execution_id, { timeoutMs: 60_000, intervalMs: 100 });
      expect(ex).toMatchObject({ status: 'completed', result: { message: 'HELLO, LINUS!' } });

      // A second dev on the same data dir: refused with the reason, the first one unharmed.
      const second = await dev([HELLO, '--data-dir', dataDir, '--port', '0']);
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(new RegExp(`^error: the data dir ${dataDir} is in use: its PostgreSQL \\(pid \\d+\\) is running`));
      expect((await fetch(`${info.url}/health`)).status).toBe(200);

      expect(await s.stop()).toBe(0);
      await expect(fetch(`${info.url}/health`)).rejects.toThrow();
      expect(s.stderr()).not.toMatch(/error/i);
    } finally {
      await s.stop();
    }
  }, 180_000);

  it('a credential stored under the generated key still reads in the next run, and once PLAYFLOW_ENCRYPTION_KEY is set', async () => {
    const put = async (url: string, name: string, password: string) => {
      const res = await fetch(`${url}/api/credentials`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name, type: 'postgres', data: { host: 'db', port: 5432, user: 'u', password, database: 'd' } }),
      });
      expect(res.status).toBeLessThan(300);
    };
    const read = async (url: string, name: string) => {
      const res = await fetch(`${url}/api/credentials/${name}?include_data=true`);
      expect(res.status).toBe(200);
      return ((await res.json()) as { data: { password: string } }).data.password;
    };
    const first = await serve();
    expect(first.info.encryption_key).toBe(join(dataDir, 'encryption.key'));
    await put(first.info.url, 'dev-db', 's3cret');
    expect(await first.stop()).toBe(0);

    const again = await serve();
    expect(await read(again.info.url, 'dev-db')).toBe('s3cret');
    expect(await again.stop()).toBe(0);

    const withEnv = await serve({ PLAYFLOW_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64') });
    try {
      expect(withEnv.info.encryption_key).toBe('PLAYFLOW_ENCRYPTION_KEY');
      expect(await read(withEnv.info.url, 'dev-db')).toBe('s3cret');
      await put(withEnv.info.url, 'env-db', 'other');
      expect(await read(withEnv.info.url, 'env-db')).toBe('other');
    } finally {
      expect(await withEnv.stop()).toBe(0);
    }
  }, 180_000);

  it('serve mode with --port taken: exit 1 naming the port', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await dev(['--data-dir', dataDir, '--port', String(port)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`port ${port} is in use`);
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  }, 60_000);
});

describe('playflow dev <file> in a terminal', () => {
  // A data dir of its own: the tests above leave credentials under another key in theirs.
  let termDir: string;
  beforeAll(() => {
    termDir = join(tmp, 'terminal');
  });

  it('keeps serving after the run, and the printed console link shows the finished execution with its graph', async () => {
    // A pseudo-terminal (util-linux `script`), as a user runs `npx playflow dev examples/hello_world.yaml`;
    // Ctrl-C is typed into it at the end.
    // the browser first: when it cannot start, no dev server is left holding the data dir
    const { closeBrowser, launchBrowser } = await import('../ui/browser.js');
    const browser = await launchBrowser();
    // `exec`: script runs the command through $SHELL; dash (CI's /bin/sh) does not exec a lone
    // command, and a shell waiting on its child dies of the Ctrl-C itself (exit 130).
    const cmd = `exec ${[process.execPath, CLI, 'dev', HELLO, '--data-dir', termDir, '--port', '0'].map((a) => `'${a}'`).join(' ')}`;
    const child = spawn('script', ['-qfec', cmd, '/dev/null'], { env: cleanEnv(), cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
    let gone = false;
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => {
      gone = true;
      resolve(code);
    }));
    try {
      const serving = /serving the API and the console at http:\/\/127\.0\.0\.1:\d+\/ui until Ctrl-C/;
      await expect.poll(() => serving.test(out) || gone, { timeout: 150_000, interval: 200 }).toBe(true);
      expect(out).toMatch(serving);
      expect(out).toContain('"message": "HELLO, WORLD!"');
      const link = /console: (http:\/\/127\.0\.0\.1:\d+\/ui\/executions\/\d+)\r?\n/.exec(out)?.[1];
      expect(link, out).toBeDefined();
      const page = await browser.newPage();
      await page.goto(link!);
      await page.locator('[data-testid="execution"][data-status="completed"]').waitFor({ timeout: 60_000 });
      for (const step of ['start', 'shout']) await page.locator(`.node[data-step="${step}"][data-state="completed"]`).waitFor({ timeout: 60_000 });
      const beforeStop = out.length;
      child.stdin.write('\x03');
      expect(await exited).toBe(0);
      // Ctrl-C reaches only playflow dev (its PostgreSQL has a session of its own): a quiet shutdown
      const shutdown = out.slice(beforeStop);
      expect(shutdown).not.toMatch(/connection lost|sweeper: .* failed|"level":"(warn|error)"|\bWARN\b|\bERROR\b/);
    } finally {
      await closeBrowser(browser);
      // a failed assertion above: stop it as a user would, so its PostgreSQL releases the data dir
      // the next test uses (SIGKILL reaches only `script`, not the session it started)
      if (!gone) {
        child.stdin.write('\x03');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
      }
      child.kill('SIGKILL');
    }
  }, 180_000);

  it('--no-serve exits after the run even in a terminal', async () => {
    const cmd = `exec ${[process.execPath, CLI, 'dev', HELLO, '--data-dir', termDir, '--port', '0', '--no-serve'].map((a) => `'${a}'`).join(' ')}`;
    const r = await new Promise<Run>((resolve) => {
      execFile('script', ['-qfec', cmd, '/dev/null'], { env: cleanEnv(), cwd: ROOT, timeout: 150_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('add --serve to keep serving now');
    expect(r.stdout).not.toContain('serving the API');
  }, 180_000);
});
