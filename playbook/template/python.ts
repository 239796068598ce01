/**
 * Python/Jinja2 value semantics on JavaScript values: truthiness, equality, `in`, string
 * conversion, arithmetic, and the Python-style methods playbooks call on values
 * (`d.get('k', 0)`, `d.items()`, `s.split(',')`, `s.startswith('x')`…).
 */
import nunjucks from 'nunjucks';
import { SecurityError, UndefinedValueError, checkName, ownLookup } from './sandbox.js';
import { BudgetError, charge, checkItems, checkString, measure, templateLimits } from './budget.js';

const hasOwn = Object.prototype.hasOwnProperty;

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Map);
}

/** Own enumerable keys; for a context or view built with prototypes, the merged keys. */
export function keysOf(v: object): string[] {
  return Object.keys(v);
}

/** Python truthiness: empty list, empty dict, '', 0, None and undefined are false. */
export function truthy(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (Array.isArray(v) || typeof v === 'string') return v.length > 0;
  if (typeof v === 'object') {
    if (v instanceof Map || v instanceof Set) return v.size > 0;
    if (isSafeString(v)) return String(v).length > 0;
    return keysOf(v).length > 0;
  }
  return Boolean(v);
}

/** nunjucks' SafeString (produced by `safe` and macros) behaves as its string. */
const SafeString = (nunjucks as unknown as { runtime: { SafeString: new (s: string) => object } }).runtime.SafeString;
export function isSafeString(v: unknown): boolean {
  return v instanceof SafeString;
}

export function unsafe(v: unknown): unknown {
  return isSafeString(v) ? String(v) : v;
}

/** Python `==`: deep for lists and dicts, no string/number coercion (1 == 1.0, True == 1 hold). */
export function pyEq(a: unknown, b: unknown): boolean {
  a = unsafe(a);
  b = unsafe(b);
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  if (typeof a === 'boolean' && typeof b === 'number') return Number(a) === b;
  if (typeof a === 'number' && typeof b === 'boolean') return a === Number(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => pyEq(x, b[i]));
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = keysOf(a);
    const kb = keysOf(b);
    return ka.length === kb.length && ka.every((k) => hasOwn.call(b, k) && pyEq(a[k], b[k]));
  }
  return false;
}

/** Python `in`. An undefined container is an undefined-value error (false in conditions). */
export function pyIn(item: unknown, container: unknown): boolean {
  item = unsafe(item);
  container = unsafe(container);
  if (container === undefined) throw new UndefinedValueError(`'in' needs a list, dict or string on its right, got an undefined value`);
  if (container === null) return false;
  if (typeof container === 'string') return typeof item === 'string' ? container.includes(item) : false;
  if (Array.isArray(container)) return container.some((x) => pyEq(x, item));
  if (container instanceof Map) return container.has(item);
  if (container instanceof Set) return container.has(item);
  if (typeof container === 'object') return typeof item === 'string' || typeof item === 'number' ? ownLookup(container, String(item)).found : false;
  throw new UndefinedValueError(`'in' needs a list, dict or string on its right, got ${typeName(container)}`);
}

export function typeName(v: unknown): string {
  if (v === null) return 'none';
  if (v === undefined) return 'undefined';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'object') return 'dict';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'string') return 'string';
  return typeof v;
}

/**
 * How a value reads inside a larger string: strings as they are, numbers and booleans in
 * JavaScript/JSON spelling (`true`, not Python's `True`), null as the empty string, lists and
 * dicts as JSON (never `[object Object]`).
 */
export function toText(v: unknown): string {
  v = unsafe(v);
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (typeof v === 'function') throw new UndefinedValueError('a function cannot be rendered as text');
  measure(v, 'value rendered as text');
  return JSON.stringify(v, jsonReplacer);
}

/** Joins texts (`join` filter and method) after checking the result's length. */
export function joinTexts(items: unknown[], sep: string): string {
  charge(items.length);
  const parts = items.map(toText);
  let len = sep.length * Math.max(0, parts.length - 1);
  for (const p of parts) len += p.length;
  checkString(len, 'joined string');
  return parts.join(sep);
}

export function jsonReplacer(_k: string, v: unknown): unknown {
  if (isSafeString(v)) return String(v);
  if (v instanceof Map) return Object.fromEntries(v);
  if (v instanceof Set) return [...v];
  return v;
}

function requireDefined(v: unknown, what: string): void {
  if (v === undefined) throw new UndefinedValueError(`${what} of an undefined value`);
}

