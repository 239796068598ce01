/**
 * The CRDs' x-kubernetes-validations rules, evaluated with @marcbachmann/cel-js the way the API
 * server does: `self` is the value at the rule's schema node (integers as CEL int), `oldSelf` the
 * stored value on update (rules that mention oldSelf are transition rules, skipped on create), and
 * a failing rule is `Invalid value: "<schema type>": <message>` at that node's path.
 */
import { parse } from '@marcbachmann/cel-js';
import type { FieldError } from './errors.js';
import type { Obj } from './resources.js';

type Program = ReturnType<typeof parse>;
const compiled = new Map<string, Program>();

function program(rule: string): Program {
  let p = compiled.get(rule);
  if (!p) {
    p = parse(rule);
    compiled.set(rule, p);
  }
  return p;
}

const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A JSON value as CEL sees it under `schema`: integers become int (BigInt). */
export function toCel(schema: Obj | undefined, v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => toCel(schema?.items, x));
  if (isObject(v)) {
    const out: Obj = {};
    for (const [k, x] of Object.entries(v)) {
      const sub = schema?.properties?.[k] ?? (isObject(schema?.additionalProperties) ? schema.additionalProperties : undefined);
      out[k] = toCel(sub, x);
    }
    return out;
  }
  if (typeof v === 'number' && (schema?.type === 'integer' || (schema === undefined && Number.isInteger(v)))) return BigInt(v);
  return v;
}

const join = (base: string, key: string): string => (base ? `${base}.${key}` : key);

interface Rule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  reason?: string;
}

function check(schema: Obj, value: unknown, old: unknown, path: string, out: FieldError[]): void {
  for (const r of (schema['x-kubernetes-validations'] ?? []) as Rule[]) {
    const transition = /\boldSelf\b/.test(r.rule);
    if (transition && old === undefined) continue;
    const vars = { self: toCel(schema, value), ...(transition ? { oldSelf: toCel(schema, old) } : {}) };
    let ok: unknown;
    try {
      ok = program(r.rule)(vars);
    } catch (err) {
      out.push({ type: 'FieldValueInvalid', field: path, body: `Invalid value: "${schema.type ?? 'object'}": rule evaluation error: ${(err as Error).message}` });
      continue;
    }
    if (ok === true) continue;
    let message = r.message ?? `failed rule: ${r.rule}`;
    if (r.messageExpression) {
      try {
        message = String(program(r.messageExpression)(vars));
      } catch {
        /* the real server falls back to message when messageExpression fails */
      }
    }
    const field = r.fieldPath ? path + r.fieldPath : path;
    const type = r.reason === 'FieldValueRequired' ? 'FieldValueRequired'
      : r.reason === 'FieldValueForbidden' ? 'FieldValueForbidden'
        : r.reason === 'FieldValueDuplicate' ? 'FieldValueDuplicate' : 'FieldValueInvalid';
    const body = type === 'FieldValueInvalid' ? `Invalid value: "${schema.type ?? 'object'}": ${message}`
      : type === 'FieldValueRequired' ? `Required value: ${message}`
        : type === 'FieldValueForbidden' ? `Forbidden: ${message}` : `Duplicate value: ${message}`;
    out.push({ type, field, body });
  }
  if (Array.isArray(value)) {
    if (!schema.items) return;
    const keys: string[] | undefined = schema['x-kubernetes-list-type'] === 'map' ? schema['x-kubernetes-list-map-keys'] : undefined;
    value.forEach((item, i) => {
      // Old items correlate only for map lists (by key), as in the real server.
      const oldItem = keys && Array.isArray(old)
        ? old.find((o) => isObject(o) && keys.every((k) => o[k] === (item as Obj)?.[k]))
        : undefined;
      check(schema.items, item, oldItem, `${path}[${i}]`, out);
    });
    return;
  }
  if (!isObject(value)) return;
  const oldObj = isObject(old) ? old : undefined;
  for (const [k, v] of Object.entries(value)) {
    const sub = schema.properties?.[k] ?? (isObject(schema.additionalProperties) ? schema.additionalProperties : undefined);
    if (sub) check(sub, v, oldObj?.[k], join(path, k), out);
  }
}

/** Field errors of every failing x-kubernetes-validations rule in `value` (the object without metadata). */
export function celErrors(schema: Obj, value: Obj, old?: Obj): FieldError[] {
  const out: FieldError[] = [];
  check(schema, value, old, '', out);
  return out;
}
