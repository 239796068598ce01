/** Small helpers shared by the credentials, keychain and vars services. */
import type pg from 'pg';
import { AppError, badRequest } from '../errors.js';
import { withTransaction, type Db } from '../db.js';
import { lockedStatus } from '../store/executions.js';

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

const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/**
 * An ISO 8601 timestamp (`2030-01-01T00:00:00Z`, with an offset, or none: the spec's timestamps
 * are UTC, so a zone-less one is UTC rather than the server's own zone) as a Date; null for
 * anything else — `Date`'s own parser took "5" for 2001-05-01 and "foo 2020" for 2020-01-01.
 */
export function parseUtcTimestamp(value: string): Date | null {
  const m = ISO_8601.exec(value.trim());
  if (!m) return null;
  const [, y, mo, d, h = '00', mi = '00', sec = '00', frac = '', zone] = m;
  const fields = [Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(sec)] as const;
  const wall = new Date(Date.UTC(...fields));
  // Date.UTC rolls 02-30 over to 03-01 and 24:00 to the next day: refuse what it had to move
  const moved = wall.getUTCFullYear() !== fields[0] || wall.getUTCMonth() !== fields[1] || wall.getUTCDate() !== fields[2]
    || wall.getUTCHours() !== fields[3] || wall.getUTCMinutes() !== fields[4] || wall.getUTCSeconds() !== fields[5];
  if (moved) return null;
  let ms = wall.getTime() + Math.floor(Number(`0${frac || '.0'}`) * 1000);
  if (zone && zone.toUpperCase() !== 'Z') {
    const [, sign, oh, om] = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    if (Number(oh) > 23 || Number(om) > 59) return null;
    ms -= (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om)) * 60_000;
  }
  return new Date(ms);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Runs `write` in a transaction holding the execution's lock, unless the execution is completed:
 * what belongs to an execution (its variables, its local and shared keychain entries) is removed
 * in the transaction that completes it, so a later write would stay forever. 409 naming the
 * execution and its status. Failed and cancelled executions stay writable: a retry resumes them.
 * An id without an execution row is written (the HTTP layer answers 404 for those when it has
 * the executions; the module used on its own has none).
 */
export async function writeUnlessCompleted<T>(
  db: Pick<Db, 'pool'>,
  executionId: string,
  what: string,
  write: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  return withTransaction(db.pool, async (client) => {
    const status = await lockedStatus(client, executionId);
    if (status === 'completed') {
      throw new AppError(409, 'execution_completed',
        `execution ${executionId} is ${status}: its ${what} were removed when it completed, and nothing more is stored for it`,
        { execution_id: executionId, status });
    }
    return write(client);
  });
}
