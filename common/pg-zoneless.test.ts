import { describe, expect, it } from 'vitest';
import { DATE_OID, TIMESTAMP_OID, zonelessAsUtc, zonelessParser, type DriverTypes } from './pg-zoneless.js';

describe('zone-less PostgreSQL dates and timestamps', () => {
  it('reads them as UTC instants', () => {
    expect(zonelessAsUtc('2024-06-01')).toBe('2024-06-01T00:00:00.000Z');
    expect(zonelessAsUtc('2024-06-01 12:34:56')).toBe('2024-06-01T12:34:56.000Z');
    expect(zonelessAsUtc('2024-06-01 12:34:56.789999')).toBe('2024-06-01T12:34:56.789Z');
  });

  it('keeps PostgreSQL\'s text where a Date cannot hold the value', () => {
    for (const text of ['infinity', '-infinity', '0044-03-15 BC', '0044-03-15 12:00:00 BC', '12345-01-01', '12345-01-01 00:00:00']) {
      expect(zonelessAsUtc(text)).toBe(text);
    }
  });

  it('gives parsers for the zone-less types and their arrays only', () => {
    const textArray = (t: string) => t.slice(1, -1).split(',').map((v) => (v === 'NULL' ? null : v.replace(/"/g, '')));
    const types = { getTypeParser: (oid: number) => (oid === 1009 ? textArray : () => { throw new Error(`no parser for ${oid}`); }) } as unknown as DriverTypes;
    expect(zonelessParser(DATE_OID, 'text', types)!('2024-06-01')).toBe('2024-06-01T00:00:00.000Z');
    expect(zonelessParser(DATE_OID, 'text', types, { dateAsText: true })!('2024-06-01')).toBe('2024-06-01');
    expect(zonelessParser(TIMESTAMP_OID, 'text', types, { dateAsText: true })!('2024-06-01 01:02:03')).toBe('2024-06-01T01:02:03.000Z');
    expect(zonelessParser(1115, 'text', types)!('{"2024-06-01 01:02:03",NULL}')).toEqual(['2024-06-01T01:02:03.000Z', null]);
    expect(zonelessParser(1182, 'text', types, { dateAsText: true })!('{2024-06-01}')).toEqual(['2024-06-01']);
    for (const other of [25, 1184, 1185, 20, 1700]) expect(zonelessParser(other, 'text', types)).toBeUndefined();
    expect(zonelessParser(TIMESTAMP_OID, 'binary', types)).toBeUndefined();
  });
});
