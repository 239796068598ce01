/**
 * Jinja2 filters and tests, installed on Playflow's own nunjucks environment (never on a global).
 * Every filter that reads attributes by name goes through the sandbox's `getPath`, so
 * `map(attribute='constructor')`, `attr('__proto__')`, `sort(attribute='constructor')` are refused.
 *
 * Deliberately absent: `random` (templates are evaluated deterministically by the server) and
 * regular-expression filters (a pattern from an API caller could backtrack catastrophically and
 * hold the server's event loop). nunjucks' other built-ins are not installed either: this file is
 * the complete list.
 */
import { SecurityError, UndefinedValueError, checkName, getAttr, getPath } from './sandbox.js';
import { BudgetError, charge, checkItems, checkString, measure, templateLimits } from './budget.js';
import { cmp, isPlainObject, joinTexts, jsonReplacer, keysOf, percentFormat, pyEq, pyIn, pyReplace, toText, truthy, typeName, unsafe, widthOf } from './python.js';

type Fn = (...args: any[]) => unknown;

/** nunjucks passes keyword arguments as a trailing object marked `__keywords`. */
function splitKw(args: unknown[]): { pos: unknown[]; kw: Record<string, unknown> } {
  const last = args[args.length - 1];
  if (last && typeof last === 'object' && (last as Record<string, unknown>).__keywords === true) {
    const kw: Record<string, unknown> = {};
    for (const k of Object.keys(last)) if (k !== '__keywords') kw[k] = (last as Record<string, unknown>)[k];
    return { pos: args.slice(0, -1), kw };
  }
  return { pos: args, kw: {} };
}

function asList(v: unknown, filter: string): unknown[] {
  v = unsafe(v);
  if (v === undefined) throw new UndefinedValueError(`filter '${filter}' applied to an undefined value`);
  if (v === null) return [];
  if (Array.isArray(v)) return v;
  if (typeof v === 'string') {
    checkItems(v.length, `filter '${filter}' on a string`);
    return [...v];
  }
  if (v instanceof Set) return [...v];
  if (v instanceof Map) return [...v.keys()];
  if (typeof v === 'object') return keysOf(v);
  throw new UndefinedValueError(`filter '${filter}' expects a list, got ${typeName(v)}`);
}

function requireDefined(v: unknown, filter: string): void {
  if (v === undefined) throw new UndefinedValueError(`filter '${filter}' applied to an undefined value`);
}

function toInt(v: unknown, dflt = 0, base = 10): number {
  v = unsafe(v);
  if (typeof v === 'number') return Number.isFinite(v) ? Math.trunc(v) : dflt;
  if (typeof v === 'boolean') return Number(v);
  if (typeof v === 'string') {
    const s = v.trim().replace(/_/g, '');
    if (base === 10 && /^[-+]?\d+$/.test(s)) return Number(s);
    if (base !== 10) {
      const n = parseInt(s.replace(/^0[xob]/i, ''), base);
      return Number.isNaN(n) ? dflt : n;
    }
    if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return Math.trunc(Number(s)); // Jinja: int('3.7') == 3
    return dflt;
  }
  return dflt;
}

function toFloat(v: unknown, dflt = 0): number {
  v = unsafe(v);
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return Number(v);
  if (typeof v === 'string') {
    const s = v.trim();
    if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return Number(s);
    if (/^[-+]?(inf|infinity)$/i.test(s)) return s.startsWith('-') ? -Infinity : Infinity;
    return dflt;
  }
  return dflt;
}

/** Attribute getter of `attribute=` arguments; `attribute` may be a dot path or an index. */
function attrGetter(attribute: unknown): (x: unknown) => unknown {
  if (attribute === undefined || attribute === null) return (x) => x;
  if (typeof attribute === 'string') for (const part of attribute.split('.')) checkName(part);
  return (x) => getPath(x, attribute);
}

function callTest(tests: Record<string, Fn>, name: unknown, value: unknown, args: unknown[]): boolean {
  const n = String(name);
  checkName(n);
  const t = Object.prototype.hasOwnProperty.call(tests, n) ? tests[n] : undefined;
  if (!t) throw new UndefinedValueError(`no test named '${n}'`);
  return t(value, ...args) === true;
}

