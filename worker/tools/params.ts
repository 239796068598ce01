/** Parameter lookup for the legacy kinds, whose parameters may sit on the tool, in tool.args/with, or in the step's args. */
import type { Json, Tool } from '../../playbook/types.js';
import { isObject } from './json.js';
import { ToolConfigError, type ToolContext } from './types.js';

export function param(tool: Tool, ctx: ToolContext, name: string): Json | undefined {
  if (tool[name] !== undefined) return tool[name];
  for (const holder of [tool.args, tool.with, tool.params]) if (isObject(holder) && holder[name] !== undefined) return holder[name];
  return ctx.args[name];
}

export function required(tool: Tool, ctx: ToolContext, name: string, what: string): Json {
  const v = param(tool, ctx, name);
  if (v === undefined || v === null || v === '') throw new ToolConfigError(`${what} needs ${name}`);
  return v;
}

/** The legacy operation: `operation` (with or without the `kind.` prefix), else the default. */
export function operation(tool: Tool, prefixes: string[], def: string): string {
  let op = typeof tool.operation === 'string' ? tool.operation : typeof tool.action === 'string' ? tool.action : def;
  for (const p of prefixes) if (op.toLowerCase().startsWith(`${p}.`)) op = op.slice(p.length + 1);
  return op.toLowerCase();
}
