/**
 * Conformance: every playbook in ./playbooks registered and run end to end through the CLI
 * against the real server, a real worker process, PostgreSQL, NATS JetStream, python3 and local
 * HTTP servers, with its expected final status and result (cases.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { readFileSync } from 'node:fs';
import { startHarness, type Harness } from './harness.js';
import { startLocalApi, type LocalApi } from './api.js';
import { cases, type CaseEnv, type ExecutionView } from './cases.js';

const dir = fileURLToPath(new URL('./playbooks/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort();
const pathOf = (file: string) => (parseYaml(readFileSync(path.join(dir, file), 'utf8')) as { metadata: { path: string } }).metadata.path;

let h: Harness;
let api: LocalApi;
let env: CaseEnv;

async function post(url: string, body: unknown) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

beforeAll(async () => {
  api = await startLocalApi();
  h = await startHarness({ workers: 1 });
  const db = new URL(h.db.url);
  env = {
    api,
    pg: { host: db.hostname, port: Number(db.port || 5432), user: decodeURIComponent(db.username), password: '', database: db.pathname.slice(1) },
    tmp: h.tmp,
  };
  // Credentials the auth-reference cases use, stored through the API (encrypted at rest).
  await post(`${h.url}/api/credentials`, {
    name: 'conformance_pg', type: 'postgres', description: 'conformance database',
    data: { db_host: env.pg.host, db_port: env.pg.port, db_user: env.pg.user, db_password: '', db_name: env.pg.database },
  });
  await post(`${h.url}/api/credentials`, {
    name: 'conformance_bearer', type: 'bearer', data: { access_token: 'conformance-token-123', token_type: 'Bearer' },
  });
  // Register every playbook with the CLI, a few at a time.
  for (let i = 0; i < files.length; i += 6) {
    const batch = files.slice(i, i + 6);
    const results = await Promise.all(batch.map((f) => h.cli(['catalog', 'register', 'playbook', path.join(dir, f)])));
    results.forEach((r, j) => {
      if (r.code !== 0) throw new Error(`register ${batch[j]} failed: ${r.stderr}${r.stdout}`);
    });
  }
}, 180_000);

afterAll(async () => {
  await h?.close();
  await api?.close();
});

describe('conformance', () => {
  it('covers every playbook in the folder but the child helper', () => {
    const covered = new Set(cases.map((c) => c.file));
    expect(files.filter((f) => !covered.has(f))).toEqual(['child_square.yaml', 'vars_api.yaml']);
    expect(cases.length).toBeGreaterThanOrEqual(30);
  });

  it('a vars block is readable through the variables API while the execution runs, and removed at its end', async () => {
    const marker = path.join(env.tmp, 'vars-api-marker');
    const r = await h.cli(['run', 'playbook', 'conformance/vars_api', '--payload', JSON.stringify({ tmp: env.tmp }), '--output', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const id = JSON.parse(r.stdout).execution_id as string;
    const deadline = Date.now() + 60_000;
    while (!existsSync(marker)) {
      if (Date.now() > deadline) throw new Error('the hold step never started');
      await new Promise((res) => setTimeout(res, 50));
    }
    const all = await (await fetch(`${h.url}/api/vars/${id}`)).json() as any;
    expect(all.count).toBe(1);
    expect(all.variables.region).toMatchObject({ value: 'eu-west', type: 'step_result', source_step: 'start', access_count: 0 });
    const one = await (await fetch(`${h.url}/api/vars/${id}/region`)).json() as any;
    expect(one).toMatchObject({ var_name: 'region', value: 'eu-west', access_count: 1 });
    writeFileSync(`${marker}.go`, '');
    const end = await h.cli(['execution', 'status', id, '--watch', '--output', 'json'], { timeoutMs: 60_000 });
    const x = JSON.parse(end.stdout) as ExecutionView;
    expect(x.status).toBe('completed');
    expect(x.result).toEqual({ region_seen: 'eu-west' });
    const after = await (await fetch(`${h.url}/api/vars/${id}`)).json() as any;
    expect(after.count).toBe(0);
  }, 120_000);

  it.concurrent.each(cases)('$file ends $status', async (c) => {
    const payload = c.payload ? c.payload(env) : {};
    const r = await h.cli(['run', 'playbook', pathOf(c.file), '--payload', JSON.stringify(payload), '--wait', '--output', 'json']);
    const execution = JSON.parse(r.stdout) as ExecutionView;
    expect(execution.status, `${c.file}: ${r.stderr}\n${JSON.stringify(execution.error)}`).toBe(c.status);
    expect(r.code).toBe(c.status === 'completed' ? 0 : 1);
    if ('result' in c) expect(execution.result).toEqual(c.result);
    await c.check?.(execution, env);
  }, 120_000);
});
