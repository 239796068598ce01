/** Legacy `console` kind (console.print): message* → the call's log and the response `{message}`. */
import type { Tool } from '../../playbook/types.js';
import { str } from './json.js';
import { required } from './params.js';
import { ok, type ToolContext, type ToolOutcome } from './types.js';

export async function runConsole(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const message = str(required(tool, ctx, 'message', 'console.print'))!;
  ctx.logger.info({ execution_id: ctx.execution_id, step: ctx.step, source: 'console.print' }, message);
  return ok({ message }, `${message}\n`);
}
