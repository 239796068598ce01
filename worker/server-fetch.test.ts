import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, PlayflowClient } from '../client/http.js';
import { createServerFetch } from './server-fetch.js';

describe('createServerFetch (the worker transport of PlayflowClient)', () => {
  let server: http.Server;
  let base: string;
  let connections = 0;
  const sf = createServerFetch();

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        if (req.url === '/slow') {
          setTimeout(() => res.end('{}'), 500);
          return;
        }
        if (req.url?.startsWith('/status/')) {
          const status = Number(req.url.split('/')[2]);
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'nope', message: `status ${status}` } }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json', 'x-multi': ['a', 'b'] })
          .end(JSON.stringify({ method: req.method, url: req.url, body: body ? JSON.parse(body) : null, auth: req.headers.authorization ?? null, ua: req.headers['user-agent'] }));
      });
    });
    server.on('connection', () => connections++);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await sf.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('sends method, path, query, headers and body, and reads the answer', async () => {
    const res = await sf.fetch(`${base}/a/b?x=1`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer t' }, body: '{"k":1}' });
    expect(res.ok).toBe(true);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('x-multi')).toBe('a, b');
    expect(await res.json()).toMatchObject({ method: 'POST', url: '/a/b?x=1', body: { k: 1 }, auth: 'Bearer t' });
  });

  it('keeps connections alive across requests', async () => {
    const before = connections;
    for (let i = 0; i < 20; i++) await (await sf.fetch(`${base}/x`)).text();
    expect(connections - before).toBeLessThanOrEqual(1);
  });

  it('works under PlayflowClient: answers, API errors, timeouts and an unreachable server', async () => {
    const client = new PlayflowClient({ baseUrl: base, token: 'tok', fetch: sf.fetch, headers: { 'user-agent': 'w/1' } });
    const r = await client.request<{ method: string; auth: string; ua: string; body: unknown }>('POST', '/p', { body: { a: 1 } });
    expect(r).toMatchObject({ method: 'POST', auth: 'Bearer tok', ua: 'w/1', body: { a: 1 } });

    const e409 = await client.request('POST', '/status/409').catch((e: unknown) => e);
    expect(e409).toBeInstanceOf(ApiError);
    expect(e409).toMatchObject({ status: 409, code: 'nope' });

    const slow = new PlayflowClient({ baseUrl: base, fetch: sf.fetch, timeoutMs: 50 });
    await expect(slow.request('GET', '/slow')).rejects.toMatchObject({ status: 0, code: 'timeout' });

    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const deadPort = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const dead = new PlayflowClient({ baseUrl: `http://127.0.0.1:${deadPort}`, fetch: sf.fetch });
    const err = await dead.request('GET', '/x').catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 0, code: 'unreachable' });
    expect((err as Error).message).toContain('ECONNREFUSED');
  });

  it('rejects at once with an already aborted signal', async () => {
    const ac = new AbortController();
    ac.abort(new DOMException('gone', 'AbortError'));
    await expect(sf.fetch(`${base}/x`, { signal: ac.signal })).rejects.toMatchObject({ name: 'AbortError' });
  });
});
