/**
 * What the API commands share: the client options (`--server`, `--token`, `--output`), output
 * as a table, JSON or YAML (cli/output.ts), and turning failures into one clear message on stderr
 * with a non-zero exit.
 */
import type { Command } from 'commander';
import { ApiError, PlayflowClient } from '../../client/http.js';
import { SecretsClient } from '../../client/secrets.js';
import { redactUrl, URL_SCHEME } from '../../common/redact-url.js';
import { serverUrlFromEnv } from '../../common/config.js';
import { OUTPUT_FORMATS, parseOutputFormat, printStructured, type OutputFormat } from '../output.js';

export { OUTPUT_FORMATS, type OutputFormat };

export const DEFAULT_SERVER = 'http://localhost:8082';

export interface ApiOptions {
  server?: string;
  token?: string;
  /** Parsed by parseOutputFormat (`text` becomes `table`). */
  output?: string;
}

/** Adds `-o, --output table|json|yaml` (default table); an unknown value is a usage error. */
export function outputOption(cmd: Command): Command {
  return cmd.option('-o, --output <format>', `output format: ${OUTPUT_FORMATS.join(', ')}`, parseOutputFormat, 'table');
}

/**
 * Adds --server, --token and --output to an API command. The environment is read when the command
 * runs (serverUrl, apiToken), not as commander defaults: a default is printed by `--help` and after
 * every usage error, and the token (or a URL with credentials) must not be.
 */
export function apiOptions(cmd: Command): Command {
  return outputOption(cmd
    .option('--server <url>', `server base URL (env SERVER_API_URL, also SERVER_URL_FOR_WORKERS or FLOW_SERVER_URL; default ${DEFAULT_SERVER})`)
    .option('--token <token>', 'bearer token (env PLAYFLOW_API_TOKEN)'));
}

/**
 * --server, else SERVER_API_URL (or the reference implementation's SERVER_URL_FOR_WORKERS,
 * FLOW_SERVER_URL), else DEFAULT_SERVER; refused unless it is an http(s) URL. Why here:
 * `127.0.0.1:8082` failed deep in the client as "Invalid URL", and `localhost:8082` parses as a URL
 * of scheme `localhost:` and failed as an unreachable server at "null".
 */
export function serverUrl(opts: ApiOptions): string {
  const fromEnv = serverUrlFromEnv(process.env);
  const url = opts.server || fromEnv?.url || DEFAULT_SERVER;
  const source = opts.server ? '--server' : fromEnv?.variable ?? 'the default server';
  let protocol: string | undefined;
  try {
    protocol = new URL(url).protocol;
  } catch {
    protocol = undefined;
  }
  if (protocol !== 'http:' && protocol !== 'https:') {
    // shown through redactUrl as an http URL, so a user:password@ written without a scheme is masked too
    const scheme = URL_SCHEME.exec(url)?.[0] ?? '';
    const asHttp = redactUrl(`http://${url.slice(scheme.length)}`);
    const got = scheme ? redactUrl(url) : asHttp.slice('http://'.length);
    throw new CliError(`${source} must be an http:// or https:// URL, got ${JSON.stringify(got)}; did you mean ${asHttp}?`);
  }
  return url;
}

/** --token, else PLAYFLOW_API_TOKEN, else none. */
export function apiToken(opts: ApiOptions): string | undefined {
  return opts.token || process.env.PLAYFLOW_API_TOKEN || undefined;
}

export function clientFrom(opts: ApiOptions): PlayflowClient {
  return new PlayflowClient({ baseUrl: serverUrl(opts), token: apiToken(opts) });
}

export function secretsClientFrom(opts: ApiOptions): SecretsClient {
  return new SecretsClient(clientFrom(opts));
}

/** The --output format (already checked by the option's parser; re-checked for programmatic callers). */
export function outputFormat(opts: ApiOptions): OutputFormat {
  try {
    return parseOutputFormat(opts.output ?? 'table');
  } catch (err) {
    throw new CliError((err as Error).message, 2);
  }
}

export function isJson(opts: ApiOptions): boolean {
  return outputFormat(opts) === 'json';
}

/**
 * Prints the API body as JSON or YAML and returns true, or returns false for `table` (the caller
 * prints its own layout).
 */
