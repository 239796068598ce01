/**
 * `playflow playbook validate|normalize` as a user runs it: the built entry point (dist/, which
 * `npm test` compiles before running the suites) is spawned.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { printReports, validateFiles, type FileReport } from './playbook.js';

const repo = resolve(import.meta.dirname, '..', '..');
const fixtures = join(repo, 'test', 'fixtures', 'playbooks');
const out = join(repo, 'dist');

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [join(out, 'cli', 'index.js'), ...args], { cwd: repo, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  if (!existsSync(join(out, 'cli', 'index.js'))) throw new Error('dist/cli/index.js is missing: run `npm run build` (npm test does)');
});

describe('playflow playbook validate (subprocess)', () => {
  it('exits 0 for a valid playbook', () => {
    const file = join(fixtures, 'valid', 'http-pagination-retry.yaml');
    const r = cli('playbook', 'validate', file);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${file}: valid (0 errors, 0 warnings)\n`);
    expect(r.code).toBe(0);
  });

  it('prints each error with its file and path and exits 1', () => {
    const file = join(fixtures, 'invalid', 'step-when.yaml');
    const r = cli('playbook', 'validate', file);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`${file}: workflow[1].when: error: step 'notify': step-level 'when' was removed in v2`);
    expect(r.stdout).toContain(`${file}: invalid (1 error, 0 warnings)`);
  });

  it('prints deprecation warnings but passes, unless --strict', () => {
    const file = join(fixtures, 'legacy', 'synonyms.yaml');
    const r = cli('playbook', 'validate', file);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${file}: workflow[0].tool.url: warning: 'url' is a synonym of 'endpoint'`);
    expect(cli('playbook', 'validate', '--strict', file).code).toBe(1);
  });

  it('--output json gives one {file, valid, errors, warnings} per file, missing files included', () => {
    const good = join(fixtures, 'valid', 'next-forms.yaml');
    const bad = join(fixtures, 'invalid', 'duplicate-steps.yaml');
    const missing = join(fixtures, 'nope.yaml');
    const r = cli('playbook', 'validate', '--output', 'json', good, bad, missing);
    expect(r.code).toBe(1);
    const reports = JSON.parse(r.stdout) as FileReport[];
    expect(reports.map((x) => [x.file, x.valid])).toEqual([[good, true], [bad, false], [missing, false]]);
    expect(reports[1].errors).toEqual([expect.objectContaining({ path: 'workflow[2].step', severity: 'error' })]);
    expect(reports[2].errors[0].message).toBe(`cannot read playbook file '${missing}': no such file`);
  });

  it('reports a missing file clearly and exits 1', () => {
    const r = cli('playbook', 'validate', '/definitely/not/here.yaml');
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("/definitely/not/here.yaml: (document): error: cannot read playbook file '/definitely/not/here.yaml': no such file");
  });

  it('rejects an unknown output format', () => {
    const r = cli('playbook', 'validate', '-o', 'xml', join(fixtures, 'valid', 'next-forms.yaml'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('unknown --output "xml"');
  });

  it('normalize prints the v2 form that the fixtures expect', () => {
    const file = join(fixtures, 'legacy', 'retry-on-error-on-success.yaml');
    const r = cli('playbook', 'normalize', file);
    expect(r.code).toBe(0);
    const want = JSON.parse(readFileSync(file.replace(/\.yaml$/, '.expected.json'), 'utf8')) as { playbook: unknown };
    expect(parseYaml(r.stdout)).toEqual(want.playbook);
    expect(r.stderr).toContain('warning: deprecated: retry {on_error, on_success}');
  });
});

describe('validateFiles / printReports', () => {
  it('counts passes in the summary and returns the exit code', async () => {
    const reports = await validateFiles([join(fixtures, 'valid', 'document.json'), join(fixtures, 'invalid', 'empty-workflow.yaml')]);
    const lines: string[] = [];
    expect(printReports(reports, { output: 'text' }, (s) => lines.push(s))).toBe(1);
    expect(lines.at(-1)).toBe('1 of 2 files passed');
    expect(lines).toContain(`${join(fixtures, 'invalid', 'empty-workflow.yaml')}: workflow: error: workflow needs at least one step`);
  });
});

describe('validateFiles with a directory', () => {
  it('validates every YAML file under it, in order, and ignores other files', async () => {
    const reports = await validateFiles([join(fixtures, 'legacy')]);
    const yamlFiles = readdirSync(join(fixtures, 'legacy')).filter((f) => f.endsWith('.yaml')).sort();
    expect(reports.map((r) => r.file)).toEqual(yamlFiles.map((f) => join(fixtures, 'legacy', f)));
    expect(reports.every((r) => r.valid && r.warnings.length > 0 === !r.file.endsWith('case-then-forms.yaml'))).toBe(true);
  });
});
