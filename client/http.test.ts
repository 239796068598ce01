import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError, PlayflowClient, encodeCatalogPath } from './http.js';
import { createServerFetch } from '../worker/server-fetch.js';

// A local HTTP server that records requests and answers what the test sets; the real server's
// behaviour is covered by test/server/*.
interface Seen { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }
let seen: Seen[] = [];
let answer: { status: number; body: string; type?: string } = { status: 200, body: '{}' };
let answerFn: ((url: string) => { status: number; body: string }) | undefined;
let server: http.Server;
let baseUrl: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const a = answerFn ? answerFn(req.url!) : answer;
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(a.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

function reply(status: number, body: unknown) {
  seen = [];
  answer = { status, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

describe('PlayflowClient', () => {
  it('a server that does not answer within timeoutMs is a timeout (status 0), over fetch and over the worker transport', async () => {
    const silent = http.createServer(() => {}); // takes the request, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const transport = createServerFetch();
    try {
      for (const fetchImpl of [undefined, transport.fetch]) {
        const t0 = Date.now();
        const err = await new PlayflowClient({ baseUrl: url, timeoutMs: 300, fetch: fetchImpl }).getExecution('1').catch((e) => e);
        expect(err).toBeInstanceOf(ApiError);
        expect(err).toMatchObject({ status: 0, code: 'timeout' });
        expect(err.message).toContain('no answer within 300 ms');
        expect(Date.now() - t0).toBeLessThan(3000);
      }
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((r) => silent.close(() => r()));
      await transport.close();
    }
  });

  it('sends the bearer token, JSON bodies and string ids', async () => {
    reply(201, { execution_id: '9007199254740993', status: 'started', path: 'a/b', version: 1, commands: 1 });
    const c = new PlayflowClient({ baseUrl, token: 'sekrit' });
    const res = await c.run({ path: 'a/b', payload: { x: 1 }, parent_execution_id: 12345678901234567n as unknown as number });
    expect(res.execution_id).toBe('9007199254740993');
    expect(seen[0].method).toBe('POST');
    expect(seen[0].url).toBe('/api/run/playbook');
    expect(seen[0].headers.authorization).toBe('Bearer sekrit');
    expect(JSON.parse(seen[0].body)).toEqual({ path: 'a/b', payload: { x: 1 }, parent_execution_id: '12345678901234567' });
  });

  it('keeps slashes of catalog paths and encodes segments', async () => {
    reply(200, { catalog_id: '1' });
    const c = new PlayflowClient({ baseUrl });
    await c.getPlaybook('examples/my flow', 3);
    expect(seen[0].url).toBe('/api/catalog/playbook/examples/my%20flow?version=3');
    expect(seen[0].headers.authorization).toBeUndefined();
    expect(encodeCatalogPath('/a/b')).toBe('a/b');
  });

  it('sends one event bare and several as a batch', async () => {
    const c = new PlayflowClient({ baseUrl });
    reply(200, { status: 'ok', accepted: 1, duplicates: 0, commands: 0 });
    await c.sendEvents({ execution_id: 5, step: 's', name: 'call.done', payload: {}, queue_id: 7 });
    expect(JSON.parse(seen[0].body)).toEqual({ execution_id: '5', step: 's', name: 'call.done', payload: {}, queue_id: '7' });
    reply(200, { status: 'ok', accepted: 2, duplicates: 0, commands: 0 });
    await c.sendEvents([
      { execution_id: '5', step: 's', name: 'a', payload: {} },
      { execution_id: '5', step: 's', name: 'b', payload: {} },
    ]);
    expect(JSON.parse(seen[0].body).events).toHaveLength(2);
  });

  it('turns error envelopes into ApiError', async () => {
    reply(422, { error: { code: 'playbook_invalid', message: 'bad', details: [{ path: 'workflow', message: 'x', severity: 'error' }] } });
    const c = new PlayflowClient({ baseUrl });
    const err = await c.registerPlaybook('x').catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 422, code: 'playbook_invalid', message: 'bad' });
    expect(err.details).toHaveLength(1);
  });

  it('keeps non-envelope errors readable', async () => {
    reply(502, 'Bad Gateway');
    const err = await new PlayflowClient({ baseUrl }).queueStats().catch((e) => e);
    expect(err).toMatchObject({ status: 502, code: 'http_502' });
    expect(err.message).toContain('Bad Gateway');
  });

  it('answers /health even when degraded (503)', async () => {
    reply(503, { status: 'degraded', version: '0', uptime_seconds: 1, checks: {} });
    const h = await new PlayflowClient({ baseUrl }).health();
    expect(h.status).toBe('degraded');
  });

  it('waits for an execution to end', async () => {
    const statuses = ['started', 'running', 'completed'];
    let i = 0;
    answerFn = () => ({ status: 200, body: JSON.stringify({ execution_id: '3', status: statuses[Math.min(i++, 2)] }) });
    const ex = await new PlayflowClient({ baseUrl }).waitForExecution(3, { intervalMs: 5 });
    expect(ex.status).toBe('completed');
    expect(i).toBe(3);
    answerFn = () => ({ status: 200, body: JSON.stringify({ execution_id: '3', status: 'running' }) });
    const err = await new PlayflowClient({ baseUrl }).waitForExecution('3', { intervalMs: 5, timeoutMs: 30 }).catch((e) => e);
    expect(err).toMatchObject({ status: 0, code: 'timeout' });
    answerFn = undefined;
  });

  it('iterates every event page by page', async () => {
    const pages: Record<string, unknown> = {
      '': { execution_id: '1', events: [{ seq: 1 }, { seq: 2 }], next_after: 2 },
      '2': { execution_id: '1', events: [{ seq: 3 }], next_after: null },
    };
    answerFn = (url) => ({ status: 200, body: JSON.stringify(pages[new URL(url, 'http://x').searchParams.get('after') ?? '']) });
    const seqs: number[] = [];
    for await (const e of new PlayflowClient({ baseUrl }).iterateEvents('1', { pageSize: 2 })) seqs.push(e.seq);
    expect(seqs).toEqual([1, 2, 3]);
    answerFn = undefined;
  });

  it('reports an unreachable server as status 0', async () => {
    const err = await new PlayflowClient({ baseUrl: 'http://127.0.0.1:1' }).health().catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(0);
    expect(err.code).toBe('unreachable');
    expect(err.unreachable).toBe(true);
  });
});
