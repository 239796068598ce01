/**
 * `playflow playbook convert` (the built CLI) on the reference-era fixtures in
 * test/fixtures/reference: each `<name>.yaml` converts to exactly `<name>.converted.yaml`, the
 * output validates (no warnings but what the converter reports as not convertible), `--check`
 * gates CI and `--write` rewrites in place, keeping comments.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { convertPlaybookText } from '../../playbook/convert-text.js';
import { parsePlaybook } from '../../playbook/index.js';
import { ROOT, cli } from './helpers.js';

const dir = join(ROOT, 'test/fixtures/reference');
const inputs = readdirSync(dir).filter((f) => f.endsWith('.yaml') && !f.endsWith('.converted.yaml')).sort();
const read = (f: string) => readFileSync(join(dir, f), 'utf8');
const tmp = mkdtempSync(join(tmpdir(), 'pf-convert-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** What each fixture keeps on purpose: [path, why]. */
const KEPT: Record<string, string[]> = { 'conventions.yaml': ['workflow[2].case[0].then.retry.max_delay'] };

describe('convert: reference-era fixtures → spec forms', () => {
  it.each(inputs)('%s', (file) => {
    const r = convertPlaybookText(read(file));
    const expectedFile = file.replace(/\.yaml$/, '.converted.yaml');
    if (readdirSync(dir).includes(expectedFile)) {
      expect(r.changed).toBe(true);
      expect(r.text).toBe(read(expectedFile));
    } else {
      expect(r.changed).toBe(false);
      expect(r.text).toBe(read(file));
    }
    expect(r.errors).toEqual([]);
    expect(r.warnings.map((w) => w.path)).toEqual(KEPT[file] ?? []);
    // the input itself runs too: every convention is a warning, none an error
    const original = parsePlaybook(read(file));
    expect(original.errors).toEqual([]);
    // converting again changes nothing
    expect(convertPlaybookText(r.text).changed).toBe(false);
  });
});

// Each case runs the built CLI several times; on a busy machine one start costs seconds.
describe('playflow playbook convert', { timeout: 120_000 }, () => {
  it('dry run lists every change and what was not converted, and changes no file', async () => {
    const f = join(tmp, 'paged_users.yaml');
    copyFileSync(join(dir, 'paged_users.yaml'), f);
    const r = await cli(['playbook', 'convert', f]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${f}: workflow[1].case[0].then.retry: converted: case-level retry with params/collect → step-level retry policy`);
    expect(r.stdout).toContain(`${f}: workflow[2].case[0].then.sink.tool: converted: sink 'tool: postgres' → 'kind: postgres'`);
    expect(r.stdout).toContain(`${f}: 11 changes (dry run: --write to rewrite); 0 not converted`);
    expect(readFileSync(f, 'utf8')).toBe(read('paged_users.yaml'));
  });

  it('--check exits 1 while anything is left, --write rewrites (comments kept), then --check passes', async () => {
    const f = join(tmp, 'w.yaml');
    copyFileSync(join(dir, 'paged_users.yaml'), f);
    expect((await cli(['playbook', 'convert', f, '--check'])).code).toBe(1);
    const w = await cli(['playbook', 'convert', f, '--write']);
    expect(w.code, w.stderr).toBe(0);
    expect(w.stdout).toContain('11 changes, written');
    const text = readFileSync(f, 'utf8');
    expect(text).toBe(read('paged_users.converted.yaml'));
    expect(text).toContain('# Reference-era playbook: v1 step form');
    const again = await cli(['playbook', 'convert', f, '--check']);
    expect(again.code, again.stdout).toBe(0);
    expect(again.stdout).toContain('nothing to convert; 0 not converted');
    expect((await cli(['playbook', 'validate', f, '--strict'])).code).toBe(0);
  });

  it('a directory: per file, with what could not be converted and why; --check fails on it', async () => {
    const d = join(tmp, 'dir');
    mkdirSync(d);
    for (const f of ['conventions.yaml', 'child.yaml']) copyFileSync(join(dir, f), join(d, f));
    const r = await cli(['playbook', 'convert', d, '--check', '-o', 'json']);
    expect(r.code).toBe(1);
    const reports = JSON.parse(r.stdout) as Array<{ file: string; changed: boolean; changes: unknown[]; not_converted: Array<{ path: string; message: string }> }>;
    expect(reports.map((x) => [x.file.split('/').pop(), x.changed, x.changes.length])).toEqual([['child.yaml', false, 0], ['conventions.yaml', true, 7]]);
    expect(reports[1].not_converted).toEqual([{ path: 'workflow[2].case[0].then.retry.max_delay', message: expect.stringContaining('no spec form') }]);
  });

  it('a file that is not YAML is an error (exit 1)', async () => {
    const f = join(tmp, 'bad.yaml');
    copyFileSync(join(dir, 'child.yaml'), f);
    const { writeFileSync } = await import('node:fs');
    writeFileSync(f, 'a: [1, 2\n');
    const r = await cli(['playbook', 'convert', f]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('invalid YAML');
  });
});
