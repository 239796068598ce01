import type { Command } from 'commander';

/** Add one line per command group. Order is the order `playflow --help` lists them. */
const groups: Array<(program: Command) => void> = [];

export function registerCommands(program: Command): void {
  for (const register of groups) register(program);
}
