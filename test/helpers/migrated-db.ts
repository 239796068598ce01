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
