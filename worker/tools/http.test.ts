import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTool } from './index.js';
import { configureHttp } from './http.js';
import { credentialTable, json, makeCtx, startHttpServer, startHttpsServer, type LocalServer } from '../testing/helpers.js';

let srv: LocalServer;
let tls: LocalServer & { cert: string };
/** Requests that reached the `/slow` route (either server). */
let slowHits = 0;

beforeAll(async () => {
  const handler = (req: { method: string; url: string; headers: Record<string, unknown>; body: string }, res: import('node:http').ServerResponse) => {
    const u = new URL(req.url, 'http://x');
    if (u.pathname === '/echo') return json(res, 200, { method: req.method, query: Object.fromEntries(u.searchParams), headers: req.headers, body: req.body });
    if (u.pathname === '/multi') return json(res, 200, { tags: u.searchParams.getAll('tag') });
    if (u.pathname === '/text') { res.writeHead(200, { 'content-type': 'text/plain' }); return res.end('hello'); }
    if (u.pathname === '/problem') return json(res, 503, { detail: 'down' }, { 'content-type': 'application/problem+json' });
    if (u.pathname === '/missing') { res.writeHead(404, { 'content-type': 'text/plain' }); return res.end('nope'); }
    if (u.pathname === '/slow') { slowHits++; setTimeout(() => json(res, 200, {}), 3000); return; }
    if (u.pathname === '/empty') { res.writeHead(204); return res.end(); }
    if (u.pathname === '/moved') { res.writeHead(302, { location: '/echo?moved=1' }); return res.end(); }
    if (u.pathname === '/bin') { res.writeHead(200, { 'content-type': 'image/png' }); return res.end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0x00])); }
    json(res, 200, { ok: true });
  };
  srv = await startHttpServer(handler);
  tls = await startHttpsServer(handler);
});
afterAll(async () => {
  await srv.close();
  await tls.close();
});

