/**
 * PostgreSQL's zone-less `date` and `timestamp` values, read the same on every host. The driver's
 * default parsers build JavaScript Dates in the process's own time zone, so one row came back as
 * different instants on a worker in Berlin and one in New York (`2024-06-01 12:00` as 10:00Z and
 * 16:00Z), and a `date` as the evening before east of Greenwich. These parsers read them as UTC,
 * which is what a host on UTC always answered. Values a Date cannot hold (`infinity`, BC dates)
 * keep PostgreSQL's text instead of becoming null.
 */

export const DATE_OID = 1082;
export const TIMESTAMP_OID = 1114;
const DATE_ARRAY_OID = 1182;
const TIMESTAMP_ARRAY_OID = 1115;

const PLAIN = /^\d{4}-\d\d-\d\d( \d\d:\d\d:\d\d(\.\d+)?)?$/;

/** `2024-06-01` / `2024-06-01 12:00:00.123456` as an ISO instant in UTC; anything else as it came. */
export function zonelessAsUtc(text: string): string {
  if (!PLAIN.test(text)) return text;
  const d = new Date(`${text.replace(' ', 'T')}Z`);
  return Number.isNaN(d.getTime()) ? text : d.toISOString();
}

type Parser = (text: string) => unknown;

/** The driver's type registry (`pg.types`): where the text[] parser of the arrays comes from. */
export interface DriverTypes {
  getTypeParser(oid: never, format?: never): Parser;
}

/** text[]: an array's elements as text, NULLs as null (the driver's own array parser). */
const TEXT_ARRAY_OID = 1009;

/**
 * The parser of a zone-less type or of its arrays in text format, or undefined for every other
 * type and for binary. `dateAsText`: a `date` stays `2024-06-01` (the postgres tool's answer for
 * a date column); otherwise it is that day's midnight UTC.
 */
export function zonelessParser(oid: number, format: string | undefined, types: DriverTypes, opts: { dateAsText?: boolean } = {}): Parser | undefined {
  if (format === 'binary') return undefined;
  const date = opts.dateAsText ? (text: string) => text : zonelessAsUtc;
  const each = (one: (text: string) => string) => {
    const textArray = types.getTypeParser(TEXT_ARRAY_OID as never) as (text: string) => Array<string | null>;
    return (text: string) => textArray(text).map((v) => (v === null ? null : one(v)));
  };
  switch (oid) {
    case DATE_OID: return date;
    case TIMESTAMP_OID: return zonelessAsUtc;
    case DATE_ARRAY_OID: return each(date);
    case TIMESTAMP_ARRAY_OID: return each(zonelessAsUtc);
    default: return undefined;
  }
}
