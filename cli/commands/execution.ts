/**
 * `playflow execution …`:
 *
 *   playflow execution status <id> [--watch] [--interval ms]
 *   playflow execution list [--status s] [--path p] [--parent <id>] [--limit N] [--offset N]
 *   playflow execution events <id> [--after seq] [--limit N]
 *   playflow execution cancel <id>
 *   playflow execution retry <id> [--args json] [--payload json] [--wait]    (resume in place)
 *   playflow execution rerun <id> [--payload json] [--wait]                  (a new execution)
 *
 * `status` shows an execution (status, steps, result, error); `--watch` long-polls (GET ?wait=)
 * until it ends, printing status changes, and exits non-zero when it failed or was cancelled.
 * `list` is newest first; `--parent` lists the children of one execution, `--offset` pages on.
 *
 * -o table (default) keeps the readable status block and one line per event; `list` is a table
 * (asked for with `view=summary`: no payloads, results or step summaries it would not show).
 * -o json / -o yaml print the API body (`events`: every page joined, `{execution_id, events}`;
 * `list`: the full records).
 */
import type { Command } from 'commander';
import type { PlayflowClient } from '../../client/http.js';
import type { ExecutionView, RerunRequest, RetryRequest } from '../../common/protocol.js';
import { printStructured, table, type OutputFormat } from '../output.js';
import { action, apiOptions, clientFrom, CliError, outputFormat, parseJsonObject, printBody, println, type ApiOptions, wholeNumber } from './common.js';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** An execution id, an argument or the value of `option` (`--parent`); anything else is a CliError naming it. */
export function checkId(id: string, option?: string): string {
  if (!/^[0-9]+$/.test(id)) {
    throw new CliError(`${option ? `${option} must be an execution id (a decimal integer)` : 'execution id must be a decimal integer'}, got ${JSON.stringify(id)}`);
  }
  return id;
}

function short(v: unknown, max = 200): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/**
 * An error as one readable line: its `message` (with ` (code)` when it has one), not the raw JSON
 * (whose traceback would push the message past the cut); other shapes as before.
 */
export function errorText(v: unknown, max = 200): string {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const { message, code } = v as { message?: unknown; code?: unknown };
    if (typeof message === 'string' && message !== '') {
      return short(`${message}${typeof code === 'string' && code !== '' ? ` (${code})` : ''}`, max);
    }
  }
  return short(v, max);
}

export function printExecution(ex: ExecutionView): void {
  println(`execution ${ex.execution_id}: ${ex.status}`);
  println(`  playbook:  ${ex.path} version ${ex.version}`);
  println(`  started:   ${ex.created_at}`);
  if (ex.finished_at) println(`  finished:  ${ex.finished_at}`);
  if (ex.parent_execution_id) println(`  parent:    ${ex.parent_execution_id}`);
  const steps = Object.entries(ex.steps ?? {});
  if (steps.length) {
    println('  steps:');
    const width = Math.max(...steps.map(([n]) => n.length));
    for (const [name, s] of steps) {
      println(`    ${name.padEnd(width)}  ${s.status}${s.runs > 1 ? ` (${s.runs} runs)` : ''}${s.error !== undefined && s.error !== null ? `  error: ${errorText(s.error)}` : ''}`);
    }
  }
  if (ex.result !== null && ex.result !== undefined) println(`  result:    ${short(ex.result, 1000)}`);
  if (ex.error !== null && ex.error !== undefined) println(`  error:     ${errorText(ex.error, 1000)}`);
}

/** How long a wait keeps retrying while the server cannot be reached (consecutive failures). */
export const WAIT_RETRY_MS = 30_000;

/**
 * Follows the execution to its end with long polls (the server answers the moment it ends);
 * prints changes (table) or the final record (json, yaml). `intervalMs`: the longest wait of one
 * request when printing changes, so a `running` shows that soon; json/yaml print only the end
 * and wait the server's maximum per request. A server that cannot be reached (restarting) is
 * retried with a short backoff for up to `retryMs` of consecutive failures, saying so once on stderr.
 */
export async function waitForEnd(client: PlayflowClient, id: string, format: OutputFormat, intervalMs = 1000, retryMs = WAIT_RETRY_MS): Promise<ExecutionView> {
  const human = format === 'table';
  const ex = await client.awaitExecution(id, {
    waitSeconds: human ? intervalMs / 1000 : undefined,
    retryMs,
    onRetry: (err) => process.stderr.write(`warning: ${err.message}; retrying for up to ${Math.round(retryMs / 1000)} s (execution ${id} goes on)\n`),
    onChange: (x) => {
      if (!human) return;
      if (TERMINAL.has(x.status)) printExecution(x);
      else println(`execution ${x.execution_id}: ${x.status}`);
    },
  });
  printStructured(format, ex);
  if (ex.status !== 'completed') process.exitCode = 1;
  return ex;
}

