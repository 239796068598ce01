/**
 * `playflow dev [playbook.yaml]`: server and worker in one process on an embedded PostgreSQL and
 * the in-process broker (cli/dev/run.ts) — zero set-up.
 *
 *   playflow dev examples/hello_world.yaml [--payload '{"name": "Ada"}' | --payload @in.json]
 *       Registers the file — and every other `*.yaml` playbook in its folder first, so a
 *       `playbook` tool step finds its siblings (examples/composition.yaml calls
 *       examples/hello_world) — runs it with the payload, prints each step as it finishes and
 *       then the result and the link to the execution's page in the web console. In a terminal
 *       (stdout a TTY) it then keeps serving the API and the console, so that link works, until
 *       SIGINT/SIGTERM (exit 0); otherwise — scripts, CI, --output json — it stops everything and
 *       exits 0 when the execution completed, 1 otherwise. --serve / --no-serve choose either
 *       behaviour explicitly.
 *       The file is checked before anything starts: a missing file, invalid YAML or an invalid
 *       playbook (every problem with its path) and a malformed --payload exit 1 at once.
 *   playflow dev
 *       Serves the API and the web console (and runs the worker) until SIGINT/SIGTERM; prints the
 *       URL, the console and docs URLs and how to point the CLI at it.
 *
 * Options: --data-dir (default $PLAYFLOW_DEV_DIR, else ~/.playflow/dev: the database, the
 * generated encryption key), --port (default 8082; 0 = any free port; with a file, a taken 8082
 * falls back to a free port), --output json (the final execution record, or in serve mode one
 * line `{url, docs, data_dir, …}`), --verbose (info logs; default warn, on stderr).
 * Without PLAYFLOW_ENCRYPTION_KEY the key is generated once into the data dir (mode 0600).
 * Dev listens on 127.0.0.1 (HOST overrides).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import type { PlayflowClient } from '../../client/http.js';
import type { EventView, ExecutionView } from '../../common/protocol.js';
import { parsePort } from '../../common/config.js';
import { applyInterruptBudget, interruptBudget } from '../../common/v8-tiering.js';
import type { DevInstance, DevKeyInfo } from '../dev/run.js';
import { CliError, action, parseJsonObject, playbookLanguage, printJson, println, readPlaybookFile } from './common.js';

interface DevCliOptions {
  payload?: string;
  serve?: boolean;
  dataDir?: string;
  port?: string;
  output?: string;
  verbose?: boolean;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** The file's problems, each with its path, as one message (exit 1). */
async function checkPlaybook(file: string, text: string): Promise<void> {
  const r = (await playbookLanguage()).parsePlaybook(text);
  if (r.errors.length === 0) return;
  const lines = r.errors.map((e) => `  - ${e.path || '(document)'}: ${e.message}`);
  throw new CliError(`playbook '${file}' is invalid (${r.errors.length} problem${r.errors.length === 1 ? '' : 's'}):\n${lines.join('\n')}`, 1, r.errors);
}

function parsePortOption(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  try {
    return parsePort(raw, '--port');
  } catch (err) {
    throw new CliError((err as Error).message); // a usage error (cli_error with -o json), as the other options'
  }
}

function short(v: unknown, max = 300): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

function errorText(e: unknown): string {
  if (e && typeof e === 'object' && !Array.isArray(e)) {
    const o = e as Record<string, unknown>;
    const msg = typeof o.message === 'string' ? o.message : typeof o.error === 'string' ? o.error : undefined;
    if (msg) return `${o.status !== undefined ? `${String(o.status)} ` : ''}${msg}`;
  }
  return short(e);
}

/** One line per step milestone, from the event log. */
function progressLine(e: EventView, seen: Set<string>): string | null {
  const step = e.step ?? '';
  const p = e.payload ?? {};
  switch (e.name) {
    case 'action_started':
      if (seen.has(step)) return null;
      seen.add(step);
      return `  ${step}: running`;
    case 'call.done': {
      if (p.error === undefined || p.error === null) return null;
      const meta = (p.meta ?? {}) as Record<string, unknown>;
      return `  ${step}: call failed${meta.attempt !== undefined ? ` (attempt ${String(meta.attempt)})` : ''}: ${errorText(p.error)}`;
    }
    case 'step_completed':
      return `  ${step}: completed`;
    case 'step_failed':
      return `  ${step}: failed${p.error !== undefined ? `: ${errorText(p.error)}` : ''}`;
    case 'step_skipped':
      return `  ${step}: skipped`;
    default:
      return null;
  }
}

