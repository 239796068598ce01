/**
 * Templating API (Jinja2-compatible, on nunjucks). FIRST CUT, to be hardened by the template
 * work: sandboxing, Jinja filters and methods, the undefined rules and the context builder.
 * The exported names and signatures below are the contract the engine and worker use.
 */
import nunjucks from 'nunjucks';
import type { Json } from '../types.js';

export class TemplateError extends Error {
  constructor(
    message: string,
    readonly field?: string,
    readonly variable?: string,
  ) {
    super(message);
    this.name = 'TemplateError';
  }
}

export interface RenderOptions {
  /** Dot path of the field being rendered, used in error messages (e.g. `tool.endpoint`). */
  field?: string;
  /** A string for which this returns true is left as written (e.g. secret references). */
  defer?: (template: string) => boolean;
}

const env = new nunjucks.Environment(null, { autoescape: false, throwOnUndefined: false });
const WHOLE = /^\s*\{\{([\s\S]*?)\}\}\s*$/;

/** Renders a value recursively; a string that is exactly one `{{ expr }}` gives the native value. */
export function renderValue(value: Json | undefined, ctx: object, opts: RenderOptions = {}): Json {
  if (typeof value === 'string') return renderString(value, ctx, opts);
  if (Array.isArray(value)) return value.map((v, i) => renderValue(v, ctx, { ...opts, field: `${opts.field ?? ''}[${i}]` }));
  if (value && typeof value === 'object') {
    const out: { [k: string]: Json } = {};
    for (const [k, v] of Object.entries(value)) out[k] = renderValue(v, ctx, { ...opts, field: opts.field ? `${opts.field}.${k}` : k });
    return out;
  }
  return value ?? null;
}

export function renderString(template: string, ctx: object, opts: RenderOptions = {}): Json {
  if (!template.includes('{{') && !template.includes('{%')) return template;
  if (opts.defer?.(template)) return template;
  const whole = WHOLE.exec(template);
  if (whole && !whole[1].includes('}}')) {
    const v = evalExpression(whole[1], ctx);
    if (v === undefined) throw new TemplateError(`'${whole[1].trim()}' is undefined in ${opts.field ?? 'template'}`, opts.field, whole[1].trim());
    return v as Json;
  }
  return env.renderString(template, ctx as Record<string, unknown>);
}

/** Evaluates a bare expression (`a.b > 1`) or a `{{ … }}` template to its native value. */
export function evalExpression(expr: string, ctx: object): unknown {
  const m = WHOLE.exec(expr);
  const body = m ? m[1] : expr;
  let out: unknown;
  env.renderString(`{{ __capture(${body}) }}`, { ...(ctx as object), __capture: (v: unknown) => { out = v; return ''; } });
  return out;
}

/** Conditions treat undefined (and render errors on missing names) as false. */
export function evalCondition(expr: string, ctx: object): boolean {
  try {
    return Boolean(evalExpression(expr, ctx));
  } catch {
    return false;
  }
}
