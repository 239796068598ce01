/**
 * Templating API (Jinja2-compatible, on nunjucks, sandboxed). The engine, the server's render
 * endpoint and the worker use these functions; the implementation lives beside this file:
 *   engine.ts   compilation with Playflow's runtime, LRU cache of compiled templates
 *   sandbox.ts  refused names, own-property-only member access
 *   python.ts   Python semantics (truthiness, ==, in, arithmetic) and Python-style methods
 *   filters.ts  Jinja filters and tests
 *   context.ts  buildContext (the spec's "Template context") and result views
 *
 * Rules (DESIGN §5):
 * - a string that is exactly one `{{ expr }}` (surrounding whitespace allowed) renders to the
 *   expression's native value: list, dict, number, boolean, null;
 * - any other string interpolates: strings as is, numbers and booleans in JSON spelling
 *   (`true`), null as '', lists and dicts as JSON;
 * - undefined is strict in rendering: a whole-expression template whose value is undefined, and an
 *   interpolated `{{ … }}` whose value is undefined, throw TemplateError naming the variable and
 *   the field (Jinja's StrictUndefined), and so do arithmetic, `~`, filters (but `default`) and
 *   `{% for %}` applied to undefined. Undefined may still be tested and defaulted:
 *   `x is defined`, `x | default(1)`, `x.y if x is defined else 0`, `{% if x %}` never throw; a
 *   missing attribute of a missing object is simply undefined until it is used;
 * - conditions (`evalCondition`) treat undefined — and any error caused by a missing or
 *   mistyped value, e.g. `missing > 1` or `'a' in missing` — as false. Syntax errors and sandbox
 *   violations are not hidden: they throw TemplateError (a playbook bug, not a data condition);
 * - untrusted templates cannot reach JavaScript internals (see sandbox.ts): refused names throw
 *   TemplateError with kind 'security', in rendering and in conditions alike; loops are bounded
 *   per render, `range` and repeats are bounded, and there are no regex filters (CPU safety);
 * - every render has budgets (budget.ts): output length, intermediate string and list sizes,
 *   nesting, evaluation steps and time; every filter is bounded (no quadratic unique/groupby).
 *   Over budget → TemplateError kind 'budget' (also from conditions: it fails the step);
 * - Jinja/Python spellings differ from JavaScript where it matters and Python wins: `[]` and
 *   `{}` are false, `==` is deep and does not coerce, `'a' + 1` is an error (`~` concatenates),
 *   `s.replace(a, b)` replaces all, `s.split()` splits on whitespace. None prints as '' in
 *   interpolation (not 'None') and booleans as `true`/`false`: rendered text feeds URLs, SQL and
 *   JSON, not Python.
 *
 * Compiled templates are cached (bounded LRU keyed by the template string); one environment
 * serves the whole process.
 */
import type { Json } from '../types.js';
import { SecurityError, UndefinedValueError } from './sandbox.js';
import { BudgetError, measure, templateLimits } from './budget.js';
import { TemplateSyntaxError, compileExpression, compileTemplate, run, takeMissing, type Compiled } from './engine.js';
import { isSafeString, truthy } from './python.js';

export { buildContext, resultView, isHttpEnvelope, type ContextParts, type TemplateContext } from './context.js';
export { addFilter, cacheSize, clearCache, cacheStats, setCacheLimit } from './engine.js';
export { DENIED_NAMES } from './sandbox.js';
export { BudgetError, DEFAULT_TEMPLATE_LIMITS, setTemplateLimits, templateLimits, type TemplateLimits } from './budget.js';

export type TemplateErrorKind = 'undefined' | 'syntax' | 'security' | 'type' | 'budget';

export class TemplateError extends Error {
  /** What went wrong: a missing value, a template that does not parse, a refused access, a bad operation. */
  readonly kind: TemplateErrorKind;
  /** The template text that failed. */
  readonly template?: string;
  constructor(
    message: string,
    readonly field?: string,
    readonly variable?: string,
    extra: { kind?: TemplateErrorKind; template?: string } = {},
  ) {
    super(message);
    this.name = 'TemplateError';
    this.kind = extra.kind ?? 'undefined';
    this.template = extra.template;
  }
}

export interface RenderOptions {
  /** Dot path of the field being rendered, used in error messages (e.g. `tool.endpoint`). */
  field?: string;
  /** A string for which this returns true is left as written (e.g. secret references). */
  defer?: (template: string) => boolean;
}

