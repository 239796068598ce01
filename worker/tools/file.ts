/**
 * Legacy `file` kind: operation read | write | append | delete (`file.` prefix accepted).
 * Parameters: path*, data* (write/append), format (json, yaml, csv, text; default from the
 * extension, else text), encoding (default utf-8), mode (w | a, default w; `a` = append).
 * When the worker is configured with a file root (`configureFile({root})`, env
 * WORKER_FILE_ROOT), paths are resolved inside it and may not escape it.
 *
 * Responses: read → `{path, format, data}` (csv → list of objects, json/yaml → the parsed
 * value); write/append → `{path, format, bytes, mode}`; delete → `{path, deleted}` (false when
 * there was no file). Append to json/yaml extends a list (the file must hold one, or not exist);
 * append to csv writes the header only when the file is new or empty.
 */
import { promises as fs } from 'node:fs';
import { dirname, extname, isAbsolute, relative, resolve } from 'node:path';
import type { Json, Tool } from '../../playbook/types.js';
import { isWorkerPrivatePath } from '../private.js';
import { parseCsv, toCsv } from './csv.js';
import { operation, param, required } from './params.js';
import { ToolConfigError, fail, ok, type ToolContext, type ToolOutcome } from './types.js';

let root: string | undefined = process.env.WORKER_FILE_ROOT || undefined;
export function configureFile(opts: { root?: string }): void {
  root = opts.root;
}

type Format = 'json' | 'yaml' | 'csv' | 'text';

export function resolvePath(p: string): string {
  const base = root ? resolve(root) : undefined;
  const full = base ? resolve(base, isAbsolute(p) ? `.${p}` : p) : resolve(p);
  if (base) {
    const rel = relative(base, full);
    if (rel.startsWith('..') || isAbsolute(rel)) throw new ToolConfigError(`path ${p} is outside the worker's file root`);
  }
  if (isWorkerPrivatePath(full)) throw new ToolConfigError(`path ${p} is one of the worker's process files or its service-account token, which a playbook cannot read or write`);
  return full;
}

function formatOf(v: Json | undefined, path: string): Format {
  if (typeof v === 'string' && v) {
    const f = v.toLowerCase();
    if (f === 'yml') return 'yaml';
    if (f === 'txt') return 'text';
    if (f === 'json' || f === 'yaml' || f === 'csv' || f === 'text') return f;
    throw new ToolConfigError(`file format must be json, yaml, csv or text, got ${v}`);
  }
  const ext = extname(path).toLowerCase();
  return ext === '.json' ? 'json' : ext === '.yaml' || ext === '.yml' ? 'yaml' : ext === '.csv' ? 'csv' : 'text';
}

function encodingOf(v: Json | undefined): BufferEncoding {
  const e = (typeof v === 'string' && v ? v : 'utf-8').toLowerCase().replace(/_/g, '-');
  const map: Record<string, BufferEncoding> = {
    'utf-8': 'utf8', utf8: 'utf8', ascii: 'ascii', 'us-ascii': 'ascii', latin1: 'latin1', 'latin-1': 'latin1',
    'iso-8859-1': 'latin1', 'utf-16le': 'utf16le', utf16le: 'utf16le', 'utf-16': 'utf16le', base64: 'base64', hex: 'hex',
  };
  const enc = map[e];
  if (!enc) throw new ToolConfigError(`unsupported encoding ${v}`);
  return enc;
}

/** The YAML library, for the steps that read or write YAML (a worker that runs none does not load it). */
const yaml = async () => (await import('yaml')).default;

async function parse(text: string, format: Format): Promise<Json> {
  switch (format) {
    case 'json':
      return text.trim() ? (JSON.parse(text) as Json) : null;
    case 'yaml': {
      const docs = (await yaml()).parseAllDocuments(text);
      for (const d of docs) if (d.errors.length) throw new Error(d.errors[0].message);
      const values = docs.map((d) => d.toJS() as Json);
      return values.length === 0 ? null : values.length === 1 ? values[0] : values;
    }
    case 'csv':
      return parseCsv(text);
    default:
      return text;
  }
}

async function serialise(data: Json, format: Format, withHeader = true): Promise<string> {
  switch (format) {
    case 'json':
      return `${JSON.stringify(data, null, 2)}\n`;
    case 'yaml':
      return (await yaml()).stringify(data);
    case 'csv':
      if (!Array.isArray(data)) throw new ToolConfigError('csv data must be a list of objects or of rows');
      return toCsv(data, withHeader);
    default:
      return typeof data === 'string' ? data : JSON.stringify(data);
  }
}

async function readIfExists(path: string, enc: BufferEncoding): Promise<string | null> {
  try {
    return await fs.readFile(path, enc);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

export async function runFile(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  let op = operation(tool, ['file'], 'read');
  const rawPath = required(tool, ctx, 'path', `file.${op}`);
  if (typeof rawPath !== 'string') throw new ToolConfigError('file path must be a string');
  const path = resolvePath(rawPath);
  const format = formatOf(param(tool, ctx, 'format'), path);
  const enc = encodingOf(param(tool, ctx, 'encoding'));
  const mode = String(param(tool, ctx, 'mode') ?? 'w').toLowerCase();
  if (op === 'write' && (mode === 'a' || mode === 'append')) op = 'append';
  else if (op === 'write' && mode !== 'w' && mode !== 'write') throw new ToolConfigError(`file mode must be w or a, got ${mode}`);
  try {
    switch (op) {
      case 'read': {
        const text = await fs.readFile(path, enc);
        return ok({ path: rawPath, format, data: await parse(text, format) });
      }
      case 'write': {
        const data = required(tool, ctx, 'data', 'file.write');
        const text = await serialise(data, format);
        await fs.mkdir(dirname(path), { recursive: true });
        await fs.writeFile(path, text, enc);
        return ok({ path: rawPath, format, bytes: Buffer.byteLength(text, enc), mode: 'w' });
      }
      case 'append': {
        const data = required(tool, ctx, 'data', 'file.append');
        await fs.mkdir(dirname(path), { recursive: true });
        let text: string;
        if (format === 'json' || format === 'yaml') {
          const existing = await readIfExists(path, enc);
          const current = existing === null || !existing.trim() ? [] : await parse(existing, format);
          if (!Array.isArray(current)) throw new ToolConfigError(`cannot append to ${rawPath}: it does not hold a list`);
          text = await serialise([...current, ...(Array.isArray(data) ? data : [data])], format);
          await fs.writeFile(path, text, enc);
        } else {
          const existing = format === 'csv' ? await readIfExists(path, enc) : null;
          text = await serialise(format === 'csv' && !Array.isArray(data) ? [data] : data, format, !existing?.trim());
          await fs.appendFile(path, text, enc);
        }
        return ok({ path: rawPath, format, bytes: Buffer.byteLength(text, enc), mode: 'a' });
      }
      case 'delete': {
        try {
          await fs.unlink(path);
          return ok({ path: rawPath, deleted: true });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') return ok({ path: rawPath, deleted: false });
          throw err;
        }
      }
      default:
        throw new ToolConfigError(`unknown file operation ${op} (read, write, append, delete)`);
    }
  } catch (err) {
    if (err instanceof ToolConfigError) throw err;
    const e = err as NodeJS.ErrnoException;
    return fail(`file.${op} ${rawPath}: ${e.message}`, { code: e.code === 'ENOENT' ? 'not_found' : e.code ? 'io_error' : 'parse_error' });
  }
}
