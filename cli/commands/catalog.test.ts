/**
 * `playflow catalog versions` and `playflow catalog delete playbook` as users run them: the built
 * CLI (dist/, `npx tsc -p .`) spawned against a real server on a fresh PostgreSQL database.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, ROOT, startCliServer, type CliServer } from '../../test/cli/helpers.js';

const EXAMPLE = join(ROOT, 'examples/hello_world.yaml');

let s: CliServer;
let content: string;

beforeAll(async () => {
  s = await startCliServer('pfclicat');
  content = await readFile(EXAMPLE, 'utf8');
});
afterAll(async () => {
  await s?.close();
});

/** Registers the example at `path`, `n` versions of it (each with changed content). */
async function registerVersions(path: string, n: number): Promise<void> {
  for (let i = 1; i <= n; i++) {
    const r = await s.api('POST', '/api/catalog/playbook', { path, content: content.replace('Greets someone, then shouts it.', `Greets, take ${i}.`) });
    expect(r).toMatchObject({ path, version: i, created: true });
  }
}

describe('playflow catalog versions', () => {
  it('lists every version, newest first (table and json)', async () => {
    await registerVersions('cli/versions/two', 2);
    // the same content again: no new version
    await s.api('POST', '/api/catalog/playbook', { path: 'cli/versions/two', content: content.replace('Greets someone, then shouts it.', 'Greets, take 2.') });
    const api = await s.api<{ path: string; versions: Array<{ catalog_id: string; version: number; created_at: string }> }>('GET', '/api/catalog/versions/cli/versions/two');

    const t = await cli(['catalog', 'versions', 'cli/versions/two', ...s.auth]);
    expect(t.code, t.stderr).toBe(0);
    const lines = t.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^VERSION\s+CATALOG_ID\s+CREATED$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/))).toEqual(api.versions.map((v) => [String(v.version), v.catalog_id, v.created_at]));
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(['2', '1']);

    const j = await cli(['catalog', 'versions', 'cli/versions/two', ...s.auth, '-o', 'json']);
    expect(j.code, j.stderr).toBe(0);
    expect(JSON.parse(j.stdout)).toEqual(api);
    expect(api.versions.map((v) => v.version)).toEqual([2, 1]);
  });

  it('an unknown path is not found (exit 1)', async () => {
    const r = await cli(['catalog', 'versions', 'cli/versions/nope', ...s.auth]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("not found (404): playbook 'cli/versions/nope' not found");
    expect(r.stdout).toBe('');
  });
});

describe('playflow catalog delete playbook', () => {
  it('removes every version: get, versions and list no longer find it', async () => {
    await registerVersions('cli/delete/me', 2);
    await registerVersions('cli/delete/other', 1);
    const r = await cli(['catalog', 'delete', 'playbook', 'cli/delete/me', ...s.auth]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('deleted: cli/delete/me\n');

    const get = await cli(['catalog', 'get', 'playbook', 'cli/delete/me', ...s.auth]);
    expect(get.code).toBe(1);
    expect(get.stderr).toContain("not found (404): playbook 'cli/delete/me' not found");
    const old = await cli(['catalog', 'get', 'playbook', 'cli/delete/me', '--version', '1', ...s.auth]);
    expect(old.code).toBe(1);
    const versions = await cli(['catalog', 'versions', 'cli/delete/me', ...s.auth]);
    expect(versions.code).toBe(1);
    const list = await cli(['catalog', 'list', '--prefix', 'cli/delete/', ...s.auth, '-o', 'json']);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout).playbooks.map((p: { path: string }) => p.path)).toEqual(['cli/delete/other']);
  });

  it('-o json / -o yaml print the API body', async () => {
    await registerVersions('cli/delete/json', 1);
    const j = await cli(['catalog', 'delete', 'playbook', 'cli/delete/json', ...s.auth, '-o', 'json']);
    expect(j.code, j.stderr).toBe(0);
    expect(JSON.parse(j.stdout)).toEqual({ status: 'deleted', path: 'cli/delete/json' });
    await registerVersions('cli/delete/yaml', 1);
    const y = await cli(['catalog', 'delete', 'playbook', 'cli/delete/yaml', ...s.auth, '-o', 'yaml']);
    expect(y.code, y.stderr).toBe(0);
    expect(y.stdout).toBe('status: deleted\npath: cli/delete/yaml\n');
  });

  it('a path not in the catalog (or already deleted) is not found (exit 1)', async () => {
    const r = await cli(['catalog', 'delete', 'playbook', 'cli/delete/never', ...s.auth]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("not found (404): playbook 'cli/delete/never' not found");
    expect(r.stdout).toBe('');
    const again = await cli(['catalog', 'delete', 'playbook', 'cli/delete/me', ...s.auth, '-o', 'json']);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr)).toMatchObject({ error: { code: 'not_found', status: 404 } });
  });

  it('--owner: removes only what that resource owns (409 otherwise); a malformed owner is refused', async () => {
    const owner = { kind: 'Playbook', namespace: 'team-a', name: 'owned' };
    await s.api('POST', '/api/catalog/playbook', { path: 'cli/delete/owned', content, owner });
    await registerVersions('cli/delete/ownerless', 1);

    const other = await cli(['catalog', 'delete', 'playbook', 'cli/delete/owned', '--owner', 'Playbook/team-b/owned', ...s.auth]);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('owned_by_other (409)');
    const ownerless = await cli(['catalog', 'delete', 'playbook', 'cli/delete/ownerless', '--owner', 'Playbook/team-a/owned', ...s.auth]);
    expect(ownerless.code).toBe(1);
    expect(ownerless.stderr).toContain('owned_by_other (409)');
    const bad = await cli(['catalog', 'delete', 'playbook', 'cli/delete/owned', '--owner', 'team-a/owned', ...s.auth]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe('error: --owner must be Kind/namespace/name, got "team-a/owned"\n');
    // nothing was removed by the refusals
    expect(await s.api('GET', '/api/catalog/playbook/cli/delete/owned')).toMatchObject({ version: 1 });
    expect(await s.api('GET', '/api/catalog/playbook/cli/delete/ownerless')).toMatchObject({ version: 1 });

    const mine = await cli(['catalog', 'delete', 'playbook', 'cli/delete/owned', '--owner', 'Playbook/team-a/owned', ...s.auth]);
    expect(mine.code, mine.stderr).toBe(0);
    expect(mine.stdout).toBe('deleted: cli/delete/owned\n');
    expect((await cli(['catalog', 'get', 'playbook', 'cli/delete/owned', ...s.auth])).code).toBe(1);
  });
});
