/**
 * The sandbox rules shared by the runtime, the filters and the compile-time checks.
 *
 * nunjucks compiles templates to JavaScript and, left alone, reads any property of any value
 * (`''.constructor.constructor('return process')()` reaches Node). Playflow templates come from any
 * API caller, so every member access of a template goes through `getAttr` below:
 *
 * - names in DENIED_NAMES, and any name starting with `__`, are refused with a SecurityError,
 *   whether written literally (refused at compile time), computed (`['con' ~ 'structor']`,
 *   refused at run time) or passed to a filter (`map(attribute='constructor')`, `attr`, `sort`…);
 * - only OWN properties of data objects are visible: nothing is ever read from a prototype, so
 *   `Object.prototype`, `Function.prototype` and friends are unreachable even under other names;
 * - functions (globals such as `range`, `cycler`, macros) can be called but have no readable
 *   members (`range.constructor`, `range.call`, `range.caller` are all refused);
 * - methods on values are not JavaScript methods but a fixed table of Python-style methods
 *   (see python.ts) plus a short whitelist of harmless JavaScript ones.
 */

export class SecurityError extends Error {
  constructor(readonly attribute: string) {
    super(`access to '${attribute}' is not allowed in templates`);
    this.name = 'SecurityError';
  }
}

/** Raised when a template uses an undefined value where a value is needed (strict rules). */
export class UndefinedValueError extends Error {
  constructor(
    message: string,
    readonly variable?: string,
  ) {
    super(message);
    this.name = 'UndefinedValueError';
  }
}

/**
 * Names refused everywhere (as a member, a variable, a filter argument, a dict key), plus every
 * name starting with `__` (`__proto__`, `__defineGetter__`, `__lookupGetter__`, …). The list is
 * short on purpose: the real protection is that lookups never leave a value's own properties and
 * functions have no readable members, so `call`, `apply`, `caller` or `arguments` are harmless
 * (and legitimate JSON field names, e.g. an LLM API's `function.arguments`).
 */
export const DENIED_NAMES: ReadonlySet<string> = new Set(['constructor', 'prototype', '__proto__']);

export function isDeniedName(name: unknown): boolean {
  if (typeof name !== 'string') return false;
  return (name.charCodeAt(0) === 95 && name.charCodeAt(1) === 95) || DENIED_NAMES.has(name);
}

export function checkName(name: unknown): void {
  if (isDeniedName(name)) throw new SecurityError(String(name));
}

const hasOwn = Object.prototype.hasOwnProperty;

const BUILTIN_PROTOTYPES: ReadonlySet<unknown> = new Set<unknown>([
  Object.prototype,
  Array.prototype,
  Function.prototype,
  String.prototype,
  Number.prototype,
  Boolean.prototype,
  Symbol.prototype,
  BigInt.prototype,
  Date.prototype,
  RegExp.prototype,
  Error.prototype,
  Map.prototype,
  Set.prototype,
  Promise.prototype,
  null,
]);

/**
 * Own-property lookup that also follows prototypes the caller built on purpose (a context made with
 * `Object.create(parent)`), but never reaches a built-in prototype.
 */
const NOT_FOUND = Object.freeze({ found: false as const });

export function ownLookup(obj: object, key: string): { found: boolean; value?: unknown } {
  if (hasOwn.call(obj, key)) return { found: true, value: (obj as Record<string, unknown>)[key] };
  let o = Object.getPrototypeOf(obj) as object | null;
  if (o === Object.prototype || o === null) return NOT_FOUND;
  while (o !== null && !BUILTIN_PROTOTYPES.has(o)) {
    if (hasOwn.call(o, key)) return { found: true, value: (o as Record<string, unknown>)[key] };
    o = Object.getPrototypeOf(o) as object | null;
  }
  return NOT_FOUND;
}

/**
 * The one member access of templates: `obj.key` and `obj[key]`. Returns undefined for a missing
 * member (the caller decides whether that is an error). Throws SecurityError for refused names
 * and for any member of a function.
 */
export function getAttr(obj: unknown, key: unknown): unknown {
  if (typeof key === 'symbol') throw new SecurityError(String(key.description));
  const name = typeof key === 'number' ? key : String(key);
  if (typeof name === 'string') checkName(name);
  if (obj === undefined || obj === null) return undefined;
  if (typeof obj === 'function') throw new SecurityError(String(name)); // functions have no readable members
  if (typeof obj === 'string') {
    if (name === 'length') return obj.length;
    const i = toIndex(name, obj.length);
    return i === undefined ? undefined : obj[i];
  }
  if (Array.isArray(obj)) {
    if (name === 'length') return obj.length;
    const i = toIndex(name, obj.length);
    if (i !== undefined) return obj[i];
    return typeof name === 'string' && hasOwn.call(obj, name) ? (obj as unknown as Record<string, unknown>)[name] : undefined;
  }
  if (typeof obj === 'object') {
    if (obj instanceof Map) return obj.get(name);
    const r = ownLookup(obj, String(name));
    return r.found ? r.value : undefined;
  }
  return undefined;
}

/** Python-style index: integers (or integer strings), negative from the end. */
function toIndex(key: string | number, length: number): number | undefined {
  let n: number;
  if (typeof key === 'number') n = key;
  else if (/^-?\d+$/.test(key)) n = Number(key);
  else return undefined;
  if (!Number.isInteger(n)) return undefined;
  if (n < 0) n += length;
  return n >= 0 && n < length ? n : undefined;
}

/** `a.b.c` attribute paths used by filters (`map(attribute='a.b')`, `sort(attribute=…)`). */
export function getPath(obj: unknown, path: unknown): unknown {
  if (typeof path === 'number') return getAttr(obj, path);
  let cur = obj;
  for (const part of String(path).split('.')) {
    cur = getAttr(cur, /^-?\d+$/.test(part) ? Number(part) : part);
    if (cur === undefined) return undefined;
  }
  return cur;
}
