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

/**
 * A parameter as an SQL literal, for statements sent by the simple query protocol (EXECUTE's
 * arguments). Not pg's escapeLiteral, which builds the literal a character at a time: for a step's
 * few KB of JSON that cost more than the round trips inlining saves.
 */
export function sqlLiteral(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  const s = typeof v === 'string' ? v : v instanceof Date ? v.toISOString() : JSON.stringify(v);
  const quoted = s.replace(/'/g, "''");
  // E'…' reads backslashes as escapes whatever standard_conforming_strings says
  return s.includes('\\') ? `E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
}

/** Above this, parameters are bound rather than inlined: PostgreSQL lexes a literal it parses. */
const MAX_INLINE_CHARS = 256 * 1024;

/** `values` as SQL literals, or null when together they are too large to inline. */
export function sqlLiterals(values: readonly unknown[]): string[] | null {
  let size = 0;
  const out: string[] = [];
  for (const v of values) {
    const lit = sqlLiteral(v);
    size += lit.length;
    if (size > MAX_INLINE_CHARS) return null;
    out.push(lit);
  }
  return out;
}
