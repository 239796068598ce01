/**
 * `playflow run playbook <path> --payload <json>`: start an execution.
 * `--payload @file.json` reads the payload from a file; `--wait` follows it to its end and exits
 * non-zero when it failed or was cancelled: the run request answers at once, `execution <id> started`
 * is printed (on stderr with -o json/yaml, so stdout stays one document), and the execution is
 * followed with long polls (`GET /api/execution/{id}?wait=`).
 */
import type { Command } from 'commander';
import { action, apiOptions, clientFrom, outputFormat, parseJsonObject, printBody, println, type ApiOptions, wholeNumber } from './common.js';
import { waitForEnd } from './execution.js';

export function register(program: Command): void {
  const run = program.command('run').description('Run a resource');
  apiOptions(
    run.command('playbook <path>')
      .description('Start an execution of a catalog playbook')
      .option('--payload <json>', 'input of the execution: a JSON object, or @file.json', '{}')
      .option('--version <n>', 'catalog version (default: latest)')
      .option('--wait', 'wait for the execution to end and show its status')
      .option('--idempotency-key <key>', 'retrying with the same key answers the execution the first run created instead of starting another'),
  ).action(action(async (path: string, opts: ApiOptions & { payload: string; version?: string; wait?: boolean; idempotencyKey?: string }) => {
    const format = outputFormat(opts);
    const payload = await parseJsonObject(opts.payload, '--payload');
    const client = clientFrom(opts);
    const req = { path, payload: payload as never, version: wholeNumber(opts.version, '--version', 1), ...(opts.idempotencyKey ? { idempotency_key: opts.idempotencyKey } : {}) };
    const res = await client.run(req);
    if (!opts.wait) {
      if (printBody(opts, res)) return;
      println(`execution ${res.execution_id} started: ${res.path} version ${res.version}`);
      return;
    }
    // the id at once (to inspect or cancel it elsewhere), then the long polls
    const started = `execution ${res.execution_id} started: ${res.path} version ${res.version}; waiting…`;
    if (format === 'table') println(started);
    else process.stderr.write(`${started}\n`);
    await waitForEnd(client, String(res.execution_id), format);
  }));
}
