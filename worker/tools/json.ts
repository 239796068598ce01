/** Conversion of driver values to JSON: what a tool returns must survive JSON.stringify exactly. */
import type { Json, JsonObject } from '../../playbook/types.js';

/** BigInt → number when it is a safe integer, else its decimal string. */
export function bigintToJson(v: bigint): number | string {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
}

/**
 * A decimal string (NUMERIC) → a number when the number prints back as the same decimal value,
 * else the string unchanged (no silent loss of digits, same spirit as bigintToJson).
 */
export function decimalToJson(v: string): number | string {
  const n = Number(v);
  if (!Number.isFinite(n) || !/^[+-]?\d+(\.\d+)?$/.test(v)) return v;
  const canon = (x: string) => {
    let [i, f = ''] = x.replace(/^\+/, '').split('.');
    const neg = i.startsWith('-');
    i = i.replace(/^-/, '').replace(/^0+(?=\d)/, '');
    f = f.replace(/0+$/, '');
    const body = f ? `${i}.${f}` : i;
    return neg && body !== '0' ? `-${body}` : body;
  };
  return canon(String(n)) === canon(v) ? n : v;
}

/** Deep conversion: bigint, Date (ISO 8601), Buffer/Uint8Array (base64), Map, Set, non-finite numbers (null). */
export function toJson(value: unknown): Json {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : null;
    case 'bigint':
      return bigintToJson(value);
    case 'object':
      break;
    default:
      return String(value);
  }
  if (Array.isArray(value)) return value.map(toJson);
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (value instanceof Map) {
    const out: JsonObject = {};
    for (const [k, v] of value) out[String(k)] = toJson(v);
    return out;
  }
  if (value instanceof Set) return [...value].map(toJson);
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return toJson((value as { toJSON(): unknown }).toJSON());
  }
  if (proto !== Object.prototype && proto !== null && typeof (value as object).toString === 'function' && (value as object).toString !== Object.prototype.toString) {
    return String(value);
  }
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(value)) out[k] = toJson(v);
  return out;
}

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function str(v: Json | undefined): string | undefined {
  if (v === undefined || v === null) return undefined;
  return typeof v === 'string' ? v : JSON.stringify(v);
}