/** Binary arithmetic with Python semantics where JavaScript differs. */
export function arith(op: string, a: unknown, b: unknown): unknown {
  a = unsafe(a);
  b = unsafe(b);
  requireDefined(a, `'${op}'`);
  requireDefined(b, `'${op}'`);
  switch (op) {
    case '+':
      if (Array.isArray(a) && Array.isArray(b)) {
        checkItems(a.length + b.length, "list '+'");
        return [...a, ...b];
      }
      if (typeof a === 'string' && typeof b === 'string') {
        checkString(a.length + b.length, "string '+'");
        return a + b;
      }
      if (typeof a === 'string' || typeof b === 'string') {
        throw new UndefinedValueError(`cannot add ${typeName(a)} and ${typeName(b)} (use '~' to concatenate)`);
      }
      return num(a) + num(b);
    case '-':
      return num(a) - num(b);
    case '*':
      if (typeof a === 'string' && typeof b === 'number') return a.repeat(bounded(b, a.length, templateLimits().maxString));
      if (Array.isArray(a) && typeof b === 'number') return Array.from({ length: bounded(b, a.length, MAX_ITEMS) }, () => a).flat(1);
      return num(a) * num(b);
    case '/': {
      const d = num(b);
      if (d === 0) throw new UndefinedValueError('division by zero');
      return num(a) / d;
    }
    case '//': {
      const d = num(b);
      if (d === 0) throw new UndefinedValueError('division by zero');
      return Math.floor(num(a) / d);
    }
    case '%':
      if (typeof a === 'string') return percentFormat(a, b);
      {
        const d = num(b);
        if (d === 0) throw new UndefinedValueError('modulo by zero');
        const r = num(a) % d;
        return r !== 0 && Math.sign(r) !== Math.sign(d) ? r + d : r; // Python sign rule
      }
    case '**':
      return Math.pow(num(a), num(b));
    default:
      throw new Error(`unknown operator ${op}`);
  }
}

/** Items of `range()` and of a list repeated with `*` (strings: budget.ts maxString). */
export const MAX_ITEMS = 100_000;

/** A padding width (`center`, `zfill`, `'%20s'`…) that cannot allocate more than maxString. */
export function widthOf(w: unknown): number {
  const n = Math.trunc(Number(w));
  if (!Number.isFinite(n) || n <= 0) return 0;
  const max = templateLimits().maxString;
  if (n > max) throw new BudgetError('maxString', `width too large (over ${max} characters)`);
  charge(n >>> 6);
  return n;
}

function bounded(times: number, unit: number, max: number): number {
  const n = Math.max(0, Math.trunc(times));
  if (n * Math.max(1, unit) > max) throw new BudgetError(max === MAX_ITEMS ? 'maxItems' : 'maxString', `result too large (over ${max} ${max === MAX_ITEMS ? 'items' : 'characters'})`);
  charge((n * Math.max(1, unit)) >>> 6);
  return n;
}

/** Jinja's range(stop) / range(start, stop[, step]), bounded to MAX_ITEMS. */
export function pyRange(...args: unknown[]): number[] {
  const nums = args.map((a) => Math.trunc(Number(a)));
  if (nums.some((n) => !Number.isFinite(n))) throw new UndefinedValueError('range expects integers');
  const [start, stop, step] = nums.length === 1 ? [0, nums[0], 1] : [nums[0], nums[1], nums[2] ?? 1];
  if (step === 0) throw new UndefinedValueError('range step must not be zero');
  const count = Math.max(0, Math.ceil((stop - start) / step));
  if (count > MAX_ITEMS) throw new UndefinedValueError(`range too large (over ${MAX_ITEMS} items)`);
  return Array.from({ length: count }, (_, i) => start + i * step);
}

function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return Number(v);
  throw new UndefinedValueError(`expected a number, got ${typeName(v)}${typeof v === 'string' ? ` '${v}' (use the int or float filter)` : ''}`);
}

export function neg(v: unknown): number {
  requireDefined(v, 'negation');
  return -num(v);
}

export function concat(a: unknown, b: unknown): string {
  requireDefined(a, "'~'");
  requireDefined(b, "'~'");
  const x = toText(a);
  const y = toText(b);
  checkString(x.length + y.length, "'~' result");
  return x + y;
}

