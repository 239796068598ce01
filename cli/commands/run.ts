/**
 * `playflow run playbook <path> --payload <json>`: start an execution.
 * `--payload @file.json` reads the payload from a file; `--wait` follows it to its end and exits
 * non-zero when it failed or was cancelled.
 */
import type { Command } from 'commander';
import { action, apiOptions, clientFrom, outputFormat, parseJsonObject, printBody, println, type ApiOptions } from './common.js';
import { waitForEnd } from './execution.js';

export function register(program: Command): void {
  const run = program.command('run').description('Run a resource');
  apiOptions(
    run.command('playbook <path>')
      .description('Start an execution of a catalog playbook')
      .option('--payload <json>', 'input of the execution: a JSON object, or @file.json', '{}')
      .option('--version <n>', 'catalog version (default: latest)', (v) => Number.parseInt(v, 10))
      .option('--wait', 'wait for the execution to end and show its status'),
  ).action(action(async (path: string, opts: ApiOptions & { payload: string; version?: number; wait?: boolean }) => {
    const format = outputFormat(opts);
    const payload = await parseJsonObject(opts.payload, '--payload');
    const client = clientFrom(opts);
    const res = await client.run({ path, payload: payload as never, version: opts.version });
    if (!opts.wait) {
      if (printBody(opts, res)) return;
      println(`execution ${res.execution_id} started: ${res.path} version ${res.version}`);
      return;
    }
    if (format === 'table') println(`execution ${res.execution_id} started: ${res.path} version ${res.version}; waiting…`);
    await waitForEnd(client, res.execution_id, format);
  }));
}
