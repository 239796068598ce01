/**
 * `python` tool: code (string), args (object; merged over the step's args, parameters of
 * `main` bound by name), libs (object alias → module, e.g. `{pd: pandas}`; a list of module
 * names is accepted too), timeout (seconds, default 300). Runs in the warm interpreter pool
 * (worker/python/pool.ts), never in the worker's process.
 *
 * Response: the JSON value returned by `main` (or assigned to `result`; integers beyond 2^53
 * become strings); `log` is everything the code printed. Error outcomes: `code` python_error (with `data.traceback` and
 * `data.type`), missing_library, missing_argument, not_serialisable, timeout, crash, exit.
 */
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { PythonPool, type PythonPoolOptions } from '../python/pool.js';
import { isObject } from './json.js';
import { timeoutMs } from './http.js';
import { withScript } from './script.js';
import { ToolConfigError, fail, ok, okJson, type ToolContext, type ToolOutcome } from './types.js';

export const DEFAULT_PYTHON_TIMEOUT_S = 300;

let pool: PythonPool | null = null;
let poolOptions: PythonPoolOptions = {};

/** Sets the pool options (before first use) — the runtime calls it from its settings. */
export function configurePython(opts: PythonPoolOptions): void {
  poolOptions = opts;
}

export function pythonPool(): PythonPool {
  if (!pool) {
    pool = new PythonPool(poolOptions);
    void pool.start().catch(() => {});
  }
  return pool;
}

export async function closePythonPool(): Promise<void> {
  const p = pool;
  pool = null;
  await p?.close();
}

function libsOf(v: Json | undefined): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (Array.isArray(v)) {
    const out: Record<string, string> = {};
    for (const m of v) {
      if (typeof m !== 'string' || !m) throw new ToolConfigError('libs list entries must be module names');
      out[m.split('.')[0]] = m;
    }
    return out;
  }
  if (!isObject(v)) throw new ToolConfigError('libs must be an object mapping a name to a module');
  const out: Record<string, string> = {};
  for (const [alias, mod] of Object.entries(v)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(alias)) throw new ToolConfigError(`libs name '${alias}' is not a python identifier`);
    if (typeof mod !== 'string' || !mod) throw new ToolConfigError(`libs.${alias} must be a module name`);
    out[alias] = mod;
  }
  return out;
}

export async function runPython(given: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const tool = await withScript(given, 'code', ctx);
  const code = tool.code;
  if (typeof code !== 'string' || !code.trim()) throw new ToolConfigError('python tool needs code');
  for (const f of ['args', 'with'] as const) {
    if (tool[f] !== undefined && tool[f] !== null && !isObject(tool[f])) throw new ToolConfigError(`python ${f} must be an object`);
  }
  const args: JsonObject = { ...ctx.args, ...((tool.args as JsonObject | undefined) ?? {}), ...((tool.with as JsonObject | undefined) ?? {}) };
  const r = await pythonPool().call(
    { code, args, libs: libsOf(tool.libs) },
    { timeoutMs: timeoutMs(tool.timeout, DEFAULT_PYTHON_TIMEOUT_S), signal: ctx.signal },
  );
  const log = r.log || undefined;
  // a large result stays JSON text: the worker forwards it as it is (common/raw-json.ts)
  if (r.ok) return r.resultJson !== undefined ? okJson(r.resultJson, log) : ok(r.result, log);
  const e = r.error;
  const message = e.code === 'python_error' ? `${e.type}: ${e.message}` : e.message;
  return fail(message, { code: e.code, data: { type: e.type, traceback: e.traceback } }, log);
}
