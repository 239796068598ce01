/**
 * The kind suite cannot run on machines without a Docker engine; these checks keep the script
 * honest there: it parses, and it says why it skips instead of failing half-way.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import path from 'node:path';

const script = path.join(import.meta.dirname, 'run.sh');

describe('e2e/run.sh', () => {
  it('is valid bash', () => {
    execFileSync('bash', ['-n', script]);
  });

  it('skips with the reason when a prerequisite is missing', () => {
    const out = execFileSync('bash', [script], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin', HOME: '/tmp' } });
    expect(out).toMatch(/^e2e skipped: ('(docker|kind|kubectl|helm)' is not on the PATH|no Docker engine)/m);
  });
});
