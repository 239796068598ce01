import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { runTool } from './index.js';
import { closePostgresPools } from './postgres.js';
import { splitStatements, maxPlaceholder, quoteIdent } from './sql.js';
import { credentialTable, makeCtx } from '../testing/helpers.js';

let db: TestDatabase;
let inline: Record<string, any>;
let ctx: ReturnType<typeof makeCtx>;

beforeAll(async () => {
  db = await createTestDatabase('pfw');
  const u = new URL(db.url);
  inline = { host: u.hostname, port: Number(u.port || 5432), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), database: db.name };
  ctx = makeCtx({
    resolveAuth: credentialTable({
      pg_new: { type: 'postgres', data: inline },
      pg_old: { type: 'postgres', data: { db_host: inline.host, db_port: inline.port, db_user: inline.user, db_password: inline.password, db_name: inline.database } },
    }),
  });
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(`CREATE TABLE items (id serial primary key, name text, qty int, big bigint, price numeric(10,2), at timestamptz, doc jsonb, "Odd ""Name""" text)`);
  await c.end();
});
afterAll(async () => {
  await closePostgresPools();
  await db.drop();
});

describe('sql helpers', () => {
  it('splits statements respecting quotes, dollar bodies and comments', () => {
    expect(splitStatements(`select 1; select 'a;b'; -- c;\n select $$x;y$$; /* ; */ select "q;"`)).toEqual([
      'select 1', "select 'a;b'", '-- c;\n select $$x;y$$', '/* ; */ select "q;"',
    ]);
    expect(splitStatements('  ;  ; ')).toEqual([]);
    expect(maxPlaceholder(`select $1, '$5', $3`)).toBe(3);
    expect(quoteIdent('public.t"x')).toBe('"public"."t""x"');
  });
});

