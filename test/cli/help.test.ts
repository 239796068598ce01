/**
 * Every command's --help ends with examples (cli/commands/help.ts), each of which names the
 * command it documents. `dev` documents itself (cli/commands/dev.ts) and is left out.
 */
import { describe, expect, it } from 'vitest';
import { Command } from 'commander';
import { registerCommands } from '../../cli/commands/index.js';
import { commandPath, EXAMPLES, leafCommands } from '../../cli/commands/help.js';
import { cli } from './helpers.js';

function program(): { program: Command; out: () => string } {
  let out = '';
  const p = new Command().name('playflow').configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (out += s) });
  registerCommands(p);
  return { program: p, out: () => out };
}

describe('help examples', () => {
  const { program: p, out } = program();
  const leaves = leafCommands(p).filter((c) => commandPath(c) !== 'dev');

  it('covers the commands of the task and every registered one', () => {
    const paths = leaves.map(commandPath);
    for (const required of [
      'catalog register playbook', 'catalog list', 'catalog get playbook', 'run playbook', 'execution status', 'execution list',
      'execution events', 'execution cancel', 'server start', 'worker start', 'operator start', 'playbook validate',
      'credentials rotate-key', 'credential create', 'credential list', 'credential get', 'credential delete',
      'vars get', 'vars set', 'vars delete',
    ]) expect(paths).toContain(required);
    // No stale entries either: every example belongs to a command that exists ('' is the program).
    for (const key of Object.keys(EXAMPLES).filter((k) => k !== '')) expect(paths).toContain(key);
  });

  it.each(leaves.map((c) => [commandPath(c), c] as const))('%s --help shows examples of itself', (path, cmd) => {
    const before = out().length;
    cmd.outputHelp();
    const help = out().slice(before);
    const examples = help.split('\nExamples:\n')[1];
    expect(examples, `${path} has no Examples section`).toBeDefined();
    expect(examples).toContain(`playflow ${path}`);
  });

  it('playflow --help ends with the first commands to try', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\nExamples:\n {2}\$ playflow dev examples\/hello_world\.yaml/);
    expect(r.stdout).toContain('credential');
    expect(r.stdout).toContain('vars');
  });

  it('as the user sees it: playflow vars set --help', async () => {
    const r = await cli(['vars', 'set', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: playflow vars set [options] <execution_id> <assignments...>');
    expect(r.stdout).toMatch(/\nExamples:\n {2}\$ playflow vars set 4821 greeting=hello/);
  });
});