/**
 * Follows an execution to its end, printing step progress (text mode). Between two reads of the
 * log it long-polls the execution for 150 ms, which answers at the commit that ends it: the run
 * is reported as soon as it ends, not up to a tick later.
 */
async function follow(client: PlayflowClient, id: string, json: boolean): Promise<ExecutionView> {
  let after: number | undefined;
  const seen = new Set<string>();
  let ex = await client.getExecution(id);
  for (;;) {
    if (!json) {
      // read after the status: when that is terminal, every event is in the log already
      for await (const e of client.iterateEvents(id, { after })) {
        after = e.seq;
        const line = progressLine(e, seen);
        if (line) println(line);
      }
    }
    if (TERMINAL.has(ex.status)) return ex;
    ex = await client.getExecution(id, { wait: 0.15 });
  }
}

/** The first `traceback` string inside an error record (python tool errors carry one). */
function findTraceback(v: unknown, depth = 0): string | undefined {
  if (!v || typeof v !== 'object' || depth > 5) return undefined;
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (k === 'traceback' && typeof x === 'string') return x;
    const found = findTraceback(x, depth + 1);
    if (found) return found;
  }
  return undefined;
}

function printOutcome(ex: ExecutionView): void {
  const took = ex.finished_at ? ` in ${((Date.parse(ex.finished_at) - Date.parse(ex.created_at)) / 1000).toFixed(2)} s` : '';
  println(`execution ${ex.execution_id} ${ex.status}${took}`);
  if (ex.status === 'completed') {
    println('result:');
    println(JSON.stringify(ex.result, null, 2));
    return;
  }
  if (ex.error !== null && ex.error !== undefined) {
    println(`error: ${errorText(ex.error)}`);
    const tb = findTraceback(ex.error);
    if (tb) println(tb.trimEnd().split('\n').map((l) => `  ${l}`).join('\n'));
  }
}

function keyLine(key: DevKeyInfo): string {
  switch (key.source) {
    case 'env': return `encryption key: PLAYFLOW_ENCRYPTION_KEY${key.file ? ` (the generated key in ${key.file} still decrypts older data)` : ''}`;
    case 'generated': return `encryption key: PLAYFLOW_ENCRYPTION_KEY not set; generated one in ${key.file} (0600), used from now on for this data dir`;
    default: return `encryption key: PLAYFLOW_ENCRYPTION_KEY not set; using the dev key in ${key.file}`;
  }
}

/**
 * The catalog path to register under when the playbook has no metadata.path: metadata.name (the
 * documented default; the server's catalog service answers 400 instead — worked around here).
 */
async function fallbackPath(text: string): Promise<string | undefined> {
  const md = (await playbookLanguage()).parsePlaybook(text).playbook?.metadata;
  return md && !md.path?.trim() && md.name?.trim() ? md.name.trim() : undefined;
}

/** Other playbooks of the file's folder (for `playbook` tool steps); unparseable files are skipped. */
async function siblingPlaybooks(file: string): Promise<Array<{ file: string; text: string }>> {
  const dir = path.dirname(path.resolve(file));
  const self = path.resolve(file);
  const { parsePlaybook } = await playbookLanguage();
  const out: Array<{ file: string; text: string }> = [];
  for (const name of (await readdir(dir)).sort()) {
    const full = path.join(dir, name);
    if (!/\.ya?ml$/i.test(name) || full === self) continue;
    const text = await readFile(full, 'utf8').catch(() => '');
    if (text && parsePlaybook(text).errors.length === 0) out.push({ file: full, text });
  }
  return out;
}

/** The console's page of an execution (server/app/ui.ts serves /ui). */
export const executionPage = (url: string, id: string) => `${url}/ui/executions/${id}`;