function b64encode(s: unknown): string {
  return Buffer.from(toText(s), 'utf8').toString('base64');
}
function b64decode(s: unknown): string {
  return Buffer.from(toText(s), 'base64').toString('utf8');
}

function round(v: unknown, precision: unknown = 0, method: unknown = 'common'): number {
  requireDefined(v, 'round');
  const n = toFloat(v);
  const p = Math.pow(10, Number(precision) || 0);
  const x = n * p;
  const r = method === 'ceil' ? Math.ceil(x) : method === 'floor' ? Math.floor(x) : Math.sign(x) * Math.round(Math.abs(x));
  return r / p;
}

function sortList(value: unknown, reverse: unknown, caseSensitive: unknown, attribute: unknown): unknown[] {
  const get = attrGetter(attribute);
  const key = (x: unknown): unknown => {
    const k = get(x);
    return !caseSensitive && typeof k === 'string' ? k.toLowerCase() : k;
  };
  const list = asList(value, 'sort');
  charge(list.length * Math.ceil(Math.log2(list.length + 1)));
  const out = [...list].sort((a, b) => cmp(key(a), key(b)));
  return truthy(reverse) ? out.reverse() : out;
}

/**
 * A key equal for values Python's == finds equal (1 == 1.0 == True, deep lists and dicts), so
 * unique and groupby use a Map instead of comparing every pair (quadratic on large lists). Values
 * with the same key are still compared with pyEq.
 */
function eqKey(v: unknown): string {
  v = unsafe(v);
  if (typeof v === 'boolean') return `n:${Number(v)}`;
  if (typeof v === 'number') return `n:${v}`;
  if (typeof v === 'string') return `s:${v}`;
  if (v === null || v === undefined) return `u:${String(v)}`;
  measure(v, 'value compared');
  return `j:${JSON.stringify(v, (_k, x) => {
    x = jsonReplacer(_k, x);
    if (typeof x === 'boolean') return Number(x);
    if (isPlainObject(x) && !Array.isArray(x)) return Object.fromEntries(keysOf(x).sort().map((k) => [k, x[k]]));
    return x;
  })}`;
}

/** Groups equal keys (pyEq) in first-seen order, in linear time. */
function groupEqual<T>(items: unknown[], keyOf: (x: unknown) => unknown, make: (key: unknown, first: unknown) => T, add: (g: T, x: unknown) => void): T[] {
  charge(items.length);
  // scalars with the same eqKey are equal; lists and dicts are compared within their bucket
  const scalars = new Map<string, T>();
  const buckets = new Map<string, { key: unknown; group: T }[]>();
  const out: T[] = [];
  for (const x of items) {
    const k = keyOf(x);
    const h = eqKey(k);
    if (h.charCodeAt(0) !== 106 /* 'j' */) {
      const g = scalars.get(h);
      if (g !== undefined) add(g, x);
      else {
        const group = make(k, x);
        scalars.set(h, group);
        out.push(group);
      }
      continue;
    }
    let bucket = buckets.get(h);
    if (!bucket) buckets.set(h, (bucket = []));
    const hit = bucket.find((b) => pyEq(b.key, k));
    if (hit) add(hit.group, x);
    else {
      const group = make(k, x);
      bucket.push({ key: k, group });
      out.push(group);
    }
  }
  return out;
}

/** Jinja's flatten, bounded: at most maxItems values out, at most maxDepth levels. */
function flattenList(list: unknown[], levels: number): unknown[] {
  const { maxItems, maxDepth } = templateLimits();
  const out: unknown[] = [];
  const rec = (l: unknown[], depth: number) => {
    if (depth > maxDepth) throw new BudgetError('maxDepth', `template over budget: flatten deeper than ${maxDepth} levels`);
    for (const x of l) {
      if (Array.isArray(x) && depth < levels) rec(x, depth + 1);
      else {
        out.push(x);
        if ((out.length & 1023) === 0) charge(1024); // the render's step and time budgets apply while it grows
        if (out.length > maxItems) checkItems(out.length, 'flatten result');
      }
    }
  };
  rec(list, 0);
  return out;
}

