/**
 * Reference-era playbooks end to end (issue 18): each fixture of test/fixtures/reference is
 * registered and run twice on the real server, a real worker process, PostgreSQL, NATS JetStream,
 * python3 and local HTTP stand-ins — first as written (its conventions run as their spec forms),
 * then as `playflow playbook convert` wrote it (test/cli/convert.test.ts proves that text) — and
 * both runs must end the same way.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';
import { startLocalApi, type LocalApi } from './api.js';
import type { ExecutionView } from './cases.js';

const dir = fileURLToPath(new URL('../fixtures/reference/', import.meta.url));

let h: Harness;
let api: LocalApi;
let runs = 0;

async function post(url: string, body: unknown) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function register(file: string): Promise<void> {
  const r = await h.cli(['catalog', 'register', 'playbook', path.join(dir, file)]);
  if (r.code !== 0) throw new Error(`register ${file}: ${r.stderr}${r.stdout}`);
}

async function run(catalogPath: string): Promise<ExecutionView> {
  const payload = { api: api.url, run: `run-${++runs}` };
  const r = await h.cli(['run', 'playbook', catalogPath, '--payload', JSON.stringify(payload), '--wait', '--output', 'json']);
  const x = JSON.parse(r.stdout) as ExecutionView;
  expect(x.status, `${catalogPath}: ${r.stderr}\n${JSON.stringify(x.error)}`).toBe('completed');
  return x;
}

async function rows(sql: string): Promise<unknown[]> {
  const c = new pg.Client({ connectionString: h.db.url });
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  api = await startLocalApi();
  h = await startHarness({ workers: 1 });
  const db = new URL(h.db.url);
  await post(`${h.url}/api/credentials`, {
    name: 'conformance_pg', type: 'postgres',
    data: { db_host: db.hostname, db_port: Number(db.port || 5432), db_user: decodeURIComponent(db.username), db_password: '', db_name: db.pathname.slice(1) },
  });
  await register('child.yaml');
}, 180_000);

afterAll(async () => {
  await h?.close();
  await api?.close();
});

describe('reference-era playbooks, as written and converted', () => {
  it.each(['paged_users.yaml', 'paged_users.converted.yaml'])('%s: pages through a body with its own data and upserts every user with a table sink', async (file) => {
    expect(readFileSync(path.join(dir, file), 'utf8')).toContain('ref_paged_users');
    const before = api.hits.get('/refpages') ?? 0;
    await register(file);
    await run('reference/paged_users');
    expect((api.hits.get('/refpages') ?? 0) - before).toBe(3);
    const stored = await rows('SELECT id, name FROM ref_users ORDER BY id');
    expect(stored).toEqual(Array.from({ length: 12 }, (_, i) => ({ id: i + 1, name: `USER${i + 1}` })));
  }, 180_000);

  it.each(['conventions.yaml', 'conventions.converted.yaml'])('%s: main(input_data), tojson body, call.error with max_delay, workbook task, playbook payload, set list, bare from', async (file) => {
    await register(file);
    const x = await run('reference/conventions');
    expect(x.result).toEqual({ label: 'done', tens: [10, 20, 30], flaky_attempts: 3, doubled: 40, square: 49, order_id: 42 });
  }, 180_000);
});
