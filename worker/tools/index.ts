/**
 * Tool registry: `runTool(tool, ctx)` dispatches on `tool.kind`. A bad tool configuration
 * (ToolConfigError) and any unexpected throw become an error outcome (`code: 'bad_config'` /
 * `'internal'`) — the failure is reported as a call.done event, not retried by the broker. Only a
 * WorkerFault propagates (the runtime naks the message).
 *
 * `playbook` is not a tool call: the runtime asks the server to start the child. `secret` needs
 * the worker's server client: the runtime passes it in `ctx.runners` (worker/tools/secret.ts).
 */
import { ApiError } from '../../client/http.js';
import type { ToolKind } from '../../playbook/types.js';
import { runConsole } from './console.js';
import { runEmail } from './email.js';
import { runFile } from './file.js';
import { runHttp } from './http.js';
import { runSlack, runWebhook } from './notify.js';
import { runPostgres } from './postgres.js';
import { runPython } from './python.js';
import { runTransform } from './transform.js';
import { ToolConfigError, WorkerFault, fail, type Tool, type ToolContext, type ToolOutcome, type ToolRunner } from './types.js';
import { workbookRunner } from './workbook.js';

export * from './types.js';

const registry = new Map<string, ToolRunner>();

export function registerTool(kind: ToolKind | string, runner: ToolRunner): void {
  registry.set(kind, runner);
}

export function hasTool(kind: string): boolean {
  return registry.has(kind);
}

export async function runTool(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  if (!tool || typeof tool !== 'object' || typeof tool.kind !== 'string') return fail('tool has no kind', { code: 'bad_config' });
  if (tool.kind === 'playbook') return fail('playbook tools are started by the worker runtime, not run as a tool call', { code: 'bad_config' });
  const runner = ctx.runners?.[tool.kind] ?? registry.get(tool.kind);
  if (!runner) return fail(`tool kind '${tool.kind}' is not available in this worker`, { code: 'unsupported_kind' });
  try {
    return await runner(tool, ctx);
  } catch (err) {
    if (err instanceof WorkerFault) throw err;
    // The Playflow server unreachable (or failing) from inside a tool (secret, keychain): redeliver.
    if (err instanceof ApiError && (err.status === 0 || err.status >= 500)) throw new WorkerFault(`${tool.kind}: ${err.message}`, { cause: err });
    if (err instanceof ToolConfigError) return fail(err.message, { code: 'bad_config' });
    return fail(`${tool.kind} tool failed: ${(err as Error)?.message ?? String(err)}`, { code: 'internal' });
  }
}

registerTool('http', runHttp);
registerTool('postgres', runPostgres);
// Loaded on first use: @duckdb/node-api brings a native library that a worker running no duckdb
// step need not load: importing the worker's runtime took ~0.3 s longer with it and its process
// held 22 MB more (882 → 594 ms median of five, 105 → 83 MB RSS, measured here).
registerTool('duckdb', async (tool, ctx) => (await import('./duckdb.js')).runDuckdb(tool, ctx));
registerTool('python', runPython);
registerTool('workbook', workbookRunner(runTool));
registerTool('file', runFile);
registerTool('email', runEmail);
registerTool('slack', runSlack);
registerTool('webhook', runWebhook);
registerTool('transform', runTransform);
registerTool('console', runConsole);