describe('http tool', () => {
  it('GET with params and headers returns the envelope with parsed JSON', async () => {
    const out = await runTool({ kind: 'http', method: 'GET', endpoint: `${srv.url}/echo?x=1`, params: { page: 2, skip: null, tag: ['a', 'b'] }, headers: { 'X-Test': 'yes' } }, makeCtx());
    expect(out.error).toBeUndefined();
    const r = out.response as any;
    expect(r.status).toBe(200);
    expect(typeof r.id).toBe('string');
    expect(r.data.method).toBe('GET');
    expect(r.data.query).toEqual({ x: '1', page: '2', tag: 'b' });
    expect(r.data.headers['x-test']).toBe('yes');
    expect(r.headers['content-type']).toContain('application/json');
    const multi = await runTool({ kind: 'http', url: `${srv.url}/multi`, params: { tag: ['a', 'b'] } }, makeCtx());
    expect((multi.response as any).data).toEqual({ tags: ['a', 'b'] });
  });

  it('json body, data object as a form, data string raw, payload as JSON', async () => {
    const j = (await runTool({ kind: 'http', method: 'POST', endpoint: `${srv.url}/echo`, json: { a: 1, b: [1, 2] } }, makeCtx())).response as any;
    expect(j.data.headers['content-type']).toBe('application/json');
    expect(JSON.parse(j.data.body)).toEqual({ a: 1, b: [1, 2] });
    const f = (await runTool({ kind: 'http', method: 'PUT', endpoint: `${srv.url}/echo`, data: { name: 'a b', n: 3, l: ['x', 'y'] } }, makeCtx())).response as any;
    expect(f.data.method).toBe('PUT');
    expect(f.data.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(f.data.body).toBe('name=a+b&n=3&l=x&l=y');
    const raw = (await runTool({ kind: 'http', method: 'POST', endpoint: `${srv.url}/echo`, data: '<x/>', headers: { 'Content-Type': 'application/xml' } }, makeCtx())).response as any;
    expect(raw.data.body).toBe('<x/>');
    expect(raw.data.headers['content-type']).toBe('application/xml');
    const p = (await runTool({ kind: 'http', method: 'PATCH', endpoint: `${srv.url}/echo`, payload: { k: 'v' } }, makeCtx())).response as any;
    expect(p.data.method).toBe('PATCH');
    expect(JSON.parse(p.data.body)).toEqual({ k: 'v' });
    const g = (await runTool({ kind: 'http', method: 'GET', endpoint: `${srv.url}/echo`, payload: { q: 'z' } }, makeCtx())).response as any;
    expect(g.data.query).toEqual({ q: 'z' });
  });

  it('text bodies, HEAD, DELETE and empty responses', async () => {
    expect(((await runTool({ kind: 'http', endpoint: `${srv.url}/text` }, makeCtx())).response as any).data).toBe('hello');
    const head = (await runTool({ kind: 'http', method: 'HEAD', endpoint: `${srv.url}/echo` }, makeCtx())).response as any;
    expect(head.status).toBe(200);
    expect(head.data).toBeNull();
    const del = (await runTool({ kind: 'http', method: 'DELETE', endpoint: `${srv.url}/echo` }, makeCtx())).response as any;
    expect(del.data.method).toBe('DELETE');
    expect(((await runTool({ kind: 'http', endpoint: `${srv.url}/empty` }, makeCtx())).response as any).status).toBe(204);
  });

  it('follows redirects unless allow_redirects is false; binary bodies come back as base64', async () => {
    const r = (await runTool({ kind: 'http', endpoint: `${srv.url}/moved` }, makeCtx())).response as any;
    expect(r.status).toBe(200);
    expect(r.data.query).toEqual({ moved: '1' });
    const noFollow = await runTool({ kind: 'http', endpoint: `${srv.url}/moved`, allow_redirects: false }, makeCtx());
    expect(noFollow.error?.status).toBe(302);
    const bin = (await runTool({ kind: 'http', endpoint: `${srv.url}/bin` }, makeCtx())).response as any;
    expect(bin.encoding).toBe('base64');
    expect(Buffer.from(bin.data, 'base64')).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0x00]));
  });

  it('legacy operation field sets the method', async () => {
    const r = (await runTool({ kind: 'http', operation: 'http.post', url: `${srv.url}/echo`, json: {} }, makeCtx())).response as any;
    expect(r.data.method).toBe('POST');
  });

  it('non-2xx is an error with status and body', async () => {
    const out = await runTool({ kind: 'http', endpoint: `${srv.url}/problem` }, makeCtx());
    expect(out.response).toBeUndefined();
    expect(out.error).toMatchObject({ status: 503, code: 'http_error', data: { detail: 'down' } });
    const nf = await runTool({ kind: 'http', endpoint: `${srv.url}/missing` }, makeCtx());
    expect(nf.error).toMatchObject({ status: 404, data: 'nope' });
  });

  it('timeout and network errors have no status', async () => {
    const t = await runTool({ kind: 'http', endpoint: `${srv.url}/slow`, timeout: 0.3 }, makeCtx());
    expect(t.error?.code).toBe('timeout');
    expect(t.error?.status).toBeUndefined();
    const n = await runTool({ kind: 'http', endpoint: 'http://127.0.0.1:1/x', timeout: 2 }, makeCtx());
    expect(n.error?.code).toBe('network');
    expect(n.error?.status).toBeUndefined();
  });

  it('a cancelled call (the worker aborting it) ends at once as cancelled, not as a timeout; an already cancelled one never starts', async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    const hits0 = slowHits;
    setTimeout(() => ac.abort(new Error('lease lost')), 150);
    const out = await runTool({ kind: 'http', endpoint: `${srv.url}/slow`, timeout: 10 }, makeCtx({ signal: ac.signal }));
    expect(out.error?.code).toBe('cancelled');
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(slowHits).toBe(hits0 + 1); // the call cancelled in flight did reach the server: hits are counted
    const before = await runTool({ kind: 'http', endpoint: `${srv.url}/slow`, timeout: 10 }, makeCtx({ signal: ac.signal }));
    expect(before.error?.code).toBe('cancelled');
    // never started: no request reached the server, not even one sent and dropped at once (which
    // would arrive a moment after the call returned; a local request takes well under 200 ms)
    await new Promise((r) => setTimeout(r, 200));
    expect(slowHits).toBe(hits0 + 1);
  });

  it('verify: true rejects a self-signed certificate, verify: false accepts it', async () => {
    const strict = await runTool({ kind: 'http', endpoint: `${tls.url}/echo` }, makeCtx());
    expect(strict.error?.code).toBe('network');
    expect(strict.error?.message).toMatch(/certificate/i);
    const loose = await runTool({ kind: 'http', endpoint: `${tls.url}/echo`, verify: false }, makeCtx());
    expect(loose.error).toBeUndefined();
    expect((loose.response as any).status).toBe(200);
    const dir = mkdtempSync(join(tmpdir(), 'pf-ca-'));
    try {
      writeFileSync(join(dir, 'ca.pem'), tls.cert);
      const pinned = await runTool({ kind: 'http', endpoint: `${tls.url}/echo`, verify: join(dir, 'ca.pem') }, makeCtx());
      expect(pinned.error).toBeUndefined();
      const missing = await runTool({ kind: 'http', endpoint: `${tls.url}/echo`, verify: join(dir, 'nope.pem') }, makeCtx());
      expect(missing.error?.code).toBe('bad_config');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('auth: bearer, basic and api_key through resolveAuth; inline; explicit headers win', async () => {
    const resolveAuth = credentialTable({
      tok: { type: 'bearer', data: { access_token: 'T0K' } },
      bas: { type: 'basic', data: { username: 'u', password: 'p' } },
      key: { type: 'api_key', data: { api_key: 'K3Y' } },
    });
    const ctx = makeCtx({ resolveAuth });
    const h = async (auth: any, headers?: any) => ((await runTool({ kind: 'http', endpoint: `${srv.url}/echo`, auth, headers }, ctx)).response as any).data.headers;
    expect((await h('tok')).authorization).toBe('Bearer T0K');
    expect((await h({ type: 'basic', credential: 'bas' })).authorization).toBe(`Basic ${Buffer.from('u:p').toString('base64')}`);
    expect((await h('key'))['x-api-key']).toBe('K3Y');
    expect((await h({ type: 'api_key', credential: 'key', header: 'X-Token' }))['x-token']).toBe('K3Y');
    expect((await h({ type: 'bearer', inline: { access_token: 'IN' } })).authorization).toBe('Bearer IN');
    expect((await h('tok', { Authorization: 'Custom x' })).authorization).toBe('Custom x');
    const missing = await runTool({ kind: 'http', endpoint: `${srv.url}/echo`, auth: 'nope' }, ctx);
    expect(missing.error?.message).toMatch(/not found/);
  });

  it('bad config is an error outcome, not a throw', async () => {
    expect((await runTool({ kind: 'http' }, makeCtx())).error?.code).toBe('bad_config');
    expect((await runTool({ kind: 'http', endpoint: 'x', method: 'GET' }, makeCtx())).error?.code).toBe('bad_config');
  });

  it('refuses the worker\'s own server (credential endpoint included, also through a redirect) and metadata addresses, unless allowed', async () => {
    // a local server stands in for the Playflow server the worker talks to
    const server = await startHttpServer((req, res) => json(res, 200, { name: 'db', data: { password: 'hunter2' } }));
    const bounce = await startHttpServer((req, res) => { res.writeHead(302, { location: `${server.url}/api/credential/db` }); res.end(); });
    try {
      configureHttp({ serverUrl: server.url });
      const direct = await runTool({ kind: 'http', endpoint: `${server.url}/api/credential/db?token=abc` }, makeCtx());
      expect(direct.error).toMatchObject({ code: 'forbidden_target' });
      expect(JSON.stringify(direct)).not.toContain('hunter2');
      expect(direct.error!.message).not.toContain('token=abc');
      const byName = await runTool({ kind: 'http', endpoint: server.url.replace('127.0.0.1', 'localhost') + '/api/credential/db' }, makeCtx());
      expect(byName.error).toMatchObject({ code: 'forbidden_target' });
      const redirected = await runTool({ kind: 'http', endpoint: `${bounce.url}/go` }, makeCtx());
      expect(redirected.error).toMatchObject({ code: 'forbidden_target' });
      const meta = await runTool({ kind: 'http', endpoint: 'http://169.254.169.254/latest/meta-data/', timeout: 5 }, makeCtx());
      expect(meta.error).toMatchObject({ code: 'forbidden_target' });
      // other local services stay reachable
      expect((await runTool({ kind: 'http', endpoint: `${srv.url}/echo` }, makeCtx())).error).toBeUndefined();
      configureHttp({ allow: [new URL(server.url).host] });
      expect((await runTool({ kind: 'http', endpoint: `${server.url}/api/credential/db` }, makeCtx())).error).toBeUndefined();
    } finally {
      configureHttp({ serverUrl: null, allow: [] });
      await server.close();
      await bounce.close();
    }
  });

  it('a response larger than the limit fails too_large', async () => {
    const big = await startHttpServer((req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('x'.repeat(300_000)); });
    try {
      configureHttp({ maxResponseBytes: 100_000 });
      const r = await runTool({ kind: 'http', endpoint: `${big.url}/big` }, makeCtx());
      expect(r.error).toMatchObject({ code: 'too_large' });
      expect(r.error!.message).toContain('WORKER_MAX_RESULT_BYTES');
    } finally {
      configureHttp({ maxResponseBytes: 64 * 1024 * 1024 });
      await big.close();
    }
  });
});
