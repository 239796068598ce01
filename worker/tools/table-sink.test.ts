/**
 * The table sink (issue 18 item 2): `{kind: postgres|duckdb, table, args|data, mode, key}` writes
 * rows with generated, parameterised SQL against a real PostgreSQL and a real DuckDB file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { runTool } from './index.js';
import { closePostgresPools } from './postgres.js';
import { tableWriteOf, tableWriteSql } from './sql.js';
import { makeCtx } from '../testing/helpers.js';
import type { Json, Tool } from './types.js';

let db: TestDatabase;
let auth: Json;
const dir = mkdtempSync(join(tmpdir(), 'pf-sink-'));
const duckFile = join(dir, 'sink.duckdb');

async function pgRows(sql: string): Promise<unknown[]> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  db = await createTestDatabase('pfsink');
  const u = new URL(db.url);
  auth = { type: 'postgres', inline: { host: u.hostname, port: Number(u.port || 5432), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), database: db.name } };
  await pgRows(`CREATE TABLE probe_sink (id int PRIMARY KEY, name text, doc jsonb); CREATE TABLE "Odd ""T""" ("we""ird" text)`);
  await runTool({ kind: 'duckdb', database: duckFile, query: 'CREATE TABLE probe (id INTEGER PRIMARY KEY, name VARCHAR)' }, makeCtx());
});
afterAll(async () => {
  await closePostgresPools();
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe('generated SQL', () => {
  it.each<[string, Record<string, Json>, string, unknown[]]>([
    ['one row', { table: 't', args: { id: 1, name: 'a' } }, 'INSERT INTO "t" ("id", "name") VALUES ($1, $2)', [1, 'a']],
    ['rows with different keys: union of columns, NULL for missing', { table: 's.t', data: [{ a: 1 }, { b: 2 }] }, 'INSERT INTO "s"."t" ("a", "b") VALUES ($1, $2), ($3, $4)', [1, null, null, 2]],
    ['upsert', { table: 't', args: { id: 1, name: 'a' }, mode: 'upsert', key: 'id' }, 'INSERT INTO "t" ("id", "name") VALUES ($1, $2) ON CONFLICT ("id") DO UPDATE SET "name" = EXCLUDED."name"', [1, 'a']],
    ['upsert of key columns only', { table: 't', args: { id: 1 }, mode: 'upsert', key: ['id'] }, 'INSERT INTO "t" ("id") VALUES ($1) ON CONFLICT ("id") DO NOTHING', [1]],
    ['hostile names are quoted, hostile values bound', { table: 'x"; DROP TABLE t; --', args: { 'a"b': "'); DROP TABLE t; --" } }, 'INSERT INTO "x""; DROP TABLE t; --" ("a""b") VALUES ($1)', ["'); DROP TABLE t; --"]],
  ])('%s', (_name, tool, text, values) => {
    const w = tableWriteOf(tool, 'postgres')!;
    expect(tableWriteSql(w, false)).toEqual({ text, values });
  });

  it.each<[string, Record<string, Json>, string]>([
    ['no rows', { table: 't' }, 'args (or data) must be a row object'],
    ['a row that is not an object', { table: 't', args: [1] }, 'row 0 of args must be an object'],
    ['args and data', { table: 't', args: { a: 1 }, data: { a: 1 } }, 'not both'],
    ['upsert without key', { table: 't', args: { a: 1 }, mode: 'upsert' }, 'mode upsert needs key'],
    ['unknown mode', { table: 't', args: { a: 1 }, mode: 'merge' }, 'mode must be insert or upsert'],
  ])('refuses %s', (_name, tool, message) => {
    expect(() => tableWriteOf(tool, 'postgres')).toThrow(message);
  });
});

describe('postgres table sink', () => {
  it('args as one row (the spec form that used to fail with "needs command")', async () => {
    const out = await runTool({ kind: 'postgres', auth, table: 'probe_sink', args: { id: 1, name: 'one', doc: { k: [1, 2] } } } as Tool, makeCtx());
    expect(out.error).toBeUndefined();
    expect((out.response as { row_count: number }).row_count).toBe(1);
    expect(await pgRows('SELECT * FROM probe_sink WHERE id = 1')).toEqual([{ id: 1, name: 'one', doc: { k: [1, 2] } }]);
  });

  it('data as a list of rows, then upsert by key', async () => {
    const ins = await runTool({ kind: 'postgres', auth, table: 'probe_sink', data: [{ id: 2, name: 'two' }, { id: 3, name: 'three' }] } as Tool, makeCtx());
    expect(ins.error).toBeUndefined();
    const up = await runTool({ kind: 'postgres', auth, table: 'probe_sink', mode: 'upsert', key: 'id', args: [{ id: 3, name: 'THREE' }, { id: 4, name: 'four' }] } as Tool, makeCtx());
    expect(up.error).toBeUndefined();
    expect(await pgRows('SELECT id, name FROM probe_sink WHERE id > 1 ORDER BY id')).toEqual([
      { id: 2, name: 'two' }, { id: 3, name: 'THREE' }, { id: 4, name: 'four' },
    ]);
  });

  it('quotes odd identifiers and binds values that look like SQL', async () => {
    const out = await runTool({ kind: 'postgres', auth, table: 'Odd "T"', args: { 'we"ird': "x'); DROP TABLE probe_sink; --" } } as Tool, makeCtx());
    expect(out.error).toBeUndefined();
    expect(await pgRows('SELECT * FROM "Odd ""T"""')).toEqual([{ 'we"ird': "x'); DROP TABLE probe_sink; --" }]);
    expect((await pgRows('SELECT count(*)::int AS n FROM probe_sink'))[0]).toEqual({ n: 4 });
  });

  it('a plain insert that conflicts is an SQL error outcome, not a crash', async () => {
    const out = await runTool({ kind: 'postgres', auth, table: 'probe_sink', args: { id: 1, name: 'dup' } } as Tool, makeCtx());
    expect(out.error).toMatchObject({ code: 'sql_error', data: { sqlstate: '23505' } });
  });
});

describe('duckdb table sink', () => {
  it('insert and upsert into a file database', async () => {
    const a = await runTool({ kind: 'duckdb', database: duckFile, table: 'probe', args: [{ id: 1, name: 'a' }, { id: 2, name: 'b' }] } as Tool, makeCtx());
    expect(a.error).toBeUndefined();
    const b = await runTool({ kind: 'duckdb', database: duckFile, table: 'probe', mode: 'upsert', key: 'id', data: { id: 2, name: 'B' } } as Tool, makeCtx());
    expect(b.error).toBeUndefined();
    const q = await runTool({ kind: 'duckdb', database: duckFile, query: 'SELECT id, name FROM probe ORDER BY id' }, makeCtx());
    expect((q.response as { rows: unknown[] }).rows).toEqual([{ id: 1, name: 'a' }, { id: 2, name: 'B' }]);
  });
});
