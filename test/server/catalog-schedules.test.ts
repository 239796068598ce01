/**
 * A registration and the sync of the schedules its playbook declares are one unit (one
 * transaction): a declaration refused there — `<path>:<name>` longer than 253 characters (400), or
 * a name another source holds (409) — stores no version and changes no schedule, and the error
 * names the playbook's field. A removal takes its schedules in its own transaction likewise. Real
 * core and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.close();
});

const declaring = (path: string, schedules: string) => `${simplePlaybook(path)}schedules:\n${schedules}`;

/** Every catalog and schedule row: equal before and after means the request stored nothing. */
async function stored(): Promise<unknown> {
  const pool = s.core.deps.db.pool;
  const catalog = (await pool.query('SELECT catalog_id, path, version, deleted_at FROM catalog ORDER BY catalog_id')).rows;
  const schedule = (await pool.query('SELECT * FROM schedule ORDER BY name')).rows;
  return { catalog, schedule };
}

async function expectNotStored(path: string): Promise<void> {
  const versions = await s.call('GET', `/api/catalog/versions/${path}`);
  expect(versions.statusCode, `stored: ${versions.body}`).toBe(404);
  expect((await s.call('GET', `/api/catalog/playbook/${path}`)).statusCode).toBe(404);
  expect((await s.call('POST', '/api/run/playbook', { path })).statusCode).toBe(404);
}

describe('registration with declared schedules', () => {
  it('`<path>:<name>` over 253 characters: 400 naming schedules[i].name, and no version is stored', async () => {
    const path = `a/${'b'.repeat(246)}`; // 248 characters: `a.bbb…:ok` is 251, `a.bbb…:nightly` 256
    const before = await stored();
    const r = await s.call('POST', '/api/catalog/playbook', {
      content: declaring(path, '  - {name: ok, cron: "0 0 1 * * *"}\n  - {name: nightly, cron: "0 0 2 * * *"}\n'),
    });
    expect(r.statusCode, r.body).toBe(400);
    await expectNotStored(path);
    expect(await stored()).toEqual(before);
    expect(r.json().error.details).toMatchObject({ field: 'schedules[1].name' });
    expect(r.json().error.message).toMatch(/^schedules\[1\]\.name: schedule name 'a\.b+:nightly' is invalid: .*at most 253 \(it is 256/);
  });

  it('a name an API schedule holds: 409 owned_elsewhere naming schedules[i].name, and no version is stored', async () => {
    const put = await s.call('PUT', '/api/schedules/audit.p3:nightly', { cron: '0 0 4 * * *', path: 'audit/other' });
    expect(put.statusCode, put.body).toBe(201);
    const before = await stored();
    const r = await s.call('POST', '/api/catalog/playbook', { content: declaring('audit/p3', '  - {name: nightly, cron: "0 0 2 * * *"}\n') });
    expect(r.statusCode, r.body).toBe(409);
    await expectNotStored('audit/p3');
    expect(await stored()).toEqual(before);
    expect(r.json().error).toMatchObject({ code: 'owned_elsewhere', details: { source: 'api', field: 'schedules[0].name' } });
    expect(r.json().error.message).toContain('schedules[0].name');
    expect((await s.call('GET', '/api/schedules/audit.p3:nightly')).json()).toMatchObject({ source: 'api', cron: '0 0 4 * * *', path: 'audit/other' });
  });

  it('a new version refused so leaves the previous version and its schedules as they were', async () => {
    const ok = await s.call('POST', '/api/catalog/playbook', { content: declaring('audit/p4', '  - {name: hourly, cron: "0 0 * * * *"}\n') });
    expect(ok.statusCode, ok.body).toBe(201);
    expect((await s.call('PUT', '/api/schedules/audit.p4:nightly', { cron: '0 0 4 * * *', path: 'audit/p4' })).statusCode).toBe(201);
    const before = await stored();
    // v2 drops `hourly` (its sync would remove it) and declares the API's `nightly`
    const r = await s.call('POST', '/api/catalog/playbook', { content: declaring('audit/p4', '  - {name: nightly, cron: "0 0 2 * * *"}\n') });
    expect(r.statusCode, r.body).toBe(409);
    expect(await stored()).toEqual(before);
    expect((await s.call('GET', '/api/catalog/versions/audit/p4')).json().versions.map((v: { version: number }) => v.version)).toEqual([1]);
    expect((await s.call('GET', '/api/schedules/audit.p4:hourly')).json()).toMatchObject({ source: 'playbook', cron: '0 0 * * * *' });
  });

  it('accepted: the version and its schedules are stored together', async () => {
    const path = `a/${'c'.repeat(240)}`; // `a.ccc…:nightly` is 250
    const r = await s.call('POST', '/api/catalog/playbook', { content: declaring(path, '  - {name: nightly, cron: "0 0 2 * * *"}\n') });
    expect(r.statusCode, r.body).toBe(201);
    const name = `${path.replace('/', '.')}:nightly`;
    expect((await s.call('GET', `/api/schedules/${name}`)).json()).toMatchObject({ name, source: 'playbook', path });
    expect((await s.call('GET', `/api/catalog/versions/${path}`)).json().versions).toHaveLength(1);
  });
});

describe('removal of a playbook with declared schedules', () => {
  it('removes the path and its schedules in one transaction: when the schedules cannot go, the path stays', async () => {
    const ok = await s.call('POST', '/api/catalog/playbook', { content: declaring('audit/p5', '  - {name: nightly, cron: "0 0 2 * * *"}\n') });
    expect(ok.statusCode, ok.body).toBe(201);
    const pool = s.core.deps.db.pool;
    // a real failure inside the removal, after the path's row was marked deleted: PostgreSQL
    // refuses to delete this schedule (and only this one)
    await pool.query(`CREATE FUNCTION refuse_p5() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF OLD.name = 'audit.p5:nightly' THEN RAISE EXCEPTION 'schedule audit.p5:nightly is held'; END IF; RETURN OLD; END $$`);
    await pool.query('CREATE TRIGGER refuse_p5 BEFORE DELETE ON schedule FOR EACH ROW EXECUTE FUNCTION refuse_p5()');
    try {
      const before = await stored();
      const r = await s.call('DELETE', '/api/catalog/playbook/audit/p5');
      expect(r.statusCode, r.body).toBe(500);
      expect(await stored()).toEqual(before);
      expect((await s.call('GET', '/api/catalog/playbook/audit/p5')).statusCode).toBe(200);
    } finally {
      await pool.query('DROP TRIGGER refuse_p5 ON schedule');
      await pool.query('DROP FUNCTION refuse_p5()');
    }
    const r = await s.call('DELETE', '/api/catalog/playbook/audit/p5');
    expect(r.statusCode, r.body).toBe(200);
    expect((await s.call('GET', '/api/catalog/playbook/audit/p5')).statusCode).toBe(404);
    expect((await s.call('GET', '/api/schedules/audit.p5:nightly')).statusCode).toBe(404);
  });
});
