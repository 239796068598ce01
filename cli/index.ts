#!/usr/bin/env node
/**
 * `playflow` — the one entry point for every process (server, worker, operator, dev) and the
 * user-facing commands. Each command group lives in cli/commands/<group>.ts and exports
 * `register(program)`; this file only wires them up.
 */
import { Command } from 'commander';
import { registerCommands } from './commands/index.js';

const program = new Command()
  .name('playflow')
  .description('Playflow: Kubernetes-native workflow engine')
  .version('0.1.0')
  // program options (`--version`, `--help`) only before the subcommand: a subcommand's own
  // `--version <n>` (run, catalog get, schedule set, hook set) reaches that subcommand
  .enablePositionalOptions()
  .showHelpAfterError();

registerCommands(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
