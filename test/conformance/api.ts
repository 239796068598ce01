/**
 * Local stand-ins for the external APIs conformance playbooks call, shaped like public ones:
 * page-number, offset, cursor and link pagination, a flaky endpoint, an echo, any status code.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const people = Array.from({ length: 12 }, (_, i) => ({ id: i + 1, name: `user${i + 1}`, active: i % 3 !== 0 }));

export interface LocalApi {
  url: string;
  /** Requests seen per path (to prove retries and pages really happened). */
  hits: Map<string, number>;
  close(): Promise<void>;
}

export async function startLocalApi(): Promise<LocalApi> {
  const flaky = new Map<string, number>();
  const hits = new Map<string, number>();
  let base = '';
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    hits.set(url.pathname, (hits.get(url.pathname) ?? 0) + 1);
    const q = url.searchParams;
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      switch (url.pathname) {
        case '/users': {
          const page = Number(q.get('page') ?? 1);
          const per = Number(q.get('per_page') ?? 5);
          return send(200, { page, per_page: per, total: people.length, total_pages: Math.ceil(people.length / per), data: people.slice((page - 1) * per, page * per) });
        }
        case '/refpages': {
          // a body with its own top-level data (as many public APIs return), paged 5 at a time
          const page = Number(q.get('page') ?? 1);
          const slice = people.slice((page - 1) * 5, page * 5);
          return send(200, { data: slice, paging: { page, hasMore: page * 5 < people.length } });
        }
        case '/offset': {
          const offset = Number(q.get('offset') ?? 0);
          const limit = Number(q.get('limit') ?? 5);
          return send(200, { offset, limit, total: people.length, items: people.slice(offset, offset + limit) });
        }
        case '/cursor': {
          const start = q.get('cursor') ? Number(Buffer.from(q.get('cursor')!, 'base64url').toString()) : 0;
          const slice = people.slice(start, start + 4);
          const next = start + 4 < people.length ? Buffer.from(String(start + 4)).toString('base64url') : null;
          return send(200, { records: slice, next_cursor: next });
        }
        case '/links': {
          const page = Number(q.get('page') ?? 1);
          const last = 3;
          return send(200, { results: people.slice((page - 1) * 4, page * 4).map((p) => p.id), links: { next: page < last ? `${base}/links?page=${page + 1}` : null } });
        }
        case '/flaky': {
          const key = q.get('key') ?? 'default';
          const n = (flaky.get(key) ?? 0) + 1;
          flaky.set(key, n);
          return n <= Number(q.get('fail') ?? 2) ? send(Number(q.get('status') ?? 503), { error: 'unavailable', attempt: n }) : send(200, { ok: true, attempts: n });
        }
        case '/echo': {
          let body: unknown = raw;
          try {
            body = raw ? JSON.parse(raw) : null;
          } catch {
            // form or text bodies are echoed as text
          }
          return send(200, { method: req.method, query: Object.fromEntries(q), content_type: req.headers['content-type'] ?? null, authorization: req.headers.authorization ?? null, x_trace: req.headers['x-trace'] ?? null, body });
        }
        case '/token': {
          // An OAuth2 token endpoint whose tokens live one second, so a run sees one expire.
          const n = (hits.get('/token') ?? 0);
          return send(200, { access_token: `tok-${n}`, token_type: 'Bearer', expires_in: 1 });
        }
        case '/score':
          return send(200, { name: q.get('name'), score: Number(q.get('value') ?? 0) });
        default: {
          const m = /^\/status\/(\d{3})$/.exec(url.pathname);
          if (m) return send(Number(m[1]), { status: Number(m[1]) });
          return send(404, { error: 'not found' });
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    hits,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
