/**
 * Migration runner: applies `server/store/migrations/NNN_name.sql` in numeric order at server
 * start. Safe with several replicas starting at once: the whole run holds a session advisory lock
 * (two-int key space, so it never collides with the per-execution bigint locks), applied files
 * are recorded in `schema_migrations`, and each file runs in its own transaction together with
 * its bookkeeping row. A file whose checksum changed after it was applied is reported, not re-run.
 *
 * Numbers 001–099 belong to the core, 100 and up to credentials/keychain/vars; all live in one
 * directory and one sequence.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { type Logger } from '../../common/logger.js';

/** pg_advisory_lock(MIGRATION_LOCK[0], MIGRATION_LOCK[1]) — 'PFLW', 'MIGR'. */
const MIGRATION_LOCK: [number, number] = [0x50464c57, 0x4d494752];

export interface MigrationFile {
  number: number;
  name: string;
  file: string;
  sql: string;
  checksum: string;
}

/**
 * Where the .sql files are: beside this module, or — when running the compiled `dist/` build,
 * which tsc does not copy .sql files into — the source tree's folder.
 */
export function defaultMigrationsDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const beside = path.join(here, 'migrations');
  if (existsSync(beside)) return beside;
  const fromDist = beside.replace(`${path.sep}dist${path.sep}`, path.sep);
  return existsSync(fromDist) ? fromDist : beside;
}

export async function loadMigrations(dir = defaultMigrationsDir()): Promise<MigrationFile[]> {
  const names = (await readdir(dir)).filter((f) => /^\d+_[\w.-]+\.sql$/.test(f));
  const files = await Promise.all(
    names.map(async (file) => {
      const sql = await readFile(path.join(dir, file), 'utf8');
      const number = Number.parseInt(file, 10);
      return { number, name: file.replace(/\.sql$/, ''), file, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
  files.sort((a, b) => a.number - b.number || a.file.localeCompare(b.file));
  for (let i = 1; i < files.length; i++) {
    if (files[i].number === files[i - 1].number) throw new Error(`two migrations numbered ${files[i].number}: ${files[i - 1].file}, ${files[i].file}`);
  }
  return files;
}

/** Applies every pending migration; returns the names applied by this call. */
export async function migrate(pool: pg.Pool, opts: { dir?: string; logger?: Logger } = {}): Promise<string[]> {
  const files = await loadMigrations(opts.dir);
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1, $2)', MIGRATION_LOCK);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        number integer PRIMARY KEY,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now())`);
      const { rows } = await client.query<{ number: number; name: string; checksum: string }>('SELECT number, name, checksum FROM schema_migrations');
      const done = new Map(rows.map((r) => [r.number, r]));
      for (const m of files) {
        const prev = done.get(m.number);
        if (prev) {
          if (prev.checksum !== m.checksum) opts.logger?.warn({ migration: m.file }, 'migration changed after it was applied; not re-run');
          continue;
        }
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO schema_migrations (number, name, checksum) VALUES ($1, $2, $3)', [m.number, m.name, m.checksum]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw new Error(`migration ${m.file} failed: ${(err as Error).message}`, { cause: err });
        }
        applied.push(m.name);
        opts.logger?.info({ migration: m.file }, 'migration applied');
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, $2)', MIGRATION_LOCK).catch(() => {});
    }
  } finally {
    client.release();
  }
  return applied;
}