async function runFile(dev: DevInstance, file: string, text: string, payload: Record<string, unknown>, json: boolean, info: (s: string) => void, serve: boolean): Promise<number> {
  const client = dev.client;
  const siblings = await siblingPlaybooks(file);
  for (const s of siblings) {
    try {
      await client.registerPlaybook(s.text, await fallbackPath(s.text));
    } catch (err) {
      info(`note: ${path.relative(process.cwd(), s.file)} not registered: ${(err as Error).message}`);
    }
  }
  if (siblings.length) info(`registered ${siblings.length} other playbook${siblings.length === 1 ? '' : 's'} of ${path.relative(process.cwd(), path.dirname(path.resolve(file))) || '.'}/`);
  const reg = await client.registerPlaybook(text, await fallbackPath(text));
  info(`${reg.created ? 'registered' : 'unchanged'}: ${reg.path} version ${reg.version}`);
  for (const w of reg.warnings) info(`  warning: ${w.path || '(document)'}: ${w.message}`);
  const run = await client.run({ path: reg.path, version: reg.version, payload: payload as never });
  info(`execution ${run.execution_id} started`);
  const ex = await follow(client, String(run.execution_id), json);
  if (json) printJson(ex);
  else printOutcome(ex);
  const page = executionPage(dev.url, String(run.execution_id));
  // The link is only worth printing with what it takes to open it: a server that stays up.
  info(serve
    ? `console: ${page}`
    : `console: ${page}  (open it while \`playflow dev\` serves this data dir: add --serve to keep serving now)`);
  return ex.status === 'completed' ? 0 : 1;
}

