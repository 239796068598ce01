import type { Command } from 'commander';
import { register as catalog } from './catalog.js';
import { register as credential } from './credential.js';
import { register as dev } from './dev.js';
import { register as execution } from './execution.js';
import { register as hook } from './hook.js';
import { addExamples } from './help.js';
import { register as operator } from './operator.js';
import { register as playbook } from './playbook.js';
import { register as run } from './run.js';
import { register as credentials } from './secrets.js';
import { register as schedule } from './schedule.js';
import { register as server } from './server.js';
import { register as vars } from './vars.js';
import { register as worker } from './worker.js';

/**
 * Add one line per command group. Order is the order `playflow --help` lists them. Registering
 * runs on every start, so a group imports its heavy libraries (the playbook language, the
 * database driver, the TypeBox contract) inside the actions that use them:
 * test/cli/startup.test.ts checks what a start loads.
 */
const groups: Array<(program: Command) => void> = [
  server,
  catalog,
  run,
  execution,
  schedule,
  hook,
  worker,
  operator,
  dev,
  playbook,
  credential,
  vars,
  credentials,
];

export function registerCommands(program: Command): void {
  for (const register of groups) register(program);
  addExamples(program);
}
