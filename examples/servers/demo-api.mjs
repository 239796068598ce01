#!/usr/bin/env node
// A small local API shaped like the public ones the http examples talk to, so they run offline:
//   node examples/servers/demo-api.mjs [port]     (default 8787)
//   GET /users?page=1&per_page=5   page-numbered list: {page, per_page, total, total_pages, data}
//   GET /flaky?key=k&fail=2        fails with 503 the first `fail` calls per key, then 200
//   GET /score?name=x              {name, score}
import http from 'node:http';

const users = Array.from({ length: 12 }, (_, i) => ({ id: i + 1, name: `user${i + 1}`, active: i % 3 !== 0 }));
const flakyCalls = new Map();

export function createDemoApi() {
  return http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const send = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (url.pathname === '/users') {
      const page = Number(url.searchParams.get('page') ?? 1);
      const perPage = Number(url.searchParams.get('per_page') ?? 5);
      const totalPages = Math.ceil(users.length / perPage);
      return send(200, { page, per_page: perPage, total: users.length, total_pages: totalPages, data: users.slice((page - 1) * perPage, page * perPage) });
    }
    if (url.pathname === '/flaky') {
      const key = url.searchParams.get('key') ?? 'default';
      const fail = Number(url.searchParams.get('fail') ?? 2);
      const n = (flakyCalls.get(key) ?? 0) + 1;
      flakyCalls.set(key, n);
      return n <= fail ? send(503, { error: 'try again', attempt: n }) : send(200, { ok: true, attempts: n });
    }
    if (url.pathname === '/score') {
      const name = url.searchParams.get('name') ?? '';
      return send(200, { name, score: [...name].reduce((s, c) => s + c.charCodeAt(0), 0) % 100 });
    }
    send(404, { error: 'not found' });
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.argv[2] ?? 8787);
  createDemoApi().listen(port, '127.0.0.1', () => console.log(`demo API on http://127.0.0.1:${port}`));
}