export function printBody(opts: ApiOptions, body: unknown): boolean {
  return printStructured(outputFormat(opts), body);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function println(line = ''): void {
  process.stdout.write(`${line}\n`);
}

/**
 * An option's whole number (`--limit 10`), checked in the action so that `-o json` gets the error
 * as JSON; anything else (`abc`, `1.5`, `-1`, `2x`) is a CliError naming the option, before any
 * request. Commander's `Number.parseInt` would read `2x` as 2 and `abc` as NaN.
 */
export function wholeNumber(value: string | undefined, option: string, min = 0): number | undefined {
  if (value === undefined) return undefined;
  const n = /^[0-9]+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new CliError(`${option} must be a whole number${min > 0 ? ` of at least ${min}` : ''}, got ${JSON.stringify(value)}`);
  return n;
}

/** A failure with a message meant for the user as is. */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1, readonly details?: unknown) {
    super(message);
    this.name = 'CliError';
  }
}

interface Issue {
  path?: string;
  message?: string;
  severity?: string;
  field?: string;
  location?: string;
}

/** The user-facing text of an API error. */
export function describeApiError(err: ApiError, opts: ApiOptions): string {
  const server = serverUrl(opts);
  switch (true) {
    case err.status === 0:
      return `${err.message}; is the server running? (set --server or SERVER_API_URL; tried ${server})`;
    case err.status === 401:
      return `unauthorized (401): ${err.message}; pass --token or set PLAYFLOW_API_TOKEN`;
    case err.status === 422 && Array.isArray(err.details): {
      const lines = (err.details as Issue[]).map((i) => `  - ${i.path || '(document)'}: ${i.message ?? ''}${i.severity === 'warning' ? ' (warning)' : ''}`);
      return `playbook invalid (422): ${err.message}\n${lines.join('\n')}`;
    }
    case err.status === 404:
      return `not found (404): ${err.message}`;
    case err.status === 400 && Array.isArray(err.details) && err.details.length > 0 && err.details.every((d) => typeof d === 'string'):
      return `${err.message} (400):\n${(err.details as string[]).map((d) => `  - ${d}`).join('\n')}`;
    default:
      return `${err.code} (${err.status}): ${err.message}`;
  }
}

/**
 * Runs an action; any failure is printed (as `{error: …}` JSON on stderr with --output json)
 * and the process exits non-zero.
 */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void>) {
  return async (...args: A): Promise<void> => {
    const cmd = args[args.length - 1] as Command;
    const opts = (typeof cmd?.opts === 'function' ? cmd.opts() : {}) as ApiOptions;
    try {
      await fn(...args);
    } catch (err) {
      let message: string;
      let body: { code: string; message: string; status?: number; details?: unknown };
      let exitCode = 1;
      if (err instanceof ApiError) {
        message = describeApiError(err, opts);
        body = { code: err.code, message: err.message, status: err.status, details: err.details };
      } else if (err instanceof CliError) {
        message = err.message;
        exitCode = err.exitCode;
        body = { code: 'cli_error', message: err.message, details: err.details };
      } else {
        message = err instanceof Error ? err.message : String(err);
        body = { code: 'error', message };
      }
      if (opts.output === 'json') process.stderr.write(`${JSON.stringify({ error: body }, null, 2)}\n`);
      else process.stderr.write(`error: ${message}\n`);
      process.exitCode = exitCode;
    }
  };
}

/** `no such file`, `is a directory`, … for a failed read. */
export function fileErrorReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
}

/** The playbook language (schema checks, templates): loaded by the commands that parse one, not by every CLI start. */
export const playbookLanguage = () => import('../../playbook/index.js');

/** A playbook file's text; a failed read is a CliError naming the file and why. */
export async function readPlaybookFile(file: string): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read playbook file '${file}': ${fileErrorReason(err)}`);
  }
}

/** `{"a":1}` or `@file.json`; must be a JSON object. */
export async function parseJsonObject(text: string, what: string): Promise<Record<string, unknown>> {
  let raw = text;
  if (text.startsWith('@')) {
    const { readFile } = await import('node:fs/promises');
    try {
      raw = await readFile(text.slice(1), 'utf8');
    } catch (err) {
      throw new CliError(`cannot read ${what} file '${text.slice(1)}': ${fileErrorReason(err)}`);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    throw new CliError(`${what} is not valid JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new CliError(`${what} must be a JSON object, e.g. '{"name": "x"}'`);
  return value as Record<string, unknown>;
}
