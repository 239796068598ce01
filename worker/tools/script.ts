/**
 * The reference's `script:` for the python and postgres tools, loaded at run time into `code` /
 * `command`: inline text, `{path}` — a file under WORKER_SCRIPT_ROOT (refused when no root is set
 * or the path leaves it) — or `{url}` — fetched over http(s). The reference's nesting
 * `{source: {type: file|http, path|url}}` is read too. Inline text is rewritten to `code`/`command`
 * by the language module already; this handles what only the worker can read.
 */
import { readFile } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { httpCall } from './http.js';
import { isObject, str } from './json.js';
import { ToolConfigError, type Json, type Tool, type ToolContext } from './types.js';

let root: string | undefined = process.env.WORKER_SCRIPT_ROOT || undefined;
export function configureScripts(opts: { root?: string }): void {
  root = opts.root;
}

const MAX_SCRIPT_BYTES = 1024 * 1024;

/** The tool with `script` replaced by `field` (`code` or `command`) holding the script's text. */
export async function withScript(tool: Tool, field: 'code' | 'command', ctx: ToolContext): Promise<Tool> {
  const script = tool.script;
  if (script === undefined || script === null || tool[field] !== undefined) return tool;
  const { script: _s, ...rest } = tool;
  return { ...rest, [field]: await loadScript(script, ctx) } as Tool;
}

async function loadScript(script: Json, ctx: ToolContext): Promise<string> {
  if (typeof script === 'string') return script;
  if (!isObject(script)) throw new ToolConfigError('script must be text, {path} or {url}');
  const source = isObject(script.source) ? script.source : script;
  const url = str(source.url) ?? (source.type === 'http' ? str(source.path) : undefined);
  if (url) {
    if (!/^https?:\/\//i.test(url)) throw new ToolConfigError(`script url must be http(s): ${url}`);
    const r = await httpCall({ method: 'GET', url, timeoutMs: 30_000, verify: true, signal: ctx.signal });
    if (r.status < 200 || r.status >= 300) throw new ToolConfigError(`script url ${url} answered HTTP ${r.status}`);
    const text = typeof r.data === 'string' ? r.data : JSON.stringify(r.data);
    if (Buffer.byteLength(text) > MAX_SCRIPT_BYTES) throw new ToolConfigError(`script at ${url} is larger than ${MAX_SCRIPT_BYTES} bytes`);
    return text;
  }
  const path = str(source.path) ?? str(source.file);
  if (!path) throw new ToolConfigError('script needs path (a file under WORKER_SCRIPT_ROOT) or url');
  if (!root) throw new ToolConfigError(`script path '${path}': the worker has no WORKER_SCRIPT_ROOT, so it reads no script files`);
  const base = resolve(root);
  const full = resolve(base, path);
  const rel = relative(base, full);
  if (rel.startsWith('..') || isAbsolute(rel)) throw new ToolConfigError(`script path '${path}' is outside WORKER_SCRIPT_ROOT`);
  try {
    const text = await readFile(full, 'utf8');
    if (Buffer.byteLength(text) > MAX_SCRIPT_BYTES) throw new ToolConfigError(`script '${path}' is larger than ${MAX_SCRIPT_BYTES} bytes`);
    return text;
  } catch (err) {
    if (err instanceof ToolConfigError) throw err;
    throw new ToolConfigError(`script '${path}' cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}
