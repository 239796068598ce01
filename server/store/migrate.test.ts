import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { createDb, type ClosableDb } from '../db.js';
import { loadMigrations, migrate } from './migrate.js';

let tdb: TestDatabase;
const dbs: ClosableDb[] = [];
beforeAll(async () => {
  tdb = await createTestDatabase('pf_migrate');
});
afterAll(async () => {
  for (const d of dbs) await d.close();
  await tdb.drop();
});
const open = () => {
  const d = createDb(tdb.url, { max: 3 });
  dbs.push(d);
  return d;
};

/**
 * A fresh database migrated up to (not including) migration `n`, for a test that writes rows the
 * way that schema held them; `migrateRest` then applies `n` and every later file.
 */
async function databaseBefore(n: number) {
  const all = await loadMigrations();
  const dir = await mkdtemp(path.join(tmpdir(), `pfmig${n}-`));
  for (const f of all.filter((m) => m.number < n)) await writeFile(path.join(dir, f.file), f.sql);
  const t = await createTestDatabase(`pf_migrate_${n}`);
  const d = createDb(t.url, { max: 1 });
  await migrate(d.pool, { dir });
  return {
    pool: d.pool,
    async migrateRest() {
      for (const f of all.filter((m) => m.number >= n)) await writeFile(path.join(dir, f.file), f.sql);
      return migrate(d.pool, { dir });
    },
    async close() {
      await d.close();
      await t.drop();
    },
  };
}

