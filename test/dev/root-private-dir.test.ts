/**
 * `playflow dev` as root from a checkout other users cannot enter: a fresh copy of the repository
 * (its committed files, the built dist/ and node_modules) inside a 0700 `mktemp -d` directory, as
 * in many CI jobs and containers. The embedded PostgreSQL runs as the OS user `postgres`, which
 * cannot reach binaries inside that directory; dev must still run hello_world to completion.
 * Only meaningful as root (it is how the defect shows); other users' runs are skipped.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const isRoot = process.getuid?.() === 0;
let tmp: string | undefined;

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe.skipIf(!isRoot)('playflow dev as root from a 0700 directory', () => {
  it('runs examples/hello_world.yaml to completion, no stack trace', async () => {
    tmp = mkdtempSync(join(tmpdir(), 'pfroot-'));
    chmodSync(tmp, 0o700);
    const clone = join(tmp, 'clone');
    mkdirSync(clone);
    // the committed tree, as a clone has it, plus the build and the installed packages
    execFileSync('sh', ['-c', `git -C "${ROOT}" archive HEAD | tar -x -C "${clone}"`]);
    cpSync(join(ROOT, 'dist'), join(clone, 'dist'), { recursive: true });
    execFileSync('cp', ['-al', join(ROOT, 'node_modules'), join(clone, 'node_modules')]);

    const env = { ...process.env };
    for (const k of ['PLAYFLOW_ENCRYPTION_KEY', 'PLAYFLOW_API_TOKEN', 'SERVER_API_URL', 'DATABASE_URL', 'BROKER_URL', 'LOG_LEVEL', 'HOST', 'PORT', 'PLAYFLOW_DEV_DIR']) delete env[k];
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, ['dist/cli/index.js', 'dev', 'examples/hello_world.yaml', '--port', '0', '--data-dir', join(tmp!, 'data')],
        { cwd: clone, env, timeout: 240_000 }, (err, stdout, stderr) => {
          const code = err ? ((err as { code?: number }).code ?? 1) : 0;
          resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
        });
    });
    const out = r.stdout + r.stderr;
    expect(out).not.toMatch(/Unhandled 'error' event|EACCES/);
    expect(r.code, out).toBe(0);
    expect(out).toMatch(/completed/);
  }, 300_000);
});