/** A list filter's count argument (slice, batch): a positive integer within maxItems. */
function countArg(v: unknown, filter: string): number {
  const n = Math.trunc(Number(unsafe(v)));
  if (!Number.isFinite(n) || n < 1) throw new UndefinedValueError(`filter '${filter}' expects a positive integer count, got ${toText(v)}`);
  checkItems(n, `filter '${filter}' count`);
  return n;
}

export function makeTests(): Record<string, Fn> {
  const tests: Record<string, Fn> = {
    defined: (v) => v !== undefined,
    undefined: (v) => v === undefined,
    none: (v) => v === null,
    null: (v) => v === null,
    boolean: (v) => typeof v === 'boolean',
    true: (v) => v === true,
    false: (v) => v === false,
    number: (v) => typeof v === 'number',
    integer: (v) => typeof v === 'number' && Number.isInteger(v),
    float: (v) => typeof v === 'number' && !Number.isInteger(v),
    string: (v) => typeof unsafe(v) === 'string',
    mapping: (v) => isPlainObject(v) && !Array.isArray(v),
    sequence: (v) => Array.isArray(v) || typeof unsafe(v) === 'string',
    iterable: (v) => Array.isArray(v) || typeof unsafe(v) === 'string' || isPlainObject(v),
    callable: (v) => typeof v === 'function',
    lower: (v) => typeof v === 'string' && v === v.toLowerCase(),
    upper: (v) => typeof v === 'string' && v === v.toUpperCase(),
    odd: (v) => typeof v === 'number' && Math.abs(v % 2) === 1,
    even: (v) => typeof v === 'number' && v % 2 === 0,
    divisibleby: (v, n) => typeof v === 'number' && v % Number(n) === 0,
    equalto: (a, b) => pyEq(a, b),
    eq: (a, b) => pyEq(a, b),
    '==': (a, b) => pyEq(a, b),
    sameas: (a, b) => a === b,
    ne: (a, b) => !pyEq(a, b),
    '!=': (a, b) => !pyEq(a, b),
    gt: (a, b) => a !== undefined && cmp(a, b) > 0,
    '>': (a, b) => a !== undefined && cmp(a, b) > 0,
    greaterthan: (a, b) => a !== undefined && cmp(a, b) > 0,
    ge: (a, b) => a !== undefined && cmp(a, b) >= 0,
    '>=': (a, b) => a !== undefined && cmp(a, b) >= 0,
    lt: (a, b) => a !== undefined && cmp(a, b) < 0,
    '<': (a, b) => a !== undefined && cmp(a, b) < 0,
    lessthan: (a, b) => a !== undefined && cmp(a, b) < 0,
    le: (a, b) => a !== undefined && cmp(a, b) <= 0,
    '<=': (a, b) => a !== undefined && cmp(a, b) <= 0,
    in: (a, b) => pyIn(a, b),
    truthy: (v) => truthy(v),
    falsy: (v) => !truthy(v),
    empty: (v) => !truthy(v),
    escaped: () => false,
  };
  // `x is None` / `x is True` (Python spellings; Jinja's names are lowercase)
  tests.None = tests.none;
  tests.True = tests.true;
  tests.False = tests.false;
  return tests;
}