export function compare(op: string, a: unknown, b: unknown): boolean {
  switch (op) {
    case '==':
    case '===':
      return pyEq(a, b);
    case '!=':
    case '!==':
      return !pyEq(a, b);
  }
  a = unsafe(a);
  b = unsafe(b);
  if (a === undefined || b === undefined || a === null || b === null) {
    throw new UndefinedValueError(`cannot compare ${typeName(a)} ${op} ${typeName(b)}`);
  }
  const ta = typeof a === 'boolean' ? 'number' : typeof a;
  const tb = typeof b === 'boolean' ? 'number' : typeof b;
  if (ta !== tb && !(Array.isArray(a) && Array.isArray(b))) {
    throw new UndefinedValueError(`cannot compare ${typeName(a)} ${op} ${typeName(b)}`);
  }
  const c = cmp(a, b);
  switch (op) {
    case '<':
      return c < 0;
    case '>':
      return c > 0;
    case '<=':
      return c <= 0;
    case '>=':
      return c >= 0;
    default:
      throw new Error(`unknown comparison ${op}`);
  }
}

/** Ordering used by comparisons, sort, min, max: numbers, strings, lists lexicographically. */
export function cmp(a: unknown, b: unknown): number {
  if (typeof a === 'boolean') a = Number(a);
  if (typeof b === 'boolean') b = Number(b);
  if (a === b) return 0;
  if (a === undefined || a === null) return b === undefined || b === null ? 0 : -1;
  if (b === undefined || b === null) return 1;
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const c = cmp(a[i], b[i]);
      if (c !== 0) return c;
    }
    return a.length - b.length;
  }
  const sa = toText(a);
  const sb = toText(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

/** Python `%` string formatting: `%s`, `%d`, `%i`, `%f`, `%.2f`, `%r`, `%%`, named `%(k)s`. */
export function percentFormat(fmt: string, args: unknown): string {
  const list = Array.isArray(args) ? args : [args];
  let i = 0;
  return fmt.replace(/%(\([^)]*\))?([-+ 0#]*)(\d+)?(?:\.(\d+))?([sdifrx%])/g, (_m, key: string | undefined, flags: string, width: string | undefined, prec: string | undefined, conv: string) => {
    if (conv === '%') return '%';
    let v: unknown;
    if (key) {
      const k = key.slice(1, -1);
      checkName(k);
      v = isPlainObject(args) ? ownLookup(args, k).value : undefined;
    } else v = list[i++];
    if (v === undefined) throw new UndefinedValueError('not enough arguments for format string');
    let s: string;
    if (conv === 'd' || conv === 'i') s = String(Math.trunc(Number(v)));
    else if (conv === 'f') s = Number(v).toFixed(prec === undefined ? 6 : Number(prec));
    else if (conv === 'x') s = Math.trunc(Number(v)).toString(16);
    else if (conv === 'r') s = JSON.stringify(v);
    else s = toText(v);
    if (!width) return s;
    const w = widthOf(width);
    if (flags.includes('-')) return s.padEnd(w);
    if (flags.includes('0') && /[dif]/.test(conv)) return s.startsWith('-') ? '-' + s.slice(1).padStart(w - 1, '0') : s.padStart(w, '0');
    return s.padStart(w);
  });
}

function pyStrip(s: string, chars?: unknown, left = true, right = true): string {
  if (chars === undefined || chars === null) {
    if (left && right) return s.trim();
    return left ? s.trimStart() : s.trimEnd();
  }
  const set = new Set(String(chars));
  let a = 0;
  let b = s.length;
  if (left) while (a < b && set.has(s[a])) a++;
  if (right) while (b > a && set.has(s[b - 1])) b--;
  return s.slice(a, b);
}

function pySplit(s: string, sep?: unknown, maxsplit?: unknown): string[] {
  const max = typeof maxsplit === 'number' && maxsplit >= 0 ? maxsplit : Infinity;
  if (sep === undefined || sep === null) {
    const parts = s.trim().split(/\s+/).filter((p) => p !== '');
    if (max === Infinity || parts.length <= max + 1) return parts;
    // re-split keeping the remainder intact
    const out: string[] = [];
    let rest = s.trimStart();
    for (let n = 0; n < max; n++) {
      const m = /\s+/.exec(rest);
      if (!m) break;
      out.push(rest.slice(0, m.index));
      rest = rest.slice(m.index + m[0].length);
    }
    out.push(rest);
    return out;
  }
  const sp = String(sep);
  if (sp === '') throw new UndefinedValueError('split: empty separator');
  const parts = s.split(sp);
  if (parts.length - 1 <= max) return parts;
  return [...parts.slice(0, max), parts.slice(max).join(sp)];
}

/** Python's str.replace (and Jinja's `replace` filter): all occurrences, or the first `count`. */
export function pyReplace(s: string, old: unknown, rep: unknown, count?: unknown): string {
  const o = toText(old);
  const r = toText(rep);
  charge(s.length >>> 6);
  const parts = s.split(o);
  // the first `count` occurrences (all when count is absent or negative), in one pass
  const n = typeof count !== 'number' || count < 0 ? parts.length - 1 : Math.min(Math.trunc(count), parts.length - 1);
  checkString(s.length + n * (r.length - o.length), 'replace result');
  if (n === parts.length - 1) return parts.join(r);
  return parts.slice(0, n + 1).join(r) + o + parts.slice(n + 1).join(o);
}

function startsOrEnds(s: string, arg: unknown, ends: boolean): boolean {
  const list = Array.isArray(arg) ? arg : [arg];
  return list.some((p) => (ends ? s.endsWith(String(p)) : s.startsWith(String(p))));
}

type Method = (self: never, ...args: unknown[]) => unknown;

const STRING_METHODS: Record<string, (s: string, ...a: any[]) => unknown> = {
  upper: (s) => s.toUpperCase(),
  lower: (s) => s.toLowerCase(),
  strip: (s, c) => pyStrip(s, c),
  lstrip: (s, c) => pyStrip(s, c, true, false),
  rstrip: (s, c) => pyStrip(s, c, false, true),
  split: (s, sep, max) => pySplit(s, sep, max),
  rsplit: (s, sep, max) => {
    if (typeof max !== 'number' || max < 0) return pySplit(s, sep);
    const sp = sep === undefined || sep === null ? ' ' : String(sep);
    const parts = s.split(sp);
    if (parts.length - 1 <= max) return parts;
    return [parts.slice(0, parts.length - max).join(sp), ...parts.slice(parts.length - max)];
  },
  splitlines: (s) => s.split(/\r?\n/).filter((l, i, a) => !(i === a.length - 1 && l === '')),
  startswith: (s, p) => startsOrEnds(s, p, false),
  endswith: (s, p) => startsOrEnds(s, p, true),
  replace: (s, o, r, c) => pyReplace(s, o, r, c),
  join: (s, items) => {
    if (!Array.isArray(items)) throw new UndefinedValueError('join expects a list');
    return joinTexts(items, s);
  },
  capitalize: (s) => (s ? s[0].toUpperCase() + s.slice(1).toLowerCase() : s),
  title: (s) => s.replace(/\w\S*/g, (w) => w[0].toUpperCase() + w.slice(1).toLowerCase()),
  find: (s, sub) => s.indexOf(String(sub)),
  rfind: (s, sub) => s.lastIndexOf(String(sub)),
  index: (s, sub) => {
    const i = s.indexOf(String(sub));
    if (i < 0) throw new UndefinedValueError(`substring '${String(sub)}' not found`);
    return i;
  },
  count: (s, sub) => (String(sub) === '' ? s.length + 1 : s.split(String(sub)).length - 1),
  isdigit: (s) => /^\d+$/.test(s),
  isnumeric: (s) => /^\d+$/.test(s),
  isalpha: (s) => /^[A-Za-z]+$/.test(s),
  isalnum: (s) => /^[A-Za-z0-9]+$/.test(s),
  isspace: (s) => /^\s+$/.test(s),
  islower: (s) => /[a-z]/.test(s) && s === s.toLowerCase(),
  isupper: (s) => /[A-Z]/.test(s) && s === s.toUpperCase(),
  zfill: (s, w) => (s.startsWith('-') ? '-' + s.slice(1).padStart(widthOf(w) - 1, '0') : s.padStart(widthOf(w), '0')),
  center: (s, w, f) => {
    const total = Math.max(0, widthOf(w) - s.length);
    const left = Math.floor(total / 2);
    const fill = f === undefined ? ' ' : String(f);
    return fill.repeat(left) + s + fill.repeat(total - left);
  },
  ljust: (s, w, f) => s.padEnd(widthOf(w), f === undefined ? ' ' : String(f)),
  rjust: (s, w, f) => s.padStart(widthOf(w), f === undefined ? ' ' : String(f)),
  format: (s, ...args) => {
    let i = 0;
    return s.replace(/\{(\w*)\}/g, (_m, k: string) => {
      if (k === '') return toText(args[i++]);
      if (/^\d+$/.test(k)) return toText(args[Number(k)]);
      const kw = args[args.length - 1];
      checkName(k);
      return isPlainObject(kw) ? toText(ownLookup(kw, k).value) : '';
    });
  },
  // JavaScript spellings nunjucks authors use
  toUpperCase: (s) => s.toUpperCase(),
  toLowerCase: (s) => s.toLowerCase(),
  trim: (s) => s.trim(),
  includes: (s, x) => s.includes(String(x)),
  indexOf: (s, x) => s.indexOf(String(x)),
  startsWith: (s, x) => s.startsWith(String(x)),
  endsWith: (s, x) => s.endsWith(String(x)),
  slice: (s, a, b) => s.slice(a, b),
  substring: (s, a, b) => s.substring(a, b),
};

const DICT_METHODS: Record<string, (d: Record<string, unknown>, ...a: any[]) => unknown> = {
  get: (d, k, dflt = null) => {
    checkName(k);
    const r = ownLookup(d, String(k));
    return r.found && r.value !== undefined ? r.value : dflt;
  },
  items: (d) => keysOf(d).map((k) => [k, d[k]]),
  keys: (d) => keysOf(d),
  values: (d) => keysOf(d).map((k) => d[k]),
  copy: (d) => ({ ...d }),
};

const LIST_METHODS: Record<string, (l: unknown[], ...a: any[]) => unknown> = {
  count: (l, x) => l.filter((y) => pyEq(x, y)).length,
  index: (l, x) => {
    const i = l.findIndex((y) => pyEq(x, y));
    if (i < 0) throw new UndefinedValueError(`${toText(x)} is not in list`);
    return i;
  },
  copy: (l) => [...l],
  includes: (l, x) => l.some((y) => pyEq(x, y)),
  indexOf: (l, x) => l.findIndex((y) => pyEq(x, y)),
  slice: (l, a, b) => l.slice(a, b),
  join: (l, sep = ',') => joinTexts(l, String(sep)),
  concat: (l, ...more) => l.concat(...more),
};

const NUMBER_METHODS: Record<string, (n: number, ...a: any[]) => unknown> = {
  toFixed: (n, d) => n.toFixed(d),
  is_integer: (n) => Number.isInteger(n),
};

/**
 * `obj.name(args)`: Python methods of the value's type first (a dict key named `items` does not
 * hide `.items()`), then a function stored as the object's own property (cycler, joiner, macros).
 */
export function callMethod(obj: unknown, name: unknown, args: unknown[]): unknown {
  checkName(name);
  const key = String(name);
  obj = unsafe(obj);
  if (obj === undefined || obj === null) {
    throw new UndefinedValueError(`cannot call '${key}()' on ${obj === null ? 'none' : 'an undefined value'}`);
  }
  const table: Record<string, Method> | undefined =
    typeof obj === 'string'
      ? (STRING_METHODS as Record<string, Method>)
      : Array.isArray(obj)
        ? (LIST_METHODS as Record<string, Method>)
        : typeof obj === 'number'
          ? (NUMBER_METHODS as Record<string, Method>)
          : isPlainObject(obj)
            ? (DICT_METHODS as Record<string, Method>)
            : undefined;
  if (table && hasOwn.call(table, key)) return (table[key] as (...a: unknown[]) => unknown)(obj, ...args);
  if (typeof obj === 'object') {
    const r = ownLookup(obj, key);
    if (r.found && typeof r.value === 'function') return (r.value as (...a: unknown[]) => unknown).apply(obj, args);
  }
  if (typeof obj === 'function') throw new SecurityError(key);
  throw new UndefinedValueError(`${typeName(obj)} has no method '${key}'`);
}

/** Python slicing of lists and strings: `x[a:b:c]` with negative and missing bounds. */
export function pySlice(v: unknown, start: unknown, stop: unknown, step: unknown): unknown {
  v = unsafe(v);
  if (v === undefined) throw new UndefinedValueError('cannot slice an undefined value');
  if (v === null) return null;
  if (typeof v !== 'string' && !Array.isArray(v)) throw new UndefinedValueError(`cannot slice ${typeName(v)}`);
  const len = v.length;
  const st = step === null || step === undefined ? 1 : Number(step);
  if (!Number.isInteger(st) || st === 0) throw new UndefinedValueError('slice step must be a non-zero integer');
  const norm = (x: unknown, dflt: number, lo: number, hi: number): number => {
    if (x === null || x === undefined) return dflt;
    let n = Math.trunc(Number(x));
    if (n < 0) n += len;
    return Math.min(Math.max(n, lo), hi);
  };
  const items = typeof v === 'string' ? [...v] : v;
  const out: unknown[] = [];
  if (st > 0) {
    const a = norm(start, 0, 0, len);
    const b = norm(stop, len, 0, len);
    for (let i = a; i < b; i += st) out.push(items[i]);
  } else {
    const a = norm(start, len - 1, -1, len - 1);
    const b = norm(stop, -1, -1, len - 1);
    for (let i = a; i > b; i += st) out.push(items[i]);
  }
  return typeof v === 'string' ? out.join('') : out;
}