describe('postgres tool', () => {
  it('runs with a credential reference (host/port/user spelling) and returns rows as objects', async () => {
    const out = await runTool({ kind: 'postgres', auth: 'pg_new', command: 'SELECT 1::int AS one, 9007199254740993::bigint AS huge, 5::bigint AS small, 1.50::numeric AS n, 12345678901234567890.12::numeric AS bign, 0.1::numeric AS tenth, now() AS t' }, ctx);
    expect(out.error).toBeUndefined();
    const r = out.response as any;
    expect(r.command).toBe('SELECT');
    expect(r.row_count).toBe(1);
    expect(r.columns).toEqual(['one', 'huge', 'small', 'n', 'bign', 'tenth', 't']);
    expect(r.rows[0]).toMatchObject({ one: 1, huge: '9007199254740993', small: 5, n: 1.5, bign: '12345678901234567890.12', tenth: 0.1 });
    expect(r.rows[0].t).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('zone-less dates and timestamps read the same whatever the worker\'s time zone', async () => {
    const query = `SELECT '2024-06-01 12:00:00'::timestamp AS ts, '2024-06-01'::date AS d, 'infinity'::timestamp AS inf,
      ARRAY['2024-06-01 12:00:00.123456'::timestamp, NULL] AS tsa, ARRAY['2024-06-01'::date] AS da, '2024-06-01 12:00:00+02'::timestamptz AS tz`;
    const zone = process.env.TZ;
    const rows: unknown[] = [];
    try {
      for (const tz of ['UTC', 'America/New_York', 'Europe/Berlin']) {
        process.env.TZ = tz;
        const out = await runTool({ kind: 'postgres', auth: 'pg_new', command: query }, ctx);
        expect(out.error).toBeUndefined();
        rows.push((out.response as any).rows[0]);
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(rows[0]).toEqual({
      ts: '2024-06-01T12:00:00.000Z', d: '2024-06-01', inf: 'infinity',
      tsa: ['2024-06-01T12:00:00.123Z', null], da: ['2024-06-01'], tz: '2024-06-01T10:00:00.000Z',
    });
    expect(rows[1]).toEqual(rows[0]);
    expect(rows[2]).toEqual(rows[0]);
  });

  it('db_* spelling via {type, credential}; inline auth; positional and object args', async () => {
    const ins = await runTool({ kind: 'postgres', auth: { type: 'postgres', credential: 'pg_old' }, command: 'INSERT INTO items(name, qty, doc) VALUES ($1, $2, $3) RETURNING id, name, doc', args: ['apple', 3, { color: 'red' }] }, ctx);
    expect(ins.error).toBeUndefined();
    expect((ins.response as any).rows[0]).toMatchObject({ name: 'apple', doc: { color: 'red' } });
    const sel = await runTool({ kind: 'postgres', auth: { type: 'postgres', inline }, query: 'SELECT name, qty FROM items WHERE name = $1 AND qty = $2', args: { name: 'apple', qty: 3 } }, ctx);
    expect((sel.response as any).rows).toEqual([{ name: 'apple', qty: 3 }]);
  });

  it('several statements give a list of results (with and without args)', async () => {
    const out = await runTool({ kind: 'postgres', auth: 'pg_new', command: `INSERT INTO items(name, qty) VALUES ('pear', 1); SELECT count(*)::int AS n FROM items WHERE name = 'pear'` }, ctx);
    const list = out.response as any[];
    expect(list).toHaveLength(2);
    expect(list[0]).toMatchObject({ command: 'INSERT', row_count: 1 });
    expect(list[1].rows).toEqual([{ n: 1 }]);
    const withArgs = await runTool({ kind: 'postgres', auth: 'pg_new', command: `UPDATE items SET qty = $2 WHERE name = $1; SELECT qty FROM items WHERE name = $1`, args: ['pear', 7] }, ctx);
    const l2 = withArgs.response as any[];
    expect(l2[0].row_count).toBe(1);
    expect(l2[1].rows).toEqual([{ qty: 7 }]);
  });

  it('SQL errors are error outcomes with the sqlstate', async () => {
    const out = await runTool({ kind: 'postgres', auth: 'pg_new', command: 'SELECT * FROM no_such_table' }, ctx);
    expect(out.error).toMatchObject({ code: 'sql_error', data: { sqlstate: '42P01' } });
  });

  it('an unknown credential and a missing command are error outcomes', async () => {
    expect((await runTool({ kind: 'postgres', auth: 'nope', command: 'select 1' }, ctx)).error?.message).toMatch(/not found/);
    expect((await runTool({ kind: 'postgres', auth: 'pg_new' }, ctx)).error?.code).toBe('bad_config');
  });

  it('legacy db.insert / db.update / db.delete generate parameterised SQL with quoted identifiers', async () => {
    const evil = "x'); DROP TABLE items; --";
    const ins = await runTool({ kind: 'postgres', operation: 'insert', auth: 'pg_new', table: 'public.items', data: [{ name: evil, qty: 1, 'Odd "Name"': 'o' }, { name: 'kiwi', qty: 2 }] }, ctx);
    expect(ins.error).toBeUndefined();
    expect((ins.response as any).rows.map((r: any) => r.name)).toEqual([evil, 'kiwi']);
    expect((ins.response as any).rows[0]['Odd "Name"']).toBe('o');
    const upd = await runTool({ kind: 'postgres', operation: 'db.update', auth: 'pg_new', table: 'items', data: { qty: 10 }, where: { name: 'kiwi' } }, ctx);
    expect((upd.response as any).rows[0]).toMatchObject({ name: 'kiwi', qty: 10 });
    const updSql = await runTool({ kind: 'postgres', operation: 'update', auth: 'pg_new', table: 'items', data: { qty: 11 }, where: 'qty > $1', params: [9] }, ctx);
    expect((updSql.response as any).row_count).toBe(1);
    const del = await runTool({ kind: 'postgres', operation: 'delete', auth: 'pg_new', table: 'items', where: { name: evil } }, ctx);
    expect((del.response as any).row_count).toBe(1);
    const count = await runTool({ kind: 'postgres', auth: 'pg_new', command: 'SELECT count(*)::int AS n FROM items' }, ctx);
    expect((count.response as any).rows[0].n).toBeGreaterThan(0);
    const noWhere = await runTool({ kind: 'postgres', operation: 'delete', auth: 'pg_new', table: 'items' }, ctx);
    expect(noWhere.error?.code).toBe('bad_config');
  });

  it('a legacy connection given as a DSN works', async () => {
    const out = await runTool({ kind: 'postgres', connection: db.url, command: 'SELECT 2 AS two' }, ctx);
    expect((out.response as any).rows).toEqual([{ two: 2 }]);
  });
});
