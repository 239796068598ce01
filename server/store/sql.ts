/** Small helpers shared by the store modules. */
import type pg from 'pg';

/** A pool or a client inside a transaction: every store function takes either. */
export type Queryable = pg.Pool | pg.PoolClient;

/** Timestamps leave the store as ISO strings. */
export function iso(v: Date | string | null | undefined): string | null {
  if (v === null || v === undefined) return null;
  return v instanceof Date ? v.toISOString() : new Date(v).toISOString();
}

/** Validates an id given as a string or an integer; returns its decimal string or null. */
export function parseId(v: unknown): string | null {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v > 0 ? String(v) : null;
  if (typeof v === 'string' && /^[1-9]\d{0,18}$/.test(v)) {
    return BigInt(v) <= 9223372036854775807n ? v : null;
  }
  if (typeof v === 'bigint') return v > 0n && v <= 9223372036854775807n ? v.toString() : null;
  return null;
}

/**
 * An id to inline into SQL sent by the simple query protocol, which takes no parameters (a
 * transaction's BEGIN carries statements that way): checked to be a decimal, cast to bigint.
 */
export function idLiteral(id: string): string {
  if (!/^\d{1,19}$/.test(id)) throw new Error(`not an id: ${id}`);
  return `${id}::bigint`;
}
