/**
 * The embedded PostgreSQL of `playflow dev`, started directly (no CLI around it).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedDb, type EmbeddedDb } from '../../cli/dev/embedded-db.js';

/** Process group and session of a pid, from /proc/<pid>/stat (fields 5 and 6). */
function groupAndSession(pid: number | 'self'): { pgrp: number; session: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // the command name (field 2) is in parentheses and may hold spaces: count from its end
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { pgrp: Number(fields[2]), session: Number(fields[3]) };
}

const tmp = mkdtempSync(join(tmpdir(), 'pf-embedded-'));
let db: EmbeddedDb | undefined;

afterAll(async () => {
  await db?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

describe('startEmbeddedDb', () => {
  it('runs the postmaster in a session of its own, so a terminal Ctrl-C reaches only playflow dev', async () => {
    db = await startEmbeddedDb(join(tmp, 'data'));
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      expect((await client.query<{ ok: number }>('SELECT 1 AS ok')).rows[0].ok).toBe(1);
    } finally {
      await client.end();
    }
    const postmaster = Number(readFileSync(join(db.clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const own = groupAndSession('self');
    const its = groupAndSession(postmaster);
    // a terminal signals its foreground process group; a postmaster in ours would get Ctrl-C too
    expect(its.pgrp).not.toBe(own.pgrp);
    expect(its.session).not.toBe(own.session);
    expect(its.session).toBe(postmaster);

    await db.stop();
    db = undefined;
    // stop() waits for the postmaster to exit
    expect(() => process.kill(postmaster, 0)).toThrow();
  }, 120_000);
});
