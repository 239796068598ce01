/**
 * Rendering a step's templates for the engine. Every failure becomes a `StepError` naming the
 * field (`tool.endpoint`, `case[0].then[1].next[0].args`), because the author reads the step's
 * error to find the broken template; `Builder.guard` turns it into `step_failed`.
 */
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { deferKeychain, evalCondition, renderValue } from '../../playbook/template/index.js';

/** A failure of the current step (render error, unhandled call error, exhausted retries). */
export class StepError extends Error {
  constructor(readonly error: JsonObject) {
    super(String(error.message));
  }
}

/** A failure no step can handle (a structural next's args): the execution fails. */
export class ExecutionError extends Error {
  constructor(readonly error: JsonObject) {
    super(String(error.message));
  }
}

export function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A condition; a syntax error or a refused access fails the step, naming the field. */
export function cond(expr: string, ctx: object, field: string): boolean {
  try {
    return evalCondition(expr, ctx);
  } catch (e) {
    throw new StepError({ message: `Invalid condition in ${field}: ${errMsg(e)}`, field });
  }
}

export function render(value: Json | undefined, ctx: object, field: string): Json {
  try {
    return renderValue(value, ctx, { field, defer: deferKeychain });
  } catch (e) {
    const f = (e as { field?: string }).field || field;
    throw new StepError({ message: `Failed to render ${f}: ${errMsg(e)}`, field: f });
  }
}

/**
 * `from` of collect and result is an expression: a bare one (`response.data.items`, as the
 * reference writes it) or a `{{ }}` template, both giving the native value. Anything that is not
 * a string (a literal list or mapping) renders like any other value.
 */
export function renderFrom(from: Json, ctx: object, field: string): Json {
  if (typeof from === 'string' && !/\{\{|\{%/.test(from) && from.trim()) return render(`{{ ${from.trim()} }}`, ctx, field);
  return render(from, ctx, field);
}

/** Renders a tool config field by field so an error names the field (`tool.endpoint`). */
export function renderTool(tool: Tool, ctx: object, field = 'tool'): Tool {
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(tool)) {
    if (v === undefined) continue;
    out[k] = k === 'kind' ? v : render(v, ctx, `${field}.${k}`);
  }
  return out as Tool;
}