async function devAction(file: string | undefined, opts: DevCliOptions): Promise<void> {
  if (opts.output !== undefined && !['text', 'json'].includes(opts.output)) throw new CliError(`unknown --output ${JSON.stringify(opts.output)} (text or json)`);
  const json = opts.output === 'json';
  // With a file: keep serving after the run when a person watches (a terminal), so the printed
  // console link opens; scripts and CI (no TTY, or JSON output) get the run's exit code at once.
  const serve = opts.serve ?? (file !== undefined && Boolean(process.stdout.isTTY) && !json);
  const port = parsePortOption(opts.port);
  // Everything the user typed is checked before PostgreSQL starts.
  let text: string | undefined;
  if (file !== undefined) {
    text = await readPlaybookFile(file);
    await checkPlaybook(file, text);
  } else if (opts.payload !== undefined) {
    throw new CliError('--payload needs a playbook file: playflow dev <file.yaml> --payload <json>');
  }
  const payload = await parseJsonObject(opts.payload ?? '{}', '--payload');
  const budget = interruptBudget(process.env);

  const { startDev, defaultDataDir } = await import('../dev/run.js');
  const dataDir = opts.dataDir ? path.resolve(opts.dataDir) : defaultDataDir();
  // Setup lines: stdout in text mode, stderr with --output json (stdout is the JSON document).
  const info = (s: string) => (json ? process.stderr.write(`${s}\n`) : println(s));
  // Node draining its event loop while a start-up promise is pending would exit 0 in silence.
  const stalled = () => {
    process.stderr.write('error: playflow dev stopped during start-up with nothing left to wait for (run with --verbose for details)\n');
    process.exit(1);
  };
  process.once('beforeExit', stalled);
  // A signal while starting: finish starting (PostgreSQL must not be left running), then stop.
  let early: NodeJS.Signals | undefined;
  const onEarly = (sig: NodeJS.Signals) => { early = sig; };
  process.on('SIGINT', onEarly);
  process.on('SIGTERM', onEarly);
  let dev: DevInstance;
  try {
    dev = await startDev({ dataDir, port, portFallback: file !== undefined && port === undefined, verbose: opts.verbose });
    applyInterruptBudget(budget); // once started: see common/v8-tiering.ts
  } finally {
    process.removeListener('beforeExit', stalled);
    process.removeListener('SIGINT', onEarly);
    process.removeListener('SIGTERM', onEarly);
  }
  if (early) {
    process.stderr.write(`${early}: stopping\n`);
    await dev.stop();
    process.exit(130);
  }
  const dbNote = `${dev.db.initialised ? 'initialised' : 'PostgreSQL'} ${dev.db.clusterDir}`;

  if (file !== undefined && text !== undefined) {
    info(`playflow dev: API ${dev.url}, data ${dataDir} (${dbNote})`);
    info(keyLine(dev.key));
    let code: number;
    // First signal: stop cleanly (a call in flight gets up to 10 s); a second one exits at once
    // (the database still gets its fast shutdown from embedded-db's exit listener).
    let signals = 0;
    const onSignal = (sig: NodeJS.Signals) => {
      signals += 1;
      if (signals > 1) process.exit(130);
      process.stderr.write(`\n${sig}: stopping (again to exit at once)\n`);
      void dev.stop().finally(() => process.exit(130));
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      code = await runFile(dev, file, text, payload, json, info, serve);
    } catch (err) {
      await dev.stop();
      throw err;
    }
    if (!serve) {
      await dev.stop();
      // Everything is stopped; exit now rather than wait for idle sockets/timers of libraries.
      process.exit(code);
    }
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    info(`serving the API and the console at ${dev.url}/ui until Ctrl-C${opts.serve === undefined ? ' (--no-serve: exit after the run)' : ''}`);
  } else if (opts.serve !== undefined) {
    throw new CliError(opts.serve
      ? '--serve needs a playbook file (without one, playflow dev serves anyway)'
      : '--no-serve needs a playbook file (without one, playflow dev serves until Ctrl-C)');
  }

  if (file !== undefined) {
    // --serve after a run: the lines above said where; wait for the signal below.
  } else if (json) {
    printJson({ url: dev.url, console: `${dev.url}/ui`, docs: `${dev.url}/docs`, data_dir: dataDir, database: dev.db.clusterDir, encryption_key: dev.key.source === 'env' ? 'PLAYFLOW_ENCRYPTION_KEY' : dev.key.file, pid: process.pid });
  } else {
    println(`Playflow dev: API server and worker in one process (embedded PostgreSQL, in-process broker)`);
    println(`  API:     ${dev.url}`);
    println(`  console: ${dev.url}/ui`);
    println(`  docs:    ${dev.url}/docs   (OpenAPI: ${dev.url}/redoc)`);
    println(`  data:    ${dataDir}   (${dbNote})`);
    println(`  ${keyLine(dev.key)}`);
    println('Use the CLI against it:');
    if (!dev.url.endsWith(':8082')) println(`  export SERVER_API_URL=${dev.url}`);
    println('  playflow catalog register playbook examples/hello_world.yaml');
    println(`  playflow run playbook examples/hello_world --payload '{"name": "Ada"}' --wait`);
    println('  playflow execution list');
    println('Stop with Ctrl-C (SIGINT) or SIGTERM.');
  }
  await new Promise<void>((resolve) => {
    let signals = 0;
    const onSignal = (sig: NodeJS.Signals) => {
      signals += 1;
      if (signals > 1) process.exit(1);
      dev.logger.info({ signal: sig }, 'stopping');
      dev.stop().then(
        () => process.exit(0),
        (err: Error) => {
          process.stderr.write(`error: stopping: ${err.message}\n`);
          process.exit(1);
        },
      );
      resolve();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

export function register(program: Command): void {
  program
    .command('dev [playbook]')
    .description('Server + worker in one process on an embedded PostgreSQL: run a playbook file, or serve the API')
    .option('--payload <json>', 'input of the execution: a JSON object, or @file.json')
    .option('--serve', 'with a file: keep serving the API and the console after the run, until Ctrl-C (the default in a terminal)')
    .option('--no-serve', 'with a file: stop and exit after the run (the default without a terminal)')
    .option('--data-dir <dir>', 'where the database and the dev encryption key live (env PLAYFLOW_DEV_DIR, default ~/.playflow/dev)')
    .option('--port <port>', 'API port (default 8082; 0 = any free port)')
    .option('-o, --output <format>', 'text or json', 'text')
    .option('-v, --verbose', 'info logs (default: warnings and errors only)')
    .addHelpText('after', `
With a file: registers every other *.yaml playbook of the file's folder first (so \`playbook\`
tool steps find their children, e.g. examples/composition.yaml → examples/hello_world), then
registers and runs the file, prints each step, the result and the execution's console page; in a
terminal it then keeps serving (so the page opens) until Ctrl-C, otherwise (or with --no-serve) it
stops and exits 0 when the execution completed, 1 otherwise (--serve: keeps serving). Without a
file: serves the API and the web console (/ui) on 127.0.0.1 until Ctrl-C.

Without PLAYFLOW_ENCRYPTION_KEY a key is generated once into <data-dir>/encryption.key (0600).

Examples:
  playflow dev examples/hello_world.yaml --payload '{"name": "Ada"}'
  playflow dev --port 0 --output json`)
    .action(action(async (file: string | undefined, opts: DevCliOptions) => devAction(file, opts)));
}
