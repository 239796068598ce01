/**
 * Legacy `transform` kind: operation map | filter | reduce | merge (`transform.` prefix accepted).
 *   map: data* (list), function* — an expression evaluated per item with `item` and `index`
 *   filter: data*, condition* — keeps items whose expression is truthy
 *   reduce: data*, function* (with `acc`, `item`, `index`), initial (default null)
 *   merge: objects* — a list of objects merged left to right (shallow; later keys win)
 * Expressions are Jinja expressions (`item.price * 2` or `{{ item.price * 2 }}`) evaluated by the
 * playbook template engine — never JavaScript. The template context (workload, vars, args) is
 * visible too. Response: the resulting list / value / object.
 */
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { evalCondition, evalExpression } from '../../playbook/template/index.js';
import { isObject, toJson } from './json.js';
import { operation, param, required } from './params.js';
import { ToolConfigError, fail, ok, type ToolContext, type ToolOutcome } from './types.js';

function list(v: Json, op: string): Json[] {
  if (Array.isArray(v)) return v;
  if (isObject(v)) return Object.values(v);
  throw new ToolConfigError(`transform.${op} data must be a list`);
}

export async function runTransform(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const op = operation(tool, ['transform'], String(tool.type ?? 'map'));
  const base = { ...(ctx.template ?? {}), args: ctx.args, execution_id: ctx.execution_id };
  const expr = (name: string): string => {
    const e = required(tool, ctx, name, `transform.${op}`);
    if (typeof e !== 'string') throw new ToolConfigError(`transform.${op} ${name} must be an expression string`);
    return e;
  };
  try {
    switch (op) {
      case 'map': {
        const f = expr('function');
        return ok(list(required(tool, ctx, 'data', 'transform.map'), op).map((item, index) => toJson(evalExpression(f, { ...base, item, index }))));
      }
      case 'filter': {
        const c = expr('condition');
        return ok(list(required(tool, ctx, 'data', 'transform.filter'), op).filter((item, index) => evalCondition(c, { ...base, item, index })));
      }
      case 'reduce': {
        const f = expr('function');
        let acc: Json = param(tool, ctx, 'initial') ?? null;
        list(required(tool, ctx, 'data', 'transform.reduce'), op).forEach((item, index) => {
          acc = toJson(evalExpression(f, { ...base, acc, item, index }));
        });
        return ok(acc);
      }
      case 'merge': {
        const objects = required(tool, ctx, 'objects', 'transform.merge');
        if (!Array.isArray(objects)) throw new ToolConfigError('transform.merge objects must be a list of objects');
        const out: JsonObject = {};
        for (const o of objects) {
          if (o === null) continue;
          if (!isObject(o)) throw new ToolConfigError('transform.merge objects must be a list of objects');
          Object.assign(out, o);
        }
        return ok(out);
      }
      default:
        throw new ToolConfigError(`unknown transform operation ${op} (map, filter, reduce, merge)`);
    }
  } catch (err) {
    if (err instanceof ToolConfigError) throw err;
    return fail(`transform.${op}: ${(err as Error).message}`, { code: 'transform_error' });
  }
}
