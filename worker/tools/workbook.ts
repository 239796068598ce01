/**
 * `workbook` kind: runs the task named by the tool's `name` (or `task`) from the playbook's
 * `workbook:` table (ClaimedCommand.workbook). The task's tool config is rendered here (the server
 * sends the table as written) with the command's template context plus `args` = the step's args
 * merged with the tool's `args`/`with`; those args are also merged into the task tool's `args`
 * (so a python task's `main` receives them). Secret references are finished by `ctx.prepareTool`.
 * The response and error are those of the task's tool.
 */
import type { JsonObject, Tool } from '../../playbook/types.js';
import { TOOL_KINDS } from '../../playbook/types.js';
import { deferKeychain, renderValue } from '../../playbook/template/index.js';
import { isObject } from './json.js';
import { ToolConfigError, type ToolContext, type ToolOutcome, type ToolRunner } from './types.js';

export function workbookRunner(runTool: ToolRunner): ToolRunner {
  return async function runWorkbook(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
    const name = tool.name ?? tool.task;
    if (typeof name !== 'string' || !name) throw new ToolConfigError('workbook tool needs name (the workbook task)');
    const table = ctx.workbook ?? [];
    const task = table.find((t) => isObject(t) && t.name === name);
    if (!task) throw new ToolConfigError(`workbook task '${name}' not found (tasks: ${table.map((t) => String(t.name)).join(', ') || 'none'})`);
    if (!isObject(task.tool) || typeof task.tool.kind !== 'string') throw new ToolConfigError(`workbook task '${name}' has no tool`);
    if (task.tool.kind === 'workbook' || task.tool.kind === 'playbook') throw new ToolConfigError(`workbook task '${name}' may not be of kind ${task.tool.kind}`);
    if (!(TOOL_KINDS as readonly string[]).includes(task.tool.kind)) throw new ToolConfigError(`workbook task '${name}' has unknown kind ${task.tool.kind}`);
    if ((ctx.depth ?? 0) > 4) throw new ToolConfigError('workbook tasks nested too deeply');
    for (const f of ['args', 'with'] as const) if (tool[f] !== undefined && tool[f] !== null && !isObject(tool[f])) throw new ToolConfigError(`workbook ${f} must be an object`);
    const args: JsonObject = { ...ctx.args, ...((tool.args as JsonObject) ?? {}), ...((tool.with as JsonObject) ?? {}) };
    const tctx = { ...(ctx.template ?? {}), execution_id: ctx.execution_id, args };
    let rendered = renderValue(task.tool, tctx, { field: `workbook.${name}.tool`, defer: deferKeychain }) as JsonObject;
    const taskArgs = isObject(rendered.args) ? rendered.args : {};
    rendered = { ...rendered, args: { ...taskArgs, ...args } };
    let inner = rendered as Tool;
    if (ctx.prepareTool) inner = await ctx.prepareTool(inner);
    return runTool(inner, { ...ctx, args, depth: (ctx.depth ?? 0) + 1 });
  };
}
