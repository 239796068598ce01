/**
 * Upgrade adoption (issue 14) over the real core and PostgreSQL: what an operator from before
 * ownership stored has no owner. A resource claims a catalog path with `adopt_version` equal to
 * the latest version, and a credential with `adopt: true` when its meta names the resource
 * (`source: kubernetes`, `namespace`, `resource`); anything else stays 409.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type SecretsHarness } from '../helpers/secrets.js';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';

const owner = { kind: 'Playbook', namespace: 'team-a', name: 'etl', uid: 'uid-a' };

describe('catalog: adopt_version', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('claims an ownerless path at that version (same content: no new version; new content: the next one)', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/same') }); // the old operator: no owner
    const same = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/same'), owner, adopt_version: 1 });
    expect(same.statusCode).toBe(200);
    expect(same.json()).toMatchObject({ version: 1, created: false, owner });
    expect((await s.call('GET', '/api/catalog/versions?paths=adopt/same')).json().versions).toEqual([{ path: 'adopt/same', version: 1, owner }]);
    // owned now: an API client is refused
    expect((await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/same', '    desc: api\n') })).statusCode).toBe(409);

    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/changed') });
    const changed = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/changed', '    desc: new\n'), owner, adopt_version: 1 });
    expect(changed.statusCode).toBe(201);
    expect(changed.json()).toMatchObject({ version: 2, created: true, owner });
  });

  it('refuses when the path moved past that version, is owned by another resource, or adopt_version comes without owner', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/moved') });
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/moved', '    desc: by api\n') });
    const moved = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/moved', '    desc: k8s\n'), owner, adopt_version: 1 });
    expect(moved.statusCode).toBe(409);
    expect(moved.json().error.code).toBe('owned_by_other');
    expect((await s.call('GET', '/api/catalog/playbook/adopt/moved')).json()).toMatchObject({ version: 2 });

    const other = { ...owner, namespace: 'team-b' };
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/owned'), owner: other });
    const owned = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/owned'), owner, adopt_version: 1 });
    expect(owned.statusCode).toBe(409);
    expect(owned.json().error.message).toContain('Playbook team-b/etl');

    const noOwner = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('adopt/x'), adopt_version: 1 });
    expect(noOwner.statusCode).toBe(400);
    expect(noOwner.json().error.message).toContain('adopt_version');
  });
});

describe('credentials: adopt', () => {
  let h: SecretsHarness;
  const call = (method: 'GET' | 'POST', url: string, body?: unknown) =>
    h.app.inject({ method, url, ...(body !== undefined ? { payload: body as object } : {}) });
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });
  const cred = { kind: 'Credential', namespace: 'team-a', name: 'db', uid: 'c-a' };
  const k8sMeta = { source: 'kubernetes', namespace: 'team-a', resource: 'db', secret: 'db-secret' };

  it('claims an ownerless credential whose meta names the resource', async () => {
    expect((await call('POST', '/api/credentials', { name: 'old-db', type: 'custom', data: { v: 1 }, meta: k8sMeta })).statusCode).toBe(201);
    const r = await call('POST', '/api/credentials', { name: 'old-db', type: 'custom', data: { v: 2 }, meta: k8sMeta, owner: cred, adopt: true });
    expect(r.statusCode).toBe(200);
    expect(r.json().owner).toEqual(cred);
    expect((await call('GET', '/api/credential/old-db')).json().data).toEqual({ v: 2 });
    expect((await call('POST', '/api/credentials', { name: 'old-db', type: 'custom', data: { v: 3 } })).statusCode).toBe(409);
  });

  it('refuses one created through the API, one whose meta names another resource, and adopt without owner', async () => {
    await call('POST', '/api/credentials', { name: 'api-db', type: 'custom', data: { v: 'api' } });
    const api = await call('POST', '/api/credentials', { name: 'api-db', type: 'custom', data: { v: 'k8s' }, meta: k8sMeta, owner: cred, adopt: true });
    expect(api.statusCode).toBe(409);
    expect(api.json().error.message).toContain('an API client');

    await call('POST', '/api/credentials', { name: 'their-db', type: 'custom', data: { v: 'theirs' }, meta: { ...k8sMeta, resource: 'other' } });
    expect((await call('POST', '/api/credentials', { name: 'their-db', type: 'custom', data: { v: 'k8s' }, owner: cred, adopt: true })).statusCode).toBe(409);
    expect((await call('GET', '/api/credential/their-db')).json().data).toEqual({ v: 'theirs' });
    expect((await call('GET', '/api/credential/api-db')).json().data).toEqual({ v: 'api' });

    const bad = await call('POST', '/api/credentials', { name: 'x-db', type: 'custom', data: { v: 1 }, adopt: true });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toContain('adopt');
  });
});
