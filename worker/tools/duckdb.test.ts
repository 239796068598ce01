import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runTool } from './index.js';
import { makeCtx } from '../testing/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'pf-duck-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The duckdb native library is mapped into this process (Linux, as CI). */
const duckdbLoaded = () => readFileSync('/proc/self/maps', 'utf8').includes('duckdb');

describe('duckdb tool', () => {
  it('loads its native library on the first duckdb call, not when the tools are imported', async () => {
    expect(duckdbLoaded()).toBe(false);
    const out = await runTool({ kind: 'duckdb', query: 'SELECT 1 AS one' }, makeCtx());
    expect((out.response as any).rows).toEqual([{ one: 1 }]);
    expect(duckdbLoaded()).toBe(true);
  });

  it('in memory: several statements, rows as objects, bigint conversion', async () => {
    const out = await runTool({ kind: 'duckdb', query: `CREATE TABLE t(a INTEGER, b VARCHAR); INSERT INTO t VALUES (1, 'x'), (2, 'y'); SELECT a, b, 9007199254740993::BIGINT AS huge, 7::BIGINT AS small, DATE '2024-01-02' AS d, [1,2] AS l, {'k': 1} AS s FROM t ORDER BY a` }, makeCtx());
    expect(out.error).toBeUndefined();
    const list = out.response as any[];
    expect(list).toHaveLength(3);
    expect(list[1].row_count).toBe(2);
    expect(list[2].rows[0]).toMatchObject({ a: 1, b: 'x', huge: '9007199254740993', small: 7, l: [1, 2], s: { k: 1 } });
    expect(String(list[2].rows[0].d)).toMatch(/^2024-01-02/);
  });

  it('DECIMAL: a number when exact, else the exact string', async () => {
    const out = await runTool({ kind: 'duckdb', query: 'SELECT 1.50::DECIMAL(10,2) AS a, 12345678901234567890.12::DECIMAL(38,2) AS b, NULL::DECIMAL(5,1) AS c' }, makeCtx());
    expect((out.response as any).rows).toEqual([{ a: 1.5, b: '12345678901234567890.12', c: null }]);
  });

  it('in memory is fresh per call', async () => {
    await runTool({ kind: 'duckdb', database: ':memory:', query: 'CREATE TABLE only_here(x INT)' }, makeCtx());
    const out = await runTool({ kind: 'duckdb', query: 'SELECT * FROM only_here' }, makeCtx());
    expect(out.error?.message).toMatch(/only_here/);
  });

  it('file database persists across calls; positional and named args', async () => {
    const database = join(dir, 'test.duckdb');
    await runTool({ kind: 'duckdb', database, query: 'CREATE TABLE kv(k VARCHAR, v INTEGER)' }, makeCtx());
    const ins = await runTool({ kind: 'duckdb', database, query: 'INSERT INTO kv VALUES (?, ?)', args: ['a', 1] }, makeCtx());
    expect(ins.error).toBeUndefined();
    await runTool({ kind: 'duckdb', database, query: 'INSERT INTO kv VALUES ($k, $v)', args: { k: 'b', v: 2 } }, makeCtx());
    const out = await runTool({ kind: 'duckdb', database, query: 'SELECT k, v FROM kv WHERE v >= $1 ORDER BY k', args: [1] }, makeCtx());
    expect((out.response as any).rows).toEqual([{ k: 'a', v: 1 }, { k: 'b', v: 2 }]);
  });

  it('errors are outcomes', async () => {
    expect((await runTool({ kind: 'duckdb', query: 'SELEC 1' }, makeCtx())).error?.code).toBe('duckdb_error');
    expect((await runTool({ kind: 'duckdb' }, makeCtx())).error?.code).toBe('bad_config');
  });
});
