/**
 * Ownership of catalog paths and credential names (issue 14) over the real core and PostgreSQL:
 * the first writer claims; another resource, or an API client, gets 409 naming the holder;
 * owner-guarded deletes never remove what the caller does not own; the versions endpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type SecretsHarness } from '../helpers/secrets.js';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.close();
});

const teamA = { kind: 'Playbook', namespace: 'team-a', name: 'etl', uid: 'uid-a' };
const teamB = { kind: 'Playbook', namespace: 'team-b', name: 'etl', uid: 'uid-b' };

describe('catalog path ownership', () => {
  it('the first resource owns a path; another namespace gets 409 naming the owner; the owner registers again', async () => {
    const first = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('shared/etl'), owner: teamA });
    expect(first.statusCode).toBe(201);
    expect(first.json().owner).toEqual(teamA);
    const other = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('shared/etl', '    desc: b\n'), owner: teamB });
    expect(other.statusCode).toBe(409);
    expect(other.json().error.code).toBe('owned_by_other');
    expect(other.json().error.message).toContain('Playbook team-a/etl');
    expect(other.json().error.details.owner).toEqual(teamA);
    const again = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('shared/etl', '    desc: a2\n'), owner: teamA });
    expect(again.json()).toMatchObject({ version: 2, created: true });
    expect((await s.call('GET', '/api/catalog/playbook/shared/etl')).json()).toMatchObject({ version: 2, owner: teamA });
  });

  it('an API client cannot replace a resource-owned path, nor a resource take over an API-written one', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/by-resource'), owner: teamA });
    const api = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/by-resource', '    desc: api\n') });
    expect(api.statusCode).toBe(409);
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/by-api') });
    const res = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/by-api', '    desc: k8s\n'), owner: teamA });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.message).toContain('an API client');
    expect((await s.call('GET', '/api/catalog/playbook/own/by-api')).json().version).toBe(1);
  });

  it('a re-created resource (same kind/namespace/name, new uid) adopts its entry; the new uid is recorded', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/adopt'), owner: teamA });
    const r = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/adopt'), owner: { ...teamA, uid: 'uid-a2' } });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ version: 1, created: false, owner: { uid: 'uid-a2' } });
  });

  it('DELETE ?owner= removes only what that resource owns; a freed path can be claimed', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/del'), owner: teamA });
    const wrong = await s.call('DELETE', '/api/catalog/playbook/own/del?owner=Playbook/team-b/etl');
    expect(wrong.statusCode).toBe(409);
    expect((await s.call('GET', '/api/catalog/playbook/own/del')).statusCode).toBe(200);
    expect((await s.call('DELETE', '/api/catalog/playbook/own/del?owner=Playbook/team-a/etl')).statusCode).toBe(200);
    expect((await s.call('GET', '/api/catalog/playbook/own/del')).statusCode).toBe(404);
    const claim = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/del'), owner: teamB });
    expect(claim.json()).toMatchObject({ version: 2, owner: teamB });
    const bad = await s.call('DELETE', '/api/catalog/playbook/own/del?owner=team-b');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toContain('Kind/namespace/name');
  });

  it('an owner with a bad field is a 400 naming the field', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('own/bad'), owner: { kind: 'Playbook', namespace: 'a/b', name: 'x' } });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.message).toContain('owner.namespace');
  });

  it('GET /api/catalog/versions: latest version and owner per known path, no content', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('ver/one') });
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('ver/one', '    desc: second\n') });
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('ver/two'), owner: teamB });
    const r = await s.call('GET', '/api/catalog/versions?paths=ver/one,ver/two,ver/missing');
    expect(r.statusCode).toBe(200);
    const versions = r.json().versions as Array<Record<string, unknown>>;
    expect(versions.sort((a, b) => String(a.path).localeCompare(String(b.path)))).toEqual([
      { path: 'ver/one', version: 2 },
      { path: 'ver/two', version: 1, owner: teamB },
    ]);
    const tooMany = await s.call('GET', `/api/catalog/versions?paths=${Array.from({ length: 501 }, (_, i) => `p${i}`).join(',')}`);
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().error.message).toContain("'paths'");
  });
});

describe('credential name ownership', () => {
  let h: SecretsHarness;
  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) =>
    h.app.inject({ method, url, ...(body !== undefined ? { payload: body as object } : {}) });
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });
  const credA = { kind: 'Credential', namespace: 'team-a', name: 'db', uid: 'c-a' };
  const body = (extra: Record<string, unknown> = {}) => ({ name: 'warehouse', type: 'custom', data: { token: 'from-api' }, ...extra });

  it('a credential created through the API is not overwritten by a resource, nor deleted by it', async () => {
    expect((await call('POST', '/api/credentials', body())).statusCode).toBe(201);
    const claim = await call('POST', '/api/credentials', body({ data: { token: 'from-k8s' }, owner: credA }));
    expect(claim.statusCode).toBe(409);
    expect(claim.json().error.message).toContain('an API client');
    const del = await call('DELETE', '/api/credentials/warehouse?owner=Credential/team-a/db');
    expect(del.statusCode).toBe(409);
    const read = await call('GET', '/api/credential/warehouse');
    expect(read.json().data).toEqual({ token: 'from-api' });
  });

  it('a resource-owned credential: the owner updates it, others (and API clients) get 409 naming it', async () => {
    expect((await call('POST', '/api/credentials', { name: 'k8s-owned', type: 'custom', data: { v: 1 }, owner: credA })).statusCode).toBe(201);
    expect((await call('POST', '/api/credentials', { name: 'k8s-owned', type: 'custom', data: { v: 2 }, owner: credA })).statusCode).toBe(200);
    const other = await call('POST', '/api/credentials', { name: 'k8s-owned', type: 'custom', data: { v: 3 }, owner: { ...credA, namespace: 'team-b' } });
    expect(other.statusCode).toBe(409);
    expect(other.json().error.message).toContain('Credential team-a/db');
    expect((await call('POST', '/api/credentials', { name: 'k8s-owned', type: 'custom', data: { v: 4 } })).statusCode).toBe(409);
    const meta = await call('GET', '/api/credentials/k8s-owned');
    expect(meta.json().owner).toEqual(credA);
    expect((await call('GET', '/api/credential/k8s-owned')).json().data).toEqual({ v: 2 });
    expect((await call('DELETE', '/api/credentials/k8s-owned?owner=Credential/team-a/db')).statusCode).toBe(200);
  });
});