describe('migrations', () => {
  it('are sorted by number', async () => {
    const files = await loadMigrations();
    expect(files[0].file).toBe('001_core.sql');
    expect(files.map((f) => f.number)).toEqual([...files.map((f) => f.number)].sort((a, b) => a - b));
  });

  it('apply once when several replicas start at the same time, and are idempotent', async () => {
    const replicas = [open(), open(), open(), open()];
    const results = await Promise.all(replicas.map((d) => migrate(d.pool)));
    const all = results.flat();
    const expected = (await loadMigrations()).map((f) => f.name);
    expect(all.sort()).toEqual([...expected].sort()); // each file applied by exactly one replica
    expect(await migrate(replicas[0].pool)).toEqual([]);
    const { rows } = await replicas[0].pool.query('SELECT number FROM schema_migrations ORDER BY number');
    expect(rows.map((r) => r.number)).toEqual((await loadMigrations()).map((f) => f.number));
    const t = await replicas[0].pool.query(`SELECT count(*) AS n FROM information_schema.tables WHERE table_name IN ('catalog','execution','event','execution_state','queue','runtime')`);
    expect(t.rows[0].n).toBe('6'); // int8 comes back as a string
  });

  it('keep credential ids within what a JSON number carries exactly (2^53 - 1)', async () => {
    const d = open();
    await migrate(d.pool);
    const insert = (id?: string) => d.pool.query(
      `INSERT INTO credential (${id ? 'id, ' : ''}name, type, data_enc, key_id) VALUES (${id ? '$2, ' : ''}$1, 'bearer', 'x', 'k') RETURNING id::text AS id`,
      id ? [`c${id}`, id] : ['c_next']);
    await expect(insert('9007199254740992')).rejects.toThrow(/credential_id_json_safe/);
    expect((await insert('9007199254740991')).rows[0].id).toBe('9007199254740991');
    await d.pool.query(`SELECT setval('credential_id_seq', 9007199254740991)`);
    await expect(insert()).rejects.toThrow(/reached maximum value/);
    const { rows } = await d.pool.query('SELECT count(*)::int AS n FROM credential WHERE id > 9007199254740991');
    expect(rows[0].n).toBe(0);
    await d.pool.query(`DELETE FROM credential WHERE name LIKE 'c%'`);
    await d.pool.query(`SELECT setval('credential_id_seq', 1, false)`);
  });

  it('run each file in its own transaction: a failing file leaves nothing behind, earlier files stay', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'pfmig-'));
    await writeFile(path.join(dir, '001_a.sql'), 'CREATE TABLE mig_a (x int);');
    await writeFile(path.join(dir, '002_b.sql'), 'CREATE TABLE mig_b (x int); SELECT no_such_function();');
    const tdb2 = await createTestDatabase('pf_migrate_fail');
    const d = createDb(tdb2.url, { max: 1 });
    try {
      await expect(migrate(d.pool, { dir })).rejects.toThrow(/002_b.sql/);
      const { rows } = await d.pool.query(`SELECT to_regclass('mig_a') AS a, to_regclass('mig_b') AS b`);
      expect(rows[0]).toEqual({ a: 'mig_a', b: null });
      await writeFile(path.join(dir, '002_b.sql'), 'CREATE TABLE mig_b (x int);');
      expect(await migrate(d.pool, { dir })).toEqual(['002_b']);
    } finally {
      await d.close();
      await tdb2.drop();
    }
  });

  it('260 moves the step summaries out of the execution row into execution_step, row for row', async () => {
    const d = await databaseBefore(260);
    try {
      const cat = await d.pool.query(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('m/x', 1, '', '{}', 'h') RETURNING catalog_id`);
      const steps = { a: { status: 'completed', runs: 1, result: { n: 1 } }, b: { status: 'running', runs: 2 } };
      const ex = await d.pool.query(
        `INSERT INTO execution (catalog_id, path, version, root_execution_id, steps) VALUES ($1, 'm/x', 1, 0, $2), ($1, 'm/x', 1, 0, '{}') RETURNING execution_id`,
        [cat.rows[0].catalog_id, JSON.stringify(steps)]);
      expect(await d.migrateRest()).toContain('260_execution_step');
      const { rows } = await d.pool.query(
        'SELECT execution_id, step, summary FROM execution_step ORDER BY execution_id, step');
      expect(rows).toEqual([
        { execution_id: ex.rows[0].execution_id, step: 'a', summary: steps.a },
        { execution_id: ex.rows[0].execution_id, step: 'b', summary: steps.b },
      ]);
      // the column stays for servers of the previous version during a rolling upgrade
      const col = await d.pool.query(`SELECT count(*) AS n FROM information_schema.columns WHERE table_name = 'execution' AND column_name = 'steps'`);
      expect(col.rows[0].n).toBe('1');
      // the summaries go with their execution
      await d.pool.query('DELETE FROM execution WHERE execution_id = $1', [ex.rows[0].execution_id]);
      expect((await d.pool.query('SELECT count(*) AS n FROM execution_step')).rows[0].n).toBe('0');
    } finally {
      await d.close();
    }
  });

  it('330 ends the steps that ended executions left running: summaries say cancelled, their stale snapshots go', async () => {
    const d = await databaseBefore(330);
    try {
      const cat = await d.pool.query(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('m/x', 1, '', '{}', 'h') RETURNING catalog_id`);
      const ids: Record<string, string> = {};
      for (const status of ['cancelled', 'failed', 'running', 'completed']) {
        const r = await d.pool.query(`INSERT INTO execution (catalog_id, path, version, root_execution_id, status) VALUES ($1, 'm/x', 1, 0, $2) RETURNING execution_id`, [cat.rows[0].catalog_id, status]);
        ids[status] = r.rows[0].execution_id;
        const steps = { a: { status: 'completed', runs: 1 }, b: { status: 'running', runs: 1 } };
        for (const [step, summary] of Object.entries(steps)) {
          await d.pool.query('INSERT INTO execution_step (execution_id, step, summary) VALUES ($1, $2, $3)', [ids[status], step, JSON.stringify(summary)]);
        }
        await d.pool.query('INSERT INTO execution_state (execution_id, seq, state) VALUES ($1, 5, $2)', [ids[status], JSON.stringify({ status, steps })]);
      }
      expect(await d.migrateRest()).toContain('330_ended_steps_not_running');
      const { rows } = await d.pool.query(`SELECT execution_id, step, summary->>'status' AS status FROM execution_step ORDER BY execution_id, step`);
      const statusOf = (ex: string, step: string) => rows.find((r) => r.execution_id === ex && r.step === step)?.status;
      for (const ended of ['cancelled', 'failed']) {
        expect(statusOf(ids[ended], 'b'), ended).toBe('cancelled');
        expect(statusOf(ids[ended], 'a'), ended).toBe('completed');
      }
      // a running execution's running step is running; nothing else changed
      expect(statusOf(ids.running, 'b')).toBe('running');
      expect(statusOf(ids.completed, 'b')).toBe('running');
      const snaps = await d.pool.query('SELECT execution_id FROM execution_state ORDER BY execution_id');
      expect(snaps.rows.map((r) => r.execution_id)).toEqual([ids.running, ids.completed]);
    } finally {
      await d.close();
    }
  });

  it('370 keeps the log and its event ids, drops the event_id index, and keeps deletes publishable', async () => {
    const d = await databaseBefore(370);
    try {
      const cat = await d.pool.query(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('m/x', 1, '', '{}', 'h') RETURNING catalog_id`);
      const ex = await d.pool.query(`INSERT INTO execution (catalog_id, path, version, root_execution_id) VALUES ($1, 'm/x', 1, 0) RETURNING execution_id`, [cat.rows[0].catalog_id]);
      const id = ex.rows[0].execution_id;
      // as a server of the previous version inserts: event_id from its sequence
      const before = await d.pool.query(`INSERT INTO event (execution_id, seq, name) VALUES ($1, 1, 'execution_started'), ($1, 2, 'step.enter') RETURNING event_id`, [id]);
      expect(await d.migrateRest()).toContain('370_event_key');

      const idx = await d.pool.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'event' ORDER BY indexname`);
      expect(idx.rows.map((r) => r.indexname)).toEqual(['event_execution_id_seq_key']);
      const after = await d.pool.query(`INSERT INTO event (execution_id, seq, name) VALUES ($1, 3, 'step.exit') RETURNING event_id`, [id]);
      expect(BigInt(after.rows[0].event_id)).toBeGreaterThan(BigInt(before.rows[1].event_id));
      const { rows } = await d.pool.query('SELECT event_id, seq FROM event WHERE execution_id = $1 ORDER BY seq', [id]);
      expect(rows).toEqual([...before.rows, ...after.rows].map((r, i) => ({ event_id: r.event_id, seq: i + 1 })));
      // still one event per (execution, seq)
      await expect(d.pool.query(`INSERT INTO event (execution_id, seq, name) VALUES ($1, 3, 'again')`, [id])).rejects.toThrow(/event_execution_id_seq_key/);

      // a table without a replica identity refuses deletes once a publication covers it
      await d.pool.query('CREATE PUBLICATION pf_migrate_370 FOR TABLE event');
      try {
        await d.pool.query('DELETE FROM execution WHERE execution_id = $1', [id]);
        expect((await d.pool.query('SELECT count(*) AS n FROM event')).rows[0].n).toBe('0');
      } finally {
        await d.pool.query('DROP PUBLICATION pf_migrate_370');
      }
    } finally {
      await d.close();
    }
  });

  it('leave the decision functions on generic plans (380), which a CREATE OR REPLACE without SET would undo', async () => {
    const d = open();
    await migrate(d.pool);
    const { rows } = await d.pool.query(`SELECT proname, proconfig FROM pg_proc WHERE proname LIKE 'playflow\\_%decision%' ORDER BY proname`);
    expect(rows).toEqual(['playflow_decision_current', 'playflow_write_decision', 'playflow_write_decision_or_stale']
      .map((proname) => ({ proname, proconfig: ['plan_cache_mode=force_generic_plan'] })));
  });

  it('ids travel as strings', async () => {
    const d = open();
    const { rows } = await d.pool.query(`SELECT 9007199254740993::bigint AS big`);
    expect(rows[0].big).toBe('9007199254740993');
  });
});
