import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bareExecution, migratedDb, type MigratedDb } from '../../test/helpers/migrated-db.js';
import type { ClosableDb } from '../db.js';
import { loadSnapshot } from './events.js';

let t: MigratedDb;
let db: ClosableDb;
beforeAll(async () => {
  t = await migratedDb('pf_snapshot');
  db = t.db;
});
afterAll(() => t?.close());

const execution = () => bareExecution(db);

describe('loadSnapshot', () => {
  it('the newer snapshot wins, whichever layout holds it; at the same seq the current layout, with its values put back', async () => {
    const id = await execution();
    await db.pool.query(`INSERT INTO execution_state (execution_id, seq, state) VALUES ($1, 7, '{"layout": "old", "result": 1}')`, [id]);
    await db.pool.query(`INSERT INTO execution_snapshot (execution_id, seq, state) VALUES ($1, 6, '{"layout": "current"}')`, [id]);
    await db.pool.query(`INSERT INTO execution_snapshot_value (execution_id, path, value) VALUES ($1, '["result"]', '{"big": true}')`, [id]);
    expect(await loadSnapshot(db.pool, id)).toEqual({ seq: 7, state: { layout: 'old', result: 1 } });

    // both at seq 7, in every order of the rows on disk
    for (let i = 0; i < 5; i++) {
      await db.pool.query('UPDATE execution_snapshot SET seq = 7 WHERE execution_id = $1', [id]);
      await db.pool.query('UPDATE execution_state SET seq = 7 WHERE execution_id = $1', [id]);
      expect(await loadSnapshot(db.pool, id)).toEqual({ seq: 7, state: { layout: 'current', result: { big: true } } });
    }
  });
});
