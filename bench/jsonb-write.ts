/**
 * What PostgreSQL pays to store a large JSON value (issue 20, large results): parsing the text into
 * jsonb, storing it with pglz or lz4 TOAST compression, and storing eight copies of one parsed value
 * (what a decision write does with a shared value, store/shared-values.ts) against parsing each copy.
 * Prints, never asserts.
 *
 *   npm run build && node dist/bench/jsonb-write.js [rounds=4]
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test); creates and drops its tables.
 */
import pg from 'pg';

const ROUNDS = Number(process.argv[2] ?? 4);
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

const shapes: Record<string, string> = {
  'strings (30k × 1,000 chars)': JSON.stringify(Array.from({ length: 30_000 }, () => 'x'.repeat(1000))),
  'rows (430k small objects)': JSON.stringify(Array.from({ length: 430_000 }, (_, i) => ({ id: i, name: `row ${i}`, score: i + 0.5, ok: i % 2 === 0 }))),
};

const c = new pg.Client({ connectionString: url });
await c.connect();
try {
  await c.query(`DROP TABLE IF EXISTS bench_jsonb_pglz, bench_jsonb_lz4;
    CREATE TABLE bench_jsonb_pglz (v jsonb COMPRESSION pglz);
    CREATE TABLE bench_jsonb_lz4 (v jsonb COMPRESSION lz4)`);
  const timed = async (sql: string, values: unknown[]) => {
    const t0 = performance.now();
    await c.query(sql, values);
    return Math.round(performance.now() - t0);
  };
  for (const [shape, text] of Object.entries(shapes)) {
    const rows: Record<string, number[]> = { parse: [], pglz: [], lz4: [], 'eight copies, one parse': [], 'eight copies, eight parses': [] };
    for (let i = 0; i < ROUNDS; i++) {
      rows.parse!.push(await timed('SELECT jsonb_typeof($1::jsonb)', [text]));
      rows.pglz!.push(await timed('INSERT INTO bench_jsonb_pglz (v) VALUES ($1::jsonb)', [text]));
      rows.lz4!.push(await timed('INSERT INTO bench_jsonb_lz4 (v) VALUES ($1::jsonb)', [text]));
      rows['eight copies, one parse']!.push(await timed(
        `INSERT INTO bench_jsonb_lz4 (v) SELECT jsonb_set('{"n": 1}'::jsonb, '{result}', $1::jsonb -> 0) FROM generate_series(1, 8)`, [`[${text}]`]));
      rows['eight copies, eight parses']!.push(await timed(
        'INSERT INTO bench_jsonb_lz4 (v) VALUES ($1::jsonb), ($2::jsonb), ($3::jsonb), ($4::jsonb), ($5::jsonb), ($6::jsonb), ($7::jsonb), ($8::jsonb)',
        Array.from({ length: 8 }, () => text)));
      await c.query('TRUNCATE bench_jsonb_pglz, bench_jsonb_lz4');
    }
    console.log(`${shape}, ${(text.length / 1e6).toFixed(1)} MB of JSON (ms per statement, ${ROUNDS} rounds):`);
    for (const [what, ms] of Object.entries(rows)) console.log(`  ${what.padEnd(28)} ${ms.join(', ')}`);
  }
} finally {
  await c.query('DROP TABLE IF EXISTS bench_jsonb_pglz, bench_jsonb_lz4');
  await c.end();
}
