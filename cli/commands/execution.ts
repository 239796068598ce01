/**
 * `playflow execution status <id> [--watch]`: show an execution (status, steps, result, error);
 * `--watch` polls until it ends, printing status changes, and exits non-zero when it failed or
 * was cancelled. Also `execution list`, `execution events <id>` and `execution cancel <id>`.
 *
 * -o table (default) keeps the readable status block and one line per event; `list` is a table.
 * -o json / -o yaml print the API body (`events`: every page joined, `{execution_id, events}`).
 */
import type { Command } from 'commander';
import type { PlayflowClient } from '../../client/http.js';
import type { ExecutionView } from '../../client/protocol.js';
import { printStructured, table, type OutputFormat } from '../output.js';
import { action, apiOptions, clientFrom, CliError, outputFormat, printBody, println, type ApiOptions } from './common.js';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export function checkId(id: string): string {
  if (!/^[0-9]+$/.test(id)) throw new CliError(`execution id must be a decimal integer, got ${JSON.stringify(id)}`);
  return id;
}

function short(v: unknown, max = 200): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > max ? `${s.slice(0, max)}…` : s;
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
      println(`    ${name.padEnd(width)}  ${s.status}${s.runs > 1 ? ` (${s.runs} runs)` : ''}${s.error !== undefined && s.error !== null ? `  error: ${short(s.error)}` : ''}`);
    }
  }
  if (ex.result !== null && ex.result !== undefined) println(`  result:    ${short(ex.result, 1000)}`);
  if (ex.error !== null && ex.error !== undefined) println(`  error:     ${short(ex.error, 1000)}`);
}

/** Polls until the execution ends; prints changes (table) or the final record (json, yaml). */
export async function waitForEnd(client: PlayflowClient, id: string, format: OutputFormat, intervalMs = 1000): Promise<ExecutionView> {
  let last = '';
  const human = format === 'table';
  for (;;) {
    const ex = await client.getExecution(id);
    if (human && ex.status !== last) {
      if (TERMINAL.has(ex.status)) printExecution(ex);
      else println(`execution ${ex.execution_id}: ${ex.status}`);
      last = ex.status;
    }
    if (TERMINAL.has(ex.status)) {
      printStructured(format, ex);
      if (ex.status !== 'completed') process.exitCode = 1;
      return ex;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export function register(program: Command): void {
  const execution = program.command('execution').description('Inspect and control executions');

  apiOptions(
    execution.command('status <execution_id>')
      .description('Show the status of an execution')
      .option('--watch', 'poll until the execution ends')
      .option('--interval <ms>', 'poll interval with --watch', (v) => Number.parseInt(v, 10), 1000),
  ).action(action(async (id: string, opts: ApiOptions & { watch?: boolean; interval: number }) => {
    const format = outputFormat(opts);
    const client = clientFrom(opts);
    if (opts.watch) {
      await waitForEnd(client, checkId(id), format, opts.interval);
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
      .option('--limit <n>', 'at most this many', (v) => Number.parseInt(v, 10)),
  ).action(action(async (opts: ApiOptions & { status?: string; path?: string; limit?: number }) => {
    const res = await clientFrom(opts).listExecutions({ status: opts.status as never, path: opts.path, limit: opts.limit });
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
      .option('--after <seq>', 'only events after this seq', (v) => Number.parseInt(v, 10))
      .option('--limit <n>', 'at most this many', (v) => Number.parseInt(v, 10)),
  ).action(action(async (id: string, opts: ApiOptions & { after?: number; limit?: number }) => {
    const client = clientFrom(opts);
    const events = [];
    for await (const e of client.iterateEvents(checkId(id), { after: opts.after })) {
      events.push(e);
      if (opts.limit !== undefined && events.length >= opts.limit) break;
    }
    if (printBody(opts, { execution_id: id, events })) return;
    if (events.length === 0) return println(`No events${opts.after !== undefined ? ` after seq ${opts.after}` : ''}.`);
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
}
