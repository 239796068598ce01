/**
 * `playflow playbook …`: offline checks of playbook files with the language module, no server.
 *
 *   playflow playbook validate <file...> [--output json] [--strict]
 *   playflow playbook normalize <file> [--output yaml|json]
 *   playflow playbook convert <file|dir...> [--write] [--check] [--output json]
 *
 * validate prints every error and warning as `<file>: <path>: <severity>: <message>` and exits 1
 * when any file has errors (or warnings, with --strict), so it can gate CI.
 */
import { readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from 'commander';
import type { PlaybookIssue } from '../../playbook/index.js';
import { CliError, action, playbookLanguage, printJson, println, readPlaybookFile } from './common.js';

export interface FileReport {
  file: string;
  valid: boolean;
  errors: PlaybookIssue[];
  warnings: PlaybookIssue[];
}

interface ValidateOptions {
  output?: string;
  strict?: boolean;
}

/** A directory stands for the YAML files under it (recursively, sorted); anything else as given. */
async function expand(paths: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of paths) {
    const info = await stat(p).catch(() => undefined);
    if (!info?.isDirectory()) {
      out.push(p);
      continue;
    }
    const entries = (await readdir(p, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
      .map((e) => join(e.parentPath, e.name))
      .sort();
    out.push(...entries);
  }
  return out;
}

/**
 * Validates each file (directories: their YAML files); an unreadable file is reported like an
 * invalid one so the others still run.
 */
export async function validateFiles(paths: string[]): Promise<FileReport[]> {
  const reports: FileReport[] = [];
  for (const file of await expand(paths)) {
    let text: string;
    try {
      text = await readPlaybookFile(file);
    } catch (err) {
      reports.push({ file, valid: false, errors: [{ path: '', message: (err as Error).message, severity: 'error' }], warnings: [] });
      continue;
    }
    const r = (await playbookLanguage()).parsePlaybook(text);
    reports.push({ file, valid: r.errors.length === 0, errors: r.errors, warnings: r.warnings });
  }
  return reports;
}

function line(file: string, issue: PlaybookIssue): string {
  return `${file}: ${issue.path || '(document)'}: ${issue.severity}: ${issue.message}`;
}

/** Prints the reports and returns the exit code: 1 when any file has errors (or warnings when strict). */
export function printReports(reports: FileReport[], opts: ValidateOptions, out: (s: string) => void = println): number {
  const failed = reports.filter((r) => !r.valid || (opts.strict && r.warnings.length > 0));
  if (opts.output === 'json') {
    out(JSON.stringify(reports, null, 2));
  } else {
    for (const r of reports) {
      for (const e of r.errors) out(line(r.file, e));
      for (const w of r.warnings) out(line(r.file, w));
      out(`${r.file}: ${r.valid ? 'valid' : 'invalid'} (${r.errors.length} error${r.errors.length === 1 ? '' : 's'}, ${r.warnings.length} warning${r.warnings.length === 1 ? '' : 's'})`);
    }
    if (reports.length > 1) out(`${reports.length - failed.length} of ${reports.length} files passed`);
  }
  return failed.length ? 1 : 0;
}

function checkOutput(output: string | undefined, allowed: string[]): void {
  if (output !== undefined && !allowed.includes(output)) throw new CliError(`unknown --output ${JSON.stringify(output)} (${allowed.join(' or ')})`);
}

interface ConvertOptions {
  write?: boolean;
  check?: boolean;
  output?: string;
}

interface ConvertReport {
  file: string;
  changed: boolean;
  written: boolean;
  changes: Array<{ path: string; message: string }>;
  not_converted: Array<{ path: string; message: string }>;
  errors: PlaybookIssue[];
}

/**
 * Converts each file (directories: their YAML files): prints what changed and what could not be
 * converted (and why: the converter's own notes, then anything the converted playbook still
 * warns about); `--write` rewrites changed files in place; `--check` exits 1 when a file would
 * change or keeps something unconverted.
 */
async function convertFiles(paths: string[], opts: ConvertOptions): Promise<number> {
  const reports: ConvertReport[] = [];
  for (const file of await expand(paths)) {
    let text: string;
    try {
      text = await readPlaybookFile(file);
    } catch (err) {
      reports.push({ file, changed: false, written: false, changes: [], not_converted: [], errors: [{ path: '', message: (err as Error).message, severity: 'error' }] });
      continue;
    }
    const r = (await import('../../playbook/convert-text.js')).convertPlaybookText(text);
    const notConverted = [...r.unconverted, ...r.warnings.filter((w) => !r.unconverted.some((u) => u.path === w.path)).map((w) => ({ path: w.path, message: w.message }))];
    let written = false;
    if (opts.write && r.changed) {
      await writeFile(file, r.text);
      written = true;
    }
    reports.push({ file, changed: r.changed, written, changes: r.changes, not_converted: notConverted, errors: r.errors });
  }
  if (opts.output === 'json') {
    println(JSON.stringify(reports, null, 2));
  } else {
    for (const r of reports) {
      for (const c of r.changes) println(`${r.file}: ${c.path || '(document)'}: converted: ${c.message}`);
      for (const c of r.not_converted) println(`${r.file}: ${c.path || '(document)'}: not converted: ${c.message}`);
      for (const e of r.errors) println(`${r.file}: ${e.path || '(document)'}: error: ${e.message}`);
      const what = r.changed ? `${r.changes.length} change${r.changes.length === 1 ? '' : 's'}${r.written ? ', written' : opts.write ? '' : ' (dry run: --write to rewrite)'}` : 'nothing to convert';
      println(`${r.file}: ${what}; ${r.not_converted.length} not converted${r.errors.length ? `; ${r.errors.length} error${r.errors.length === 1 ? '' : 's'}` : ''}`);
    }
  }
  if (reports.some((r) => r.errors.length)) return 1;
  if (opts.check && reports.some((r) => r.changed || r.not_converted.length)) return 1;
  return 0;
}

export function register(program: Command): void {
  const playbook = program.command('playbook').description('Playbook files: validate, normalise and convert offline');

  playbook
    .command('validate <file...>')
    .description('Check playbook files (or every YAML file under a directory) against the language: schema, removed v1 constructs, references, templates')
    .option('-o, --output <format>', 'text or json', 'text')
    .option('--strict', 'treat warnings (deprecations, unreachable steps) as failures')
    .action(action(async (files: string[], opts: ValidateOptions) => {
      checkOutput(opts.output, ['text', 'json']);
      const code = printReports(await validateFiles(files), opts);
      if (code) process.exitCode = code;
    }));

  playbook
    .command('convert <file...>')
    .description("Rewrite reference-era forms (tool: <kind> with flat attributes, call.error, set lists, case-level retry pagination, sinks with tool:/backend:, script:, | tojson, main(input_data), loop collection/element, url, query, _loop.*) into the current spec forms; prints every change and what it could not convert")
    .option('--write', 'rewrite changed files in place (comments and layout outside the changed nodes are kept)')
    .option('--check', 'exit 1 when a file would change or keeps something unconverted (for CI)')
    .option('-o, --output <format>', 'text or json', 'text')
    .action(action(async (files: string[], opts: ConvertOptions) => {
      checkOutput(opts.output, ['text', 'json']);
      const code = await convertFiles(files, opts);
      if (code) process.exitCode = code;
    }));

  playbook
    .command('normalize <file>')
    .description('Print the normalised v2 form of a playbook (legacy forms rewritten), as the engine sees it')
    .option('-o, --output <format>', 'yaml or json', 'yaml')
    .action(action(async (file: string, opts: { output?: string }) => {
      checkOutput(opts.output, ['yaml', 'json']);
      const r = (await playbookLanguage()).parsePlaybook(await readPlaybookFile(file));
      for (const w of r.warnings) process.stderr.write(`${line(file, w)}\n`);
      if (!r.playbook) {
        for (const e of r.errors) process.stderr.write(`${line(file, e)}\n`);
        throw new CliError(`${file}: invalid (${r.errors.length} error${r.errors.length === 1 ? '' : 's'})`);
      }
      if (opts.output === 'json') printJson(r.playbook);
      else process.stdout.write((await import('yaml')).stringify(r.playbook, { lineWidth: 0 }));
    }));
}