const TEMPLATE_MARK = /\{\{|\{%|\{#/;

function isTemplate(s: string): boolean {
  return TEMPLATE_MARK.test(s);
}

function quote(template: string): string {
  const t = template.length > 200 ? `${template.slice(0, 197)}...` : template;
  return `'${t}'`;
}

/** Converts any failure to TemplateError with the field and variable; passes TemplateError through. */
function toTemplateError(e: unknown, template: string, field: string | undefined): TemplateError {
  if (e instanceof TemplateError) return e;
  const where = `${quote(template)}${field ? ` in ${field}` : ''}`;
  if (e instanceof SecurityError) {
    return new TemplateError(`${where}: ${e.message}`, field, e.attribute, { kind: 'security', template });
  }
  if (e instanceof BudgetError) {
    return new TemplateError(`${where}: ${e.message} (PLAYFLOW_TEMPLATE_* limits, see README)`, field, undefined, { kind: 'budget', template });
  }
  if (e instanceof TemplateSyntaxError) {
    return new TemplateError(`${where}: template syntax error: ${e.message}`, field, undefined, { kind: 'syntax', template });
  }
  if (e instanceof UndefinedValueError) {
    const kind: TemplateErrorKind = e.variable !== undefined ? 'undefined' : 'type';
    return new TemplateError(`${where}: ${e.message}`, field, e.variable || undefined, { kind, template });
  }
  const msg = e instanceof Error ? e.message : String(e);
  return new TemplateError(`${where}: ${msg}`, field, undefined, { kind: 'type', template });
}

/**
 * Native value → JSON value: SafeString → string, undefined members dropped (null in lists),
 * NaN/Infinity → null, result views → their enumerable body. The result never shares
 * structure with the context, so callers may keep or mutate it.
 */
function toJson(v: unknown, template: string, field: string | undefined): Json {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v === 'function') {
    throw new TemplateError(`${quote(template)}${field ? ` in ${field}` : ''}: a function is not a value (call it?)`, field, undefined, { kind: 'type', template });
  }
  if (isSafeString(v)) return String(v);
  if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : toJson(x, template, field)));
  if (v instanceof Map) return toJson(Object.fromEntries(v), template, field);
  if (typeof v === 'object') {
    const out: { [k: string]: Json } = {};
    for (const k of Object.keys(v)) {
      const x = (v as Record<string, unknown>)[k];
      if (x !== undefined && typeof x !== 'function') out[k] = toJson(x, template, field);
    }
    return out;
  }
  return String(v);
}

function compile(template: string, field: string | undefined): Compiled {
  try {
    return compileTemplate(template);
  } catch (e) {
    throw toTemplateError(e, template, field);
  }
}

/** Renders a value recursively; a string that is exactly one `{{ expr }}` gives the native value. */
export function renderValue(value: Json | undefined, ctx: object, opts: RenderOptions = {}): Json {
  return renderRec(value, ctx, opts.field, opts.defer);
}

function renderRec(value: Json | undefined, ctx: object, field: string | undefined, defer: RenderOptions['defer']): Json {
  if (typeof value === 'string') return renderString(value, ctx, { field, defer });
  if (Array.isArray(value)) {
    const out: Json[] = new Array(value.length);
    for (let i = 0; i < value.length; i++) out[i] = renderRec(value[i], ctx, `${field ?? ''}[${i}]`, defer);
    return out;
  }
  if (value && typeof value === 'object') {
    const out: { [k: string]: Json } = {};
    for (const k of Object.keys(value)) out[k] = renderRec(value[k], ctx, field ? `${field}.${k}` : k, defer);
    return out;
  }
  return value ?? null;
}

export function renderString(template: string, ctx: object, opts: RenderOptions = {}): Json {
  if (!isTemplate(template)) return template;
  if (opts.defer?.(template)) return template;
  const compiled = compile(template, opts.field);
  let v: unknown;
  try {
    v = run(compiled, ctx);
  } catch (e) {
    throw toTemplateError(e, template, opts.field);
  }
  if (compiled.kind === 'template') {
    const text = v as string;
    const max = templateLimits().maxOutput;
    if (text.length > max) throw toTemplateError(new BudgetError('maxOutput', `template over budget: output of ${text.length} characters (limit ${max})`), template, opts.field);
    return text;
  }
  if (v === undefined) {
    const m = takeMissing();
    const message = m?.message ?? `'${template.trim().replace(/^\{\{\s*|\s*\}\}$/g, '')}' is undefined`;
    throw toTemplateError(new UndefinedValueError(message, m?.variable ?? ''), template, opts.field);
  }
  try {
    // the value becomes JSON (events, commands): bounded like any output
    measure(v, 'rendered value');
  } catch (e) {
    throw toTemplateError(e, template, opts.field);
  }
  return toJson(v, template, opts.field);
}

/**
 * Evaluates a bare expression (`a.b > 1`, as written in `when:`) or a `{{ … }}` template to its
 * native value. An undefined result is returned as undefined (not an error); other failures
 * throw TemplateError. A string with text around its `{{ }}` renders to a string.
 */
export function evalExpression(expr: string, ctx: object): unknown {
  const src = String(expr);
  let compiled: Compiled;
  try {
    compiled = isTemplate(src) ? compileTemplate(src) : compileExpression(src);
  } catch (e) {
    throw toTemplateError(e, src, undefined);
  }
  try {
    const v = run(compiled, ctx);
    return isSafeString(v) ? String(v) : v;
  } catch (e) {
    throw toTemplateError(e, src, undefined);
  }
}

/**
 * Conditions: Python truthiness (`[]`, `{}`, `''`, 0, none are false); undefined values and
 * errors caused by missing or mistyped data are false. Syntax errors and sandbox violations
 * throw TemplateError (kind 'syntax' / 'security'). A boolean is accepted as is (YAML `when: true`).
 */
export function evalCondition(expr: string, ctx: object): boolean {
  if (typeof expr !== 'string') return truthy(expr);
  try {
    const v = evalExpression(expr, ctx);
    // A template with text around its tags renders to text, where types are lost:
    // "false", "none", "null", "0" and blank text read as false.
    if (typeof v === 'string' && !isWholeOrBare(expr)) return !/^\s*(false|none|null|0|)\s*$/i.test(v);
    return truthy(v);
  } catch (e) {
    if (e instanceof TemplateError && (e.kind === 'syntax' || e.kind === 'security' || e.kind === 'budget')) throw e;
    return false;
  }
}

function isWholeOrBare(expr: string): boolean {
  if (!isTemplate(expr)) return true;
  try {
    return compileTemplate(expr).kind === 'expr';
  } catch {
    return true;
  }
}

/**
 * Checks that a template (or, with `expression: true`, a bare `when:` expression) compiles and
 * uses nothing the sandbox refuses, without rendering. Returns the problem, or undefined.
 * For playbook validation.
 */
export function checkTemplate(template: string, opts: { expression?: boolean; field?: string } = {}): TemplateError | undefined {
  try {
    if (opts.expression && !isTemplate(template)) compileExpression(template);
    else if (isTemplate(template)) compileTemplate(template);
    return undefined;
  } catch (e) {
    return toTemplateError(e, template, opts.field);
  }
}

/**
 * True when the template refers to the top-level name `name` (e.g. `keychain`), for `defer`:
 * `renderValue(tool, ctx, { defer: (t) => referencesName(t, 'keychain') })`.
 */
export function referencesName(template: string, name: string): boolean {
  if (!template.includes(name) || !isTemplate(template)) return false;
  let cache = refCache.get(name);
  if (!cache) {
    cache = new Map();
    refCache.set(name, cache);
  }
  const hit = cache.get(template);
  if (hit !== undefined) return hit;
  let re = nameRes.get(name);
  if (!re) {
    re = new RegExp(`(^|[^\\w.'"])${name.replace(/[^\w]/g, '')}\\b`);
    nameRes.set(name, re);
  }
  // Only the expression parts count: text outside {{ }} / {% %} and string literals are not references.
  const parts = template.match(/\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\}/g) ?? [];
  const r = re;
  const found = parts.some((p) => r.test(p.replace(/'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"/g, '""')));
  if (cache.size >= 10_000) cache.clear();
  cache.set(template, found);
  return found;
}

const nameRes = new Map<string, RegExp>();
const refCache = new Map<string, Map<string, boolean>>();

/** `defer` predicate for the engine: leaves `keychain.*` references for the worker. */
export const deferKeychain = (template: string): boolean => referencesName(template, 'keychain');