export function register(program: Command): void {
  const execution = program.command('execution').description('Inspect and control executions');

  apiOptions(
    execution.command('status <execution_id>')
      .description('Show the status of an execution')
      .option('--watch', 'follow the execution until it ends (long polls: the end shows at once)')
      .option('--interval <ms>', 'with --watch, show status changes at least this often', '1000'),
  ).action(action(async (id: string, opts: ApiOptions & { watch?: boolean; interval: string }) => {
    const format = outputFormat(opts);
    const client = clientFrom(opts);
    if (opts.watch) {
      await waitForEnd(client, checkId(id), format, wholeNumber(opts.interval, '--interval', 1));
      return;
    }
    const ex = await client.getExecution(checkId(id));
    if (!printBody(opts, ex)) printExecution(ex);
  }));

  apiOptions(
    execution.command('list')
      .description('List executions, newest first')
      .option('--status <status>', 'started, running, completed, failed or cancelled')
      .option('--path <path>', 'catalog path')
      .option('--parent <execution_id>', 'only the children of this execution')
      .option('--limit <n>', 'at most this many')
      .option('--offset <n>', 'skip this many (the newest first)'),
  ).action(action(async (opts: ApiOptions & { status?: string; path?: string; parent?: string; limit?: string; offset?: string }) => {
    const format = outputFormat(opts);
    const res = await clientFrom(opts).listExecutions({
      status: opts.status as never,
      path: opts.path,
      parent: opts.parent === undefined ? undefined : checkId(opts.parent, '--parent'),
      limit: wholeNumber(opts.limit, '--limit', 1),
      offset: wholeNumber(opts.offset, '--offset'),
      // the table shows none of payload, result or steps: the server leaves them out; json/yaml get the full records
      ...(format === 'table' ? { view: 'summary' as const } : {}),
    });
    if (printBody(opts, res)) return;
    process.stdout.write(table(
      ['execution_id', 'status', 'playbook', 'version', 'started', 'finished'],
      res.executions.map((e) => [e.execution_id, e.status, e.path, e.version, e.created_at, e.finished_at]),
      'No executions found.',
    ));
  }));

  apiOptions(
    execution.command('events <execution_id>')
      .description("Show an execution's event log, in order")
      .option('--after <seq>', 'only events after this seq')
      .option('--limit <n>', 'at most this many'),
  ).action(action(async (id: string, opts: ApiOptions & { after?: string; limit?: string }) => {
    const client = clientFrom(opts);
    const after = wholeNumber(opts.after, '--after');
    const limit = wholeNumber(opts.limit, '--limit', 1);
    const events = [];
    for await (const e of client.iterateEvents(checkId(id), { after })) {
      events.push(e);
      if (limit !== undefined && events.length >= limit) break;
    }
    if (printBody(opts, { execution_id: id, events })) return;
    if (events.length === 0) return println(`No events${after !== undefined ? ` after seq ${after}` : ''}.`);
    for (const e of events) {
      println(`${String(e.seq).padStart(4)}  ${e.created_at}  ${e.name}${e.step ? `  [${e.step}]` : ''}${e.command_id !== null ? `  #${e.command_id}` : ''}`);
    }
  }));

  apiOptions(
    execution.command('cancel <execution_id>').description('Cancel an execution'),
  ).action(action(async (id: string, opts: ApiOptions) => {
    const ex = await clientFrom(opts).cancelExecution(checkId(id));
    if (!printBody(opts, ex)) println(`execution ${ex.execution_id}: ${ex.status}`);
  }));

  apiOptions(
    execution.command('retry <execution_id>')
      .description('Resume a failed or cancelled execution in place: completed steps keep their results, the failed steps run again')
      .option('--args <json>', 'step name → args merged over that step\'s args: a JSON object, or @file.json')
      .option('--payload <json>', 'merged over the execution payload: a JSON object, or @file.json')
      .option('--wait', 'wait for the execution to end and show its status'),
  ).action(action(async (id: string, opts: ApiOptions & { args?: string; payload?: string; wait?: boolean }) => {
    const req: RetryRequest = {};
    if (opts.args !== undefined) req.args = await parseJsonObject(opts.args, '--args') as RetryRequest['args'];
    if (opts.payload !== undefined) req.payload = await parseJsonObject(opts.payload, '--payload') as never;
    const client = clientFrom(opts);
    const ex = await client.retryExecution(checkId(id), req);
    if (opts.wait) return void await waitForEnd(client, ex.execution_id, outputFormat(opts));
    if (!printBody(opts, ex)) println(`execution ${ex.execution_id}: ${ex.status} (retry ${ex.retries ?? 1})`);
  }));

  apiOptions(
    execution.command('rerun <execution_id>')
      .description('Run an execution again: a new execution of the same playbook version with the same payload (or --payload)')
      .option('--payload <json>', 'replaces the original payload: a JSON object, or @file.json')
      .option('--wait', 'wait for the new execution to end and show its status'),
  ).action(action(async (id: string, opts: ApiOptions & { payload?: string; wait?: boolean }) => {
    const req: RerunRequest = {};
    if (opts.payload !== undefined) req.payload = await parseJsonObject(opts.payload, '--payload') as never;
    const client = clientFrom(opts);
    const res = await client.rerunExecution(checkId(id), req);
    if (opts.wait) return void await waitForEnd(client, res.execution_id, outputFormat(opts));
    if (!printBody(opts, res)) println(`execution ${res.execution_id} started: ${res.path} version ${res.version} (rerun of ${id})`);
  }));
}
