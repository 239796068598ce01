/** Small helpers shared by the credentials, keychain and vars services. */
import { badRequest } from '../errors.js';

/** IDs are int64 in Postgres, sent as decimal strings, accepted as a string or an integer. */
export function parseId(value: unknown, field: string): string {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value === 'string' && /^\d{1,19}$/.test(value) && BigInt(value) <= 9223372036854775807n) return BigInt(value).toString();
  throw badRequest(`${field} must be a non-negative integer (number or decimal string)`, { field });
}

export function optionalId(value: unknown, field: string): string | null {
  if (value === undefined || value === null || value === '') return null;
  return parseId(value, field);
}

export function iso(d: Date | string | null): string | null {
  if (d === null) return null;
  return (d instanceof Date ? d : new Date(d)).toISOString();
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
