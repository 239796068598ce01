import { createDb, type ClosableDb } from '../../server/db.js';
import { migrate } from '../../server/store/migrate.js';
import { createTestDatabase } from './pg.js';

/** A suite's own migrated database with a pool on it; `close` ends the pool, then drops it. */
export interface MigratedDb {
  db: ClosableDb;
  close(): Promise<void>;
}

export async function migratedDb(prefix: string, max = 2): Promise<MigratedDb> {
  const tdb = await createTestDatabase(prefix);
  const db = createDb(tdb.url, { max });
  await migrate(db.pool);
  return {
    db,
    async close() {
      await db.close();
      await tdb.drop();
    },
  };
}

/** An execution row (and the catalog row it needs) with nothing else: for tests of the store's statements. */
export async function bareExecution(db: ClosableDb): Promise<string> {
  const { rows: [cat] } = await db.pool.query(`INSERT INTO catalog (path, version, content, payload, content_hash) VALUES ('t/' || gen_random_uuid(), 1, '', '{}', 'h') RETURNING catalog_id::text AS id`);
  const { rows: [x] } = await db.pool.query(`INSERT INTO execution (catalog_id, path, version, root_execution_id) VALUES ($1, 't/x', 1, 0) RETURNING execution_id::text AS id`, [cat.id]);
  return x.id;
}
