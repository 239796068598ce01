/** Catalog endpoints over the real core and PostgreSQL. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, simplePlaybook, startTestServer, type TestServer } from './helpers.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.close();
});

describe('POST /api/catalog/playbook', () => {
  it('registers: 201 with catalog_id (string), path, version, created, warnings', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/first') });
    expect(r.statusCode).toBe(201);
    expect(r.json()).toEqual({ catalog_id: expect.stringMatching(/^\d+$/), path: 'cat/first', version: 1, created: true, warnings: [] });
  });

  it('identical content: 200 with the existing version, created false', async () => {
    const first = (await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/same') })).json();
    const r = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/same') });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ catalog_id: first.catalog_id, version: 1, created: false });
  });

  it('changed content: a new version', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/versions') });
    const r = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/versions', '    desc: second\n') });
    expect(r.statusCode).toBe(201);
    expect(r.json()).toMatchObject({ path: 'cat/versions', version: 2, created: true });
  });

  it('path in the body wins over metadata.path; a leading or trailing slash is refused, not trimmed', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/meta'), path: 'cat/explicit' });
    expect(r.statusCode).toBe(201);
    expect(r.json().path).toBe('cat/explicit');
    const slashed = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/meta'), path: '/cat/explicit/' });
    expect(slashed.statusCode).toBe(400);
    expect(slashed.json().error.message).toContain("'/cat/explicit/'");
  });

  it('invalid playbook: 422 playbook_invalid listing every problem with its path', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: fixture('invalid/bad-actions.yaml'), path: 'cat/bad' });
    expect(r.statusCode).toBe(422);
    const body = r.json();
    expect(body.error.code).toBe('playbook_invalid');
    expect(typeof body.error.message).toBe('string');
    const expected = JSON.parse(fixture('invalid/bad-actions.expected.json')).errors as Array<{ path: string }>;
    const paths = (body.error.details as Array<{ path: string; message: string }>).map((d) => d.path);
    for (const e of expected) expect(paths).toContain(e.path);
    for (const d of body.error.details) expect(d.message).toEqual(expect.any(String));
  });

  it('v2-removed syntax (step-level when) is rejected with its path', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: fixture('invalid/step-when.yaml'), path: 'cat/when' });
    expect(r.statusCode).toBe(422);
    expect(r.json().error.details.map((d: { path: string }) => d.path)).toContain('workflow[1].when');
  });

  it('a path the catalog refuses: 400 with the reason', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/ok'), path: 'cat/with space' });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.code).toBe('bad_request');
  });

  it('YAML that does not parse: 422', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: 'workflow: [unclosed', path: 'cat/yaml' });
    expect(r.statusCode).toBe(422);
    expect(r.json().error.code).toBe('playbook_invalid');
  });

  it('missing content: 400 naming the field', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { path: 'x' });
    expect(r.statusCode).toBe(400);
    expect(r.json().error).toMatchObject({ code: 'bad_request', details: [{ location: 'body', field: 'content', message: 'is required' }] });
    expect(r.json().error.message).toContain("'content'");
  });

  it('content of the wrong type is not coerced: 400', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', { content: 12 });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details[0]).toMatchObject({ field: 'content', message: 'must be string' });
  });

  it('malformed JSON: 400 invalid_json', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', '{"content": ');
    expect(r.statusCode).toBe(400);
    expect(r.json().error.code).toBe('invalid_json');
    expect(r.json().error.message).toMatch(/not valid JSON/);
  });

  it('empty body: 400 naming the missing field', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', '');
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details[0].field).toBe('content');
  });

  it('a body that is not JSON: 415', async () => {
    const r = await s.call('POST', '/api/catalog/playbook', 'content: x', { 'content-type': 'text/plain' });
    expect(r.statusCode).toBe(415);
    expect(r.json().error.code).toBe('unsupported_media_type');
  });
});

describe('GET /api/catalog/playbook/{path}', () => {
  beforeAll(async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/deep/nested/flow') });
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/deep/nested/flow', '    desc: v2\n') });
  });

  it('returns the latest version with content and the parsed playbook', async () => {
    const r = await s.call('GET', '/api/catalog/playbook/cat/deep/nested/flow');
    expect(r.statusCode).toBe(200);
    const e = r.json();
    expect(e).toMatchObject({ catalog_id: expect.stringMatching(/^\d+$/), path: 'cat/deep/nested/flow', version: 2 });
    expect(e.content).toContain('desc: v2');
    expect(e.playbook.workflow[0].step).toBe('start');
    expect(e.playbook.kind).toBe('Playbook');
    expect(Date.parse(e.created_at)).not.toBeNaN();
  });

  it('?version= selects a version', async () => {
    const r = await s.call('GET', '/api/catalog/playbook/cat/deep/nested/flow?version=1');
    expect(r.statusCode).toBe(200);
    expect(r.json().version).toBe(1);
    expect(r.json().content).not.toContain('desc: v2');
  });

  it('unknown path or version: 404', async () => {
    const r = await s.call('GET', '/api/catalog/playbook/cat/none');
    expect(r.statusCode).toBe(404);
    expect(r.json().error).toMatchObject({ code: 'not_found', message: expect.stringContaining('cat/none') });
    expect((await s.call('GET', '/api/catalog/playbook/cat/deep/nested/flow?version=9')).statusCode).toBe(404);
  });

  it('a version that is not a number: 400', async () => {
    const r = await s.call('GET', '/api/catalog/playbook/cat/deep/nested/flow?version=latest');
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details[0]).toMatchObject({ location: 'querystring', field: 'version' });
  });

  it('percent-encoded segments are decoded', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('cat/team@v1') });
    const r = await s.call('GET', '/api/catalog/playbook/cat/team%40v1');
    expect(r.statusCode).toBe(200);
    expect(r.json().path).toBe('cat/team@v1');
  });
});

describe('GET /api/catalog/playbooks', () => {
  it('lists the latest version of each path; prefix, limit and offset', async () => {
    for (const p of ['list/a', 'list/b', 'list/c']) await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook(p) });
    const all = await s.call('GET', '/api/catalog/playbooks?prefix=list/');
    expect(all.statusCode).toBe(200);
    const body = all.json();
    expect(body).toMatchObject({ count: 3, limit: 100, offset: 0 });
    expect(body.playbooks.map((p: { path: string }) => p.path).sort()).toEqual(['list/a', 'list/b', 'list/c']);
    expect(body.playbooks[0]).toMatchObject({ catalog_id: expect.any(String), version: 1, name: expect.any(String) });
    expect(body.playbooks[0].content).toBeUndefined();

    const page = (await s.call('GET', '/api/catalog/playbooks?prefix=list/&limit=2&offset=2')).json();
    expect(page).toMatchObject({ count: 1, limit: 2, offset: 2 });
  });

  it('rejects a bad limit: 400', async () => {
    const r = await s.call('GET', '/api/catalog/playbooks?limit=0');
    expect(r.statusCode).toBe(400);
    expect(r.json().error.details[0].field).toBe('limit');
  });
});

describe('DELETE /api/catalog/playbook/{path}', () => {
  it('removes a path: 200, then 404 for reads and a second delete', async () => {
    await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('del/me') });
    const r = await s.call('DELETE', '/api/catalog/playbook/del/me');
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ status: 'deleted', path: 'del/me' });
    expect((await s.call('GET', '/api/catalog/playbook/del/me')).statusCode).toBe(404);
    const again = await s.call('DELETE', '/api/catalog/playbook/del/me');
    expect(again.statusCode).toBe(404);
    expect(again.json().error.code).toBe('not_found');
  });
});
