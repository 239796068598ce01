/**
 * Budgets of one render. Templates come from playbooks and run in the server's event loop, so
 * every render is bounded: the length of its output and of every intermediate string, the items
 * of every intermediate list, the nesting of values it serialises or flattens, and its evaluation
 * steps (calls, filters, loop iterations, items and characters a filter handles) and wall-clock
 * time. Filters charge their work before doing it, so an over-budget render stops before the
 * expensive part and fails its step with a BudgetError naming the limit.
 *
 * Defaults are far above what a real playbook needs; the server reads them from
 * PLAYFLOW_TEMPLATE_* (server/config.ts) and sets them with `setTemplateLimits`.
 */

export interface TemplateLimits {
  /** Characters of one rendered string. */
  maxOutput: number;
  /** Characters of any intermediate string (`*`, `~`, replace, indent, join, tojson…). */
  maxString: number;
  /** Items of any intermediate list, and values visited when serialising or flattening one. */
  maxItems: number;
  /** Nesting depth of a value serialised (tojson, interpolation) or flattened. */
  maxDepth: number;
  /** Evaluation steps of one render: calls, filters, loop iterations, items and characters handled. */
  maxSteps: number;
  /** Wall-clock milliseconds of one render. */
  maxMs: number;
}

export const DEFAULT_TEMPLATE_LIMITS: Readonly<TemplateLimits> = Object.freeze({
  maxOutput: 10_000_000,
  maxString: 10_000_000,
  maxItems: 1_000_000,
  maxDepth: 256,
  maxSteps: 50_000_000,
  maxMs: 1_000,
});

/** A render went over one of its budgets (TemplateError kind 'budget'). */
export class BudgetError extends Error {
  constructor(readonly limit: keyof TemplateLimits, message: string) {
    super(message);
    this.name = 'BudgetError';
  }
}

const CLOCK_AFTER_STEPS = 10_000;

let limits: TemplateLimits = { ...DEFAULT_TEMPLATE_LIMITS };
let steps = 0;
let deadline = Number.POSITIVE_INFINITY;

export function templateLimits(): Readonly<TemplateLimits> {
  return limits;
}

/** Sets some limits (the others keep their value); `setTemplateLimits()` restores the defaults. */
export function setTemplateLimits(partial?: Partial<TemplateLimits>): void {
  if (!partial) {
    limits = { ...DEFAULT_TEMPLATE_LIMITS };
    return;
  }
  for (const [k, v] of Object.entries(partial)) {
    if (v === undefined) continue;
    if (!(k in DEFAULT_TEMPLATE_LIMITS) || typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
      throw new RangeError(`template limit ${k} must be a positive number, got ${String(v)}`);
    }
  }
  limits = { ...limits, ...Object.fromEntries(Object.entries(partial).filter(([, v]) => v !== undefined)) };
}

/** Starts the budget of one render (renders do not nest: templates cannot render templates). */
export function startRender(): void {
  steps = 0;
  deadline = performance.now() + limits.maxMs;
}

/** Charges `n` steps of work about to be done; throws when the render is over budget. */
export function charge(n = 1): void {
  steps += n;
  if (steps > limits.maxSteps) throw new BudgetError('maxSteps', `template over budget: exceeded ${limits.maxSteps} evaluation steps`);
  // the clock is read only once a render does real work, so a descheduled process never fails a small render
  if (steps > CLOCK_AFTER_STEPS && performance.now() > deadline) throw new BudgetError('maxMs', `template over budget: rendering exceeded ${limits.maxMs} ms`);
}

/** A string of `length` characters about to be built: within maxString (and charged). */
export function checkString(length: number, what = 'string'): void {
  if (length > limits.maxString) throw new BudgetError('maxString', `template over budget: ${what} of ${length} characters (limit ${limits.maxString})`);
  charge(length >>> 6);
}

/** A list of `count` items about to be built: within maxItems (and charged). */
export function checkItems(count: number, what = 'list'): void {
  if (count > limits.maxItems) throw new BudgetError('maxItems', `template over budget: ${what} of ${count} items (limit ${limits.maxItems})`);
  charge(count);
}

/**
 * Walks a value before it is serialised or copied: counts the values visited (shared
 * sub-lists count every time they appear, as JSON.stringify would write them), the nesting and
 * the characters of its strings. Throws when any exceeds its limit; returns the size estimate.
 */
export function measure(v: unknown, what = 'value'): number {
  let nodes = 0;
  let chars = 0;
  const visit = (x: unknown, depth: number): void => {
    if (depth > limits.maxDepth) throw new BudgetError('maxDepth', `template over budget: ${what} nested deeper than ${limits.maxDepth}`);
    if (++nodes > limits.maxItems) throw new BudgetError('maxItems', `template over budget: ${what} of more than ${limits.maxItems} values`);
    if (typeof x === 'string') {
      chars += x.length + 2;
      if (chars > limits.maxString) throw new BudgetError('maxString', `template over budget: ${what} of more than ${limits.maxString} characters`);
      return;
    }
    if (x === null || typeof x !== 'object') {
      chars += 8;
      return;
    }
    if (Array.isArray(x)) {
      for (const y of x) visit(y, depth + 1);
      return;
    }
    if (x instanceof Map || x instanceof Set) {
      for (const y of x.values()) visit(y, depth + 1);
      return;
    }
    for (const k of Object.keys(x)) {
      chars += k.length + 3;
      visit((x as Record<string, unknown>)[k], depth + 1);
    }
  };
  visit(v, 0);
  charge(nodes);
  return chars;
}
