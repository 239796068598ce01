/**
 * The admitter's pace against a real PostgreSQL: every server runs it, so an idle server must not
 * query four times a second, while an execution that waits for a slot must still be started soon
 * after one frees.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { createDb, type ClosableDb } from '../db.js';
import { migrate } from '../store/migrate.js';
import { Admitter } from './limits.js';

let tdb: TestDatabase;
let db: ClosableDb;
let admitter: Admitter | undefined;
/** Passes run so far: each one reads the paths with waiting executions first. */
let passes = 0;
const admitted: string[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const q = (sql: string, params: unknown[] = []) => db.pool.query(sql, params);

beforeAll(async () => {
  tdb = await createTestDatabase('pf_admitter');
  db = createDb(tdb.url, { max: 3 });
  await migrate(db.pool);
  await q(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('t/limited', 1, 'x', '{}', 'h')`);
  const query = db.pool.query.bind(db.pool) as (...args: unknown[]) => unknown;
  (db.pool as { query: unknown }).query = (...args: unknown[]) => {
    if ((args[0] as { name?: string } | undefined)?.name === 'playflow.waiting_paths') passes++;
    return query(...args);
  };
});

afterEach(async () => {
  await admitter?.stop();
  admitter = undefined;
  await q('DELETE FROM execution');
});

afterAll(async () => {
  await db?.close();
  await tdb?.drop();
});

/** An admitter of limit 1 whose admission starts the execution as the service would. */
function startAdmitter(pace: { intervalMs: number; idleIntervalMs: number }): Admitter {
  passes = 0;
  admitted.length = 0;
  admitter = new Admitter({
    db, ...pace,
    limitOfCatalog: async () => 1,
    admit: async (id) => {
      const { rowCount } = await q(`UPDATE execution SET waiting = false, status = 'running' WHERE execution_id = $1 AND waiting`, [id]);
      if (rowCount) admitted.push(id);
      return rowCount === 1;
    },
  });
  admitter.start();
  return admitter;
}

async function execution(status: string, waiting: boolean): Promise<string> {
  const { rows } = await q(
    `INSERT INTO execution (catalog_id, path, version, payload, root_execution_id, status, waiting)
     VALUES (1, 't/limited', 1, '{}', 1, $1, $2) RETURNING execution_id::text AS id`, [status, waiting]);
  return rows[0].id as string;
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(10)) if (check()) return true;
  return check();
}

describe('admitter pace', () => {
  it('with nothing waiting, passes at the idle pace, not the short one', async () => {
    startAdmitter({ intervalMs: 20, idleIntervalMs: 60_000 });
    await sleep(500);
    // the first pass found nothing waiting; at the short pace there would have been about 25
    expect(passes).toBe(1);
  });

  it('while an execution waits, passes at the short pace and takes a slot soon after it frees', async () => {
    const running = await execution('running', false);
    const waiting = await execution('started', true);
    startAdmitter({ intervalMs: 20, idleIntervalMs: 60_000 });
    await sleep(300);
    expect(admitted).toEqual([]); // the slot is taken
    expect(passes).toBeGreaterThan(1); // the idle pace would have passed once
    await q(`UPDATE execution SET status = 'completed', finished_at = now() WHERE execution_id = $1`, [running]);
    // another server ended it: no kick here, only the short pace can find the free slot in time
    expect(await until(() => admitted.length > 0, 2_000)).toBe(true);
    expect(admitted).toEqual([waiting]);
    const before = passes;
    await sleep(300);
    expect(passes - before).toBeLessThanOrEqual(1); // nothing waits any more: back to the idle pace
  });

  it('a kick (a start held here) passes at once, whatever the pace', async () => {
    startAdmitter({ intervalMs: 20, idleIntervalMs: 60_000 });
    expect(await until(() => passes === 1, 2_000)).toBe(true);
    const waiting = await execution('started', true);
    admitter!.kick();
    expect(await until(() => admitted.length > 0, 2_000)).toBe(true);
    expect(admitted).toEqual([waiting]);
  });
});
