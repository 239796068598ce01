import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { createDb, type ClosableDb } from '../db.js';
import { AppError } from '../errors.js';
import { PgCatalogService } from './catalog-service.js';
import { migrate } from './migrate.js';

let tdb: TestDatabase;
let db: ClosableDb;
let catalog: PgCatalogService;

beforeAll(async () => {
  tdb = await createTestDatabase('pf_catalog');
  db = createDb(tdb.url, { max: 4 });
  await migrate(db.pool);
  catalog = new PgCatalogService(db);
});
afterAll(async () => {
  await db.close();
  await tdb.drop();
});

const pb = (name: string, path?: string, extra = '') => `apiVersion: playflow.io/v2
kind: Playbook
metadata:
  name: ${name}
${path ? `  path: ${path}\n` : ''}  description: the ${name} playbook
workflow:
  - step: start
    tool:
      kind: python
      code: "result = 1${extra}"
`;

async function rejection(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }
  throw new Error('expected a rejection');
}

describe('catalog service', () => {
  it('registers under metadata.path, returns the same version for identical content, a new one otherwise', async () => {
    const a = await catalog.register(pb('one', 'demo/one'));
    expect(a.created).toBe(true);
    expect(a.entry).toMatchObject({ path: 'demo/one', version: 1 });
    expect(typeof a.entry.catalog_id).toBe('string');
    const again = await catalog.register(pb('one', 'demo/one'));
    expect(again.created).toBe(false);
    expect(again.entry.catalog_id).toBe(a.entry.catalog_id);
    const b = await catalog.register(pb('one', 'demo/one', ' + 1'));
    expect(b).toMatchObject({ created: true, entry: { version: 2 } });
    // content identical to v1 but v2 is the latest: a new version (v3)
    const c = await catalog.register(pb('one', 'demo/one'));
    expect(c).toMatchObject({ created: true, entry: { version: 3 } });
  });

  it('the request path wins over metadata.path (with a warning); without either, metadata.name; a bad path is a 400', async () => {
    const r = await catalog.register(pb('two', 'demo/ignored'), 'demo/two');
    expect(r.entry.path).toBe('demo/two');
    expect(r.entry.playbook.metadata.path).toBe('demo/two');
    expect(r.warnings.some((w) => w.path === 'metadata.path')).toBe(true);
    const byName = await catalog.register(pb('three'));
    expect(byName.entry.path).toBe('three');
    await catalog.remove('three'); // keep the listing test's catalog as it expects
    expect((await rejection(catalog.register(pb('x'), '/bad//path'))).statusCode).toBe(400);
  });

  it('rejects an invalid playbook with 422 listing every problem with its path', async () => {
    const bad = `apiVersion: playflow.io/v2
kind: Playbook
metadata:
  name: bad
  path: demo/bad
workflow:
  - step: a
    tool: { kind: nope }
    next: missing_step
  - step: a
`;
    const e = await rejection(catalog.register(bad));
    expect(e.statusCode).toBe(422);
    expect(e.code).toBe('playbook_invalid');
    const problems = e.details as Array<{ path: string; message: string }>;
    expect(problems.length).toBeGreaterThanOrEqual(2);
    for (const p of problems) expect(typeof p.path).toBe('string');
    expect(problems.some((p) => p.path.startsWith('workflow'))).toBe(true);
    expect(await catalog.get('demo/bad')).toBeNull();
  });

  it('gets the latest or a given version, by path and by id', async () => {
    const latest = await catalog.get('demo/one');
    expect(latest?.version).toBe(3);
    expect((await catalog.get('demo/one', 2))?.version).toBe(2);
    expect(await catalog.get('demo/one', 9)).toBeNull();
    expect(await catalog.get('demo/none')).toBeNull();
    const byId = await catalog.getById(latest!.catalog_id);
    expect(byId?.content).toBe(latest!.content);
    expect(byId?.playbook.metadata.name).toBe('one');
  });

  it('lists the latest version per path, by prefix, with paging', async () => {
    await catalog.register(pb('p1', 'other/p1'));
    await catalog.register(pb('p_x', 'demo_/x'));
    const all = await catalog.list();
    expect(all.map((s) => s.path)).toEqual(['demo/one', 'demo/two', 'demo_/x', 'other/p1']);
    expect(all[0]).toMatchObject({ version: 3, name: 'one', description: 'the one playbook' });
    expect((await catalog.list({ prefix: 'demo/' })).map((s) => s.path)).toEqual(['demo/one', 'demo/two']);
    // `_` in a prefix is literal, not a LIKE wildcard
    expect((await catalog.list({ prefix: 'demo_' })).map((s) => s.path)).toEqual(['demo_/x']);
    expect((await catalog.list({ limit: 2, offset: 1 })).map((s) => s.path)).toEqual(['demo/two', 'demo_/x']);
  });

  it('remove hides a path from get/list; the rows stay for running executions; registering again works', async () => {
    const before = await catalog.get('other/p1');
    expect(await catalog.remove('other/p1')).toBe(true);
    expect(await catalog.remove('other/p1')).toBe(false);
    expect(await catalog.get('other/p1')).toBeNull();
    expect((await catalog.list()).map((s) => s.path)).not.toContain('other/p1');
    const { rows } = await db.pool.query('SELECT deleted_at FROM catalog WHERE catalog_id = $1', [before!.catalog_id]);
    expect(rows[0].deleted_at).not.toBeNull();
    const again = await catalog.register(pb('p1', 'other/p1'));
    expect(again).toMatchObject({ created: true, entry: { version: 2 } }); // versions are never reused
    expect((await catalog.get('other/p1'))?.version).toBe(2);
  });

  it('concurrent registrations of one path get distinct versions', async () => {
    const results = await Promise.all([1, 2, 3, 4, 5].map((i) => catalog.register(pb('c', 'demo/concurrent', ` + ${i}`))));
    expect(results.map((r) => r.entry.version).sort()).toEqual([1, 2, 3, 4, 5]);
  });
});
