import pg from 'pg';
import { randomBytes } from 'node:crypto';

/** The admin connection of the machine's PostgreSQL (CI uses the same). */
export const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/**
 * A fresh database per suite, so suites run in parallel without seeing each other's rows.
 * Dropped with FORCE so a leaked pool connection cannot block the clean-up (after the sessions
 * already closing have gone).
 */
export async function createTestDatabase(prefix = 'pf'): Promise<TestDatabase> {
  const name = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`.toLowerCase();
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      try {
        // pool.end() resolves once its clients have sent Terminate, before their backends exit: a
        // FORCE that signals such a backend sends a FATAL to a socket its client is still reading,
        // an uncaught error in the suite. So the sessions closing anyway are given time to go.
        for (const until = Date.now() + 2000; Date.now() < until; await new Promise((r) => setTimeout(r, 20))) {
          const { rows } = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
          if (rows[0].n === 0) break;
        }
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * What `fn` sends to PostgreSQL, one entry per query (a simple query of several statements is one
 * round trip, one entry): the text, or the name of a named statement. Every client of this process
 * is seen; `ignore` drops the background statements of a suite's own timers.
 */
export async function recordQueries<T>(fn: () => Promise<T>, ignore: RegExp = /^$/): Promise<{ value: T; sent: string[] }> {
  const sent: string[] = [];
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, config: unknown, ...rest: unknown[]) {
    const c = config as { text?: string; name?: string } | string;
    const text = typeof c === 'string' ? c : c?.name ?? c?.text ?? '';
    if (!ignore.test(text)) sent.push(text);
    return (query as (...a: unknown[]) => unknown).call(this, config, ...rest);
  } as typeof query;
  try {
    return { value: await fn(), sent };
  } finally {
    pg.Client.prototype.query = query;
  }
}
