/**
 * `playflow worker list` as users run it: the built CLI (dist/, `npx tsc -p .`) spawned against a
 * real server on a fresh PostgreSQL database, with registrations written through the API.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, startCliServer, type CliServer } from '../../test/cli/helpers.js';

let s: CliServer;

beforeAll(async () => {
  s = await startCliServer('pfcliwrk');
});
afterAll(async () => {
  await s?.close();
});

describe('playflow worker list', () => {
  it('lists servers and workers with online/offline and their pool; -o json is the API body', async () => {
    await s.api('POST', '/api/runtime/register', { kind: 'worker', name: 'gpu-0', info: { pool: 'gpu', concurrency: 4 } });
    await s.api('POST', '/api/runtime/register', { kind: 'worker', name: 'old-1', info: { pool: 'default' } });
    await s.server.core.deps.db.pool.query("UPDATE runtime SET last_heartbeat = now() - interval '5 minutes' WHERE name = 'old-1'");

    const t = await cli(['worker', 'list', ...s.auth]);
    expect(t.code, t.stderr).toBe(0);
    const lines = t.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^KIND\s+NAME\s+STATUS\s+POOL\s+LAST HEARTBEAT$/);
    const row = (name: string) => lines.find((l) => l.split(/\s+/)[1] === name)?.split(/\s{2,}/);
    expect(row('gpu-0')?.slice(0, 4)).toEqual(['worker', 'gpu-0', 'online', 'gpu']);
    expect(row('old-1')?.slice(0, 4)).toEqual(['worker', 'old-1', 'offline', 'default']);
    expect(row('old-1')?.[4]).toMatch(/^(29\d|30\d) s ago$/);
    // the server itself registers (its sweeper's heartbeat), with no pool
    expect(lines.some((l) => /^server\s+\S+\s+online\s+\d+ s ago$/.test(l))).toBe(true);

    const j = await cli(['worker', 'list', ...s.auth, '-o', 'json']);
    expect(j.code, j.stderr).toBe(0);
    const body = JSON.parse(j.stdout) as { runtimes: Array<{ name: string; live: boolean }>; count: number };
    expect(body.count).toBe(body.runtimes.length);
    expect(body.runtimes.find((r) => r.name === 'old-1')?.live).toBe(false);
  });
});
