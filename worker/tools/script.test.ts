/**
 * `script:` of the python and postgres tools (reference convention): inline text, a file under
 * WORKER_SCRIPT_ROOT, an http(s) URL — each row runs the real tool (python3, PostgreSQL) or
 * checks the refusal message.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import { runTool } from './index.js';
import { closePostgresPools } from './postgres.js';
import { closePythonPool } from './python.js';
import { configureScripts } from './script.js';
import { makeCtx } from '../testing/helpers.js';
import type { Json, Tool } from './types.js';

const root = mkdtempSync(join(tmpdir(), 'pf-scripts-'));
let db: TestDatabase;
let auth: Json;
let server: http.Server;
let base = '';

beforeAll(async () => {
  mkdirSync(join(root, 'py'));
  writeFileSync(join(root, 'py', 'add.py'), 'def main(a, b):\n    return a + b\n');
  writeFileSync(join(root, 'q.sql'), 'SELECT $1::int * 2 AS doubled');
  writeFileSync(join(tmpdir(), 'pf-outside.py'), 'result = 1');
  configureScripts({ root });
  db = await createTestDatabase('pfscript');
  const u = new URL(db.url);
  auth = { type: 'postgres', inline: { host: u.hostname, port: Number(u.port || 5432), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), database: db.name } };
  server = http.createServer((req, res) => {
    if (req.url === '/mul.py') return res.end('def main(a, b):\n    return a * b\n');
    res.writeHead(404).end('no');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  configureScripts({ root: process.env.WORKER_SCRIPT_ROOT || undefined });
  await closePythonPool();
  await closePostgresPools();
  await db.drop();
  server.close();
  rmSync(root, { recursive: true, force: true });
});

describe('script:', () => {
  const py = (script: Json): Tool => ({ kind: 'python', script, args: { a: 6, b: 7 } });
  it.each<[string, () => Tool, Json]>([
    ['python inline text', () => py('def main(a, b):\n    return a - b'), -1],
    ['python {path} under the root', () => py({ path: 'py/add.py' }), 13],
    ['python reference nesting {source: {type: file, path}}', () => py({ source: { type: 'file', path: 'py/add.py' } }), 13],
    ['python {url}', () => py({ url: `${base}/mul.py` }), 42],
    ['postgres {path}', () => ({ kind: 'postgres', auth, script: { path: 'q.sql' }, args: [21] }), { command: 'SELECT', row_count: 1, rows: [{ doubled: 42 }], columns: ['doubled'] }],
  ])('%s', async (_n, tool, want) => {
    const out = await runTool(tool(), makeCtx());
    expect(out.error).toBeUndefined();
    expect(out.response).toEqual(want);
  });

  it.each<[string, Json, string]>([
    ['a path leaving the root', { path: '../pf-outside.py' }, 'outside WORKER_SCRIPT_ROOT'],
    ['a missing file', { path: 'nope.py' }, "script 'nope.py' cannot be read: ENOENT"],
    ['a url answering 404', { url: 'http://127.0.0.1:9/x' }, ''],
    ['neither path nor url', { name: 'x' }, 'script needs path'],
  ])('refuses %s', async (_n, script, message) => {
    if (message === '') (script as { url: string }).url = `${base}/missing.py`;
    const out = await runTool(py(script), makeCtx());
    expect(out.error?.message).toContain(message || 'answered HTTP 404');
  });

  it('without WORKER_SCRIPT_ROOT a script path is refused', async () => {
    configureScripts({});
    try {
      const out = await runTool(py({ path: 'py/add.py' }), makeCtx());
      expect(out.error?.message).toContain('has no WORKER_SCRIPT_ROOT');
    } finally {
      configureScripts({ root });
    }
  });
});