export function makeFilters(tests: Record<string, Fn>): Record<string, Fn> {
  const selectOrReject = (keep: boolean, byAttr: boolean, filter: string) =>
    function (value: unknown, ...rest: unknown[]): unknown[] {
      const { pos } = splitKw(rest);
      let get: (x: unknown) => unknown = (x) => x;
      let args = pos;
      if (byAttr) {
        get = attrGetter(pos[0]);
        args = pos.slice(1);
      }
      const [testName, ...testArgs] = args;
      return asList(value, filter).filter((item) => {
        const v = get(item);
        const ok = testName === undefined ? truthy(v) : callTest(tests, testName, v, testArgs);
        return ok === keep;
      });
    };

  const filters: Record<string, Fn> = {
    int: (v, dflt = 0, base = 10) => toInt(v, Number(dflt), Number(base)),
    float: (v, dflt = 0) => toFloat(v, Number(dflt)),
    string: (v) => {
      requireDefined(v, 'string');
      return toText(v);
    },
    bool: (v) => {
      v = unsafe(v);
      if (typeof v === 'string') return ['true', 'yes', 'on', '1', 'y'].includes(v.trim().toLowerCase());
      return truthy(v);
    },
    length: (v) => {
      v = unsafe(v);
      requireDefined(v, 'length');
      if (v === null) return 0;
      if (typeof v === 'string' || Array.isArray(v)) return v.length;
      if (v instanceof Map || v instanceof Set) return v.size;
      if (typeof v === 'object') return keysOf(v).length;
      throw new UndefinedValueError(`filter 'length' expects a list, dict or string, got ${typeName(v)}`);
    },
    default: (v, dflt = '', boolean = false) => ((truthy(boolean) ? !truthy(v) : v === undefined) ? dflt : v),
    tojson: (v, indent?: unknown) => {
      requireDefined(v, 'tojson');
      const { pos, kw } = splitKw([indent]);
      const ind = kw.indent ?? pos[0];
      const width = typeof ind === 'number' ? Math.min(Math.max(0, ind), 10) : undefined;
      const size = measure(unsafe(v), 'tojson input');
      checkString(size, 'tojson result');
      return JSON.stringify(unsafe(v), jsonReplacer, width);
    },
    from_json: (v) => {
      requireDefined(v, 'from_json');
      try {
        return JSON.parse(toText(v));
      } catch (e) {
        throw new UndefinedValueError(`from_json: ${(e as Error).message}`);
      }
    },
    lower: (v) => (requireDefined(v, 'lower'), toText(v).toLowerCase()),
    upper: (v) => (requireDefined(v, 'upper'), toText(v).toUpperCase()),
    capitalize: (v) => {
      const s = toText(v);
      return s ? s[0].toUpperCase() + s.slice(1).toLowerCase() : s;
    },
    title: (v) => toText(v).replace(/\w\S*/g, (w) => w[0].toUpperCase() + w.slice(1).toLowerCase()),
    join: (v, sep = '', attribute?: unknown) => {
      const { pos, kw } = splitKw([sep, attribute].filter((x) => x !== undefined));
      const get = attrGetter(kw.attribute ?? pos[1]);
      return joinTexts(asList(v, 'join').map(get), toText(pos[0] ?? kw.d ?? ''));
    },
    first: (v) => {
      const l = typeof unsafe(v) === 'string' ? [...String(v)] : asList(v, 'first');
      return l.length ? l[0] : undefined;
    },
    last: (v) => {
      const l = typeof unsafe(v) === 'string' ? [...String(v)] : asList(v, 'last');
      return l.length ? l[l.length - 1] : undefined;
    },
    round: (v, precision?: unknown, method?: unknown) => {
      const { pos, kw } = splitKw([precision, method].filter((x) => x !== undefined));
      return round(v, kw.precision ?? pos[0] ?? 0, kw.method ?? pos[1] ?? 'common');
    },
    abs: (v) => {
      requireDefined(v, 'abs');
      return Math.abs(toFloat(v));
    },
    replace: (v, old, rep, count?: unknown) => {
      requireDefined(v, 'replace');
      return pyReplace(toText(v), old, rep, count);
    },
    trim: (v, chars?: unknown) => {
      requireDefined(v, 'trim');
      const s = toText(v);
      if (chars === undefined) return s.trim();
      const set = new Set(String(chars));
      let a = 0;
      let b = s.length;
      while (a < b && set.has(s[a])) a++;
      while (b > a && set.has(s[b - 1])) b--;
      return s.slice(a, b);
    },
    list: (v) => [...asList(v, 'list')],
    sum: (v, ...rest) => {
      const { pos, kw } = splitKw(rest);
      const get = attrGetter(kw.attribute ?? pos[0]);
      const start = Number(kw.start ?? pos[1] ?? 0);
      return asList(v, 'sum').reduce<number>((acc, x) => acc + toFloat(get(x)), start);
    },
    min: (v, ...rest) => {
      const { kw } = splitKw(rest);
      const get = attrGetter(kw.attribute);
      const l = asList(v, 'min');
      return l.length ? l.reduce((a, b) => (cmp(get(b), get(a)) < 0 ? b : a)) : undefined;
    },
    max: (v, ...rest) => {
      const { kw } = splitKw(rest);
      const get = attrGetter(kw.attribute);
      const l = asList(v, 'max');
      return l.length ? l.reduce((a, b) => (cmp(get(b), get(a)) > 0 ? b : a)) : undefined;
    },
    unique: (v, ...rest) => {
      const { kw } = splitKw(rest);
      return groupEqual(asList(v, 'unique'), attrGetter(kw.attribute), (_k, first) => first, () => {});
    },
    sort: (v, ...rest) => {
      const { pos, kw } = splitKw(rest);
      return sortList(v, kw.reverse ?? pos[0] ?? false, kw.case_sensitive ?? pos[1] ?? false, kw.attribute ?? pos[2]);
    },
    reverse: (v) => {
      v = unsafe(v);
      if (typeof v === 'string') return [...v].reverse().join('');
      return [...asList(v, 'reverse')].reverse();
    },
    select: selectOrReject(true, false, 'select'),
    reject: selectOrReject(false, false, 'reject'),
    selectattr: selectOrReject(true, true, 'selectattr'),
    rejectattr: selectOrReject(false, true, 'rejectattr'),
    map: (v, ...rest) => {
      const { pos, kw } = splitKw(rest);
      const list = asList(v, 'map');
      if (kw.attribute !== undefined) {
        const get = attrGetter(kw.attribute);
        return list.map((x) => {
          const r = get(x);
          return r === undefined && kw.default !== undefined ? kw.default : r;
        });
      }
      const [name, ...args] = pos;
      if (name === undefined) throw new UndefinedValueError("map needs attribute='…' or a filter name");
      const f = String(name);
      checkName(f);
      if (!Object.prototype.hasOwnProperty.call(filters, f)) throw new UndefinedValueError(`no filter named '${f}'`);
      return list.map((x) => filters[f](x, ...args));
    },
    attr: (v, name) => getAttr(v, name),
    items: (v) => {
      v = unsafe(v);
      requireDefined(v, 'items');
      if (v === null) return [];
      if (!isPlainObject(v)) throw new UndefinedValueError(`filter 'items' expects a dict, got ${typeName(v)}`);
      return keysOf(v).map((k) => [k, v[k]]);
    },
    dictsort: (v, caseSensitive = false, by = 'key', reverse = false) => {
      if (!isPlainObject(v)) throw new UndefinedValueError(`filter 'dictsort' expects a dict, got ${typeName(v)}`);
      const i = by === 'value' ? 1 : 0;
      const key = (p: unknown[]): unknown => (!caseSensitive && typeof p[i] === 'string' ? (p[i] as string).toLowerCase() : p[i]);
      const out = keysOf(v)
        .map((k) => [k, v[k]])
        .sort((a, b) => cmp(key(a), key(b)));
      return truthy(reverse) ? out.reverse() : out;
    },
    dict: (v) => {
      if (isPlainObject(v)) return { ...v };
      const out: Record<string, unknown> = {};
      for (const pair of asList(v, 'dict')) {
        if (!Array.isArray(pair) || pair.length !== 2) throw new UndefinedValueError('filter dict expects a list of pairs');
        checkName(pair[0]);
        out[String(pair[0])] = pair[1];
      }
      return out;
    },
    flatten: (v, levels?: unknown) => flattenList(asList(v, 'flatten'), typeof levels === 'number' ? levels : Infinity),
    batch: (v, size, fill?: unknown) => {
      const l = asList(v, 'batch');
      const n = countArg(size, 'batch');
      const out: unknown[][] = [];
      for (let i = 0; i < l.length; i += n) out.push(l.slice(i, i + n));
      const lastRow = out[out.length - 1];
      if (fill !== undefined && lastRow) while (lastRow.length < n) lastRow.push(fill);
      return out;
    },
    slice: (v, count) => {
      const l = asList(v, 'slice');
      const n = countArg(count, 'slice');
      const per = Math.floor(l.length / n);
      const extra = l.length % n;
      const out: unknown[][] = [];
      let off = 0;
      for (let i = 0; i < n; i++) {
        const len = per + (i < extra ? 1 : 0);
        out.push(l.slice(off, off + len));
        off += len;
      }
      return out;
    },
    groupby: (v, attribute) => groupEqual(
      sortList(v, false, true, attribute),
      attrGetter(attribute),
      (grouper, first) => ({ grouper, list: [first] }),
      (g, x) => g.list.push(x),
    ),
    format: (fmt, ...args) => {
      const { pos, kw } = splitKw(args);
      return percentFormat(toText(fmt), Object.keys(kw).length ? kw : pos);
    },
    pprint: (v) => {
      checkString(measure(unsafe(v), 'pprint input') * 2, 'pprint result');
      return JSON.stringify(unsafe(v), jsonReplacer, 2);
    },
    to_nice_json: (v, ...rest) => {
      const { kw } = splitKw(rest);
      checkString(measure(unsafe(v), 'to_nice_json input') * 2, 'to_nice_json result');
      return JSON.stringify(unsafe(v), jsonReplacer, typeof kw.indent === 'number' ? Math.min(kw.indent, 10) : 4);
    },
    b64encode,
    b64decode,
    base64encode: b64encode,
    base64decode: b64decode,
    urlencode: (v) => {
      v = unsafe(v);
      if (isPlainObject(v)) return keysOf(v).map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(toText(v[k]))}`).join('&');
      return encodeURIComponent(toText(v));
    },
    center: (v, width = 80) => {
      const s = toText(v);
      const total = Math.max(0, widthOf(width) - s.length);
      return ' '.repeat(Math.floor(total / 2)) + s + ' '.repeat(total - Math.floor(total / 2));
    },
    truncate: (v, length = 255, killwords = false, end = '...') => {
      const s = toText(v);
      const n = Number(length);
      if (s.length <= n) return s;
      if (truthy(killwords)) return s.slice(0, n) + String(end);
      const cut = s.slice(0, n);
      const sp = cut.lastIndexOf(' ');
      return (sp > 0 ? cut.slice(0, sp) : cut) + String(end);
    },
    wordcount: (v) => toText(v).split(/\s+/).filter(Boolean).length,
    indent: (v, width = 4, first = false) => {
      const pad = typeof width === 'string' ? width : ' '.repeat(Math.min(widthOf(width), 1000));
      const text = toText(v);
      let lines = 1;
      for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lines++;
      checkString(lines * pad.length + text.length, 'indent result');
      return text
        .split('\n')
        .map((l, i) => (i === 0 && !truthy(first)) || l === '' ? l : pad + l)
        .join('\n');
    },
    basename: (v) => toText(v).split('/').pop() ?? '',
    type_debug: (v) => typeName(v),
  };
  filters.d = filters.default;
  filters.count = filters.length;
  filters.to_json = filters.tojson;
  filters.dump = filters.tojson;
  filters.fromjson = filters.from_json;
  filters.e = (v) => v;
  filters.escape = (v) => v;
  filters.safe = (v) => v;
  // StrictUndefined: a filter applied to an undefined value is an error (false in conditions),
  // never a silent 0 or ''. Only `default`/`d` accept undefined.
  // Budget: every filter charges the size of its input before it runs, and a list or string it
  // returns must fit maxItems / maxString (the filters that could build far more than their input
  // — slice, batch, flatten, indent, replace, join, tojson — check before building).
  for (const name of Object.keys(filters)) {
    const f = filters[name];
    const strict = name !== 'default' && name !== 'd';
    filters[name] = (v: unknown, ...rest: unknown[]) => {
      if (strict && v === undefined) throw new UndefinedValueError(`filter '${name}' applied to an undefined value`);
      const raw = unsafe(v);
      charge(1 + (Array.isArray(raw) ? raw.length : typeof raw === 'string' ? raw.length >>> 6 : 0));
      const out = f(v, ...rest);
      if (Array.isArray(out)) checkItems(out.length, `filter '${name}' result`);
      else if (typeof out === 'string' && out.length > templateLimits().maxString) checkString(out.length, `filter '${name}' result`);
      return out;
    };
  }
  return filters;
}

export { SecurityError };
