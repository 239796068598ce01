/**
 * The kind suite cannot run on machines without a Docker engine; these checks keep the script
 * honest there: it parses, it says why it skips instead of failing half-way (curl included), and
 * it runs the same examples and checks as the cluster-free release test (test/release/).
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { EXPECTED_RESULT } from '../test/release/scenarios.js';

const script = path.join(import.meta.dirname, 'run.sh');
const text = readFileSync(script, 'utf8');

describe('e2e/run.sh', () => {
  it('is valid bash', () => {
    execFileSync('bash', ['-n', script]);
  });

  it('skips with the reason when a prerequisite is missing', () => {
    const out = execFileSync('bash', [script], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin', HOME: '/tmp' } });
    expect(out).toMatch(/^e2e skipped: ('(docker|kind|kubectl|helm|curl)' is not on the PATH|no Docker engine)/m);
  });

  it('checks curl as a prerequisite', () => {
    const bin = mkdtempSync(path.join(tmpdir(), 'pf-e2e-bin-'));
    try {
      for (const tool of ['docker', 'kind', 'kubectl', 'helm']) writeFileSync(path.join(bin, tool), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
      symlinkSync('/usr/bin/dirname', path.join(bin, 'dirname'));
      const out = execFileSync('/bin/bash', [script], { encoding: 'utf8', env: { PATH: bin, HOME: '/tmp' } });
      expect(out).toMatch(/^e2e skipped: 'curl' is not on the PATH/m);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });

  it('runs the release test\'s examples and checks', () => {
    const root = path.join(import.meta.dirname, '..');
    expect(text).toContain('kubectl -n "$NS" apply -f examples/k8s/credential.yaml -f examples/k8s/playbook.yaml');
    expect(text).not.toMatch(/examples\/k8s\/[a-z]+\.yaml[^\n]*--namespace|namespace: playflow/);
    expect(JSON.parse(/^EXPECTED='([^']+)'$/m.exec(text)![1])).toEqual(EXPECTED_RESULT);
    // The printer columns it expects are the CRD's (priority 0).
    const crd = parse(readFileSync(path.join(root, 'crds', 'playflow.io_playbooks.yaml'), 'utf8'));
    const cols = crd.spec.versions[0].additionalPrinterColumns.filter((c: any) => !c.priority).map((c: any) => c.name.toUpperCase());
    expect(text).toContain(`'^NAME +${cols.join(' +')}$'`);
    for (const check of ['wait --for=condition=Ready playbook/weather-report', 'scale "workerpool/$POOL" --replicas=3', 'helm test', 'forbidden', 'helm upgrade "$RELEASE"', '/api/run/playbook', 'run playbook "$PB_PATH"']) {
      expect(text).toContain(check);
    }
  });
});
