/**
 * Every playbook in examples/ is valid, documents how to run it, and RUNS to completion with its
 * expected result through the real stack: the real server (startServer, migrations on a fresh
 * database) and a real worker runtime in this process, sharing one in-process broker the way
 * `playflow dev` does (ServerCoreConfig.brokerInstance + WorkerRuntimeOptions.broker). The
 * worker claims and reports over HTTP; python steps run in real python3; the http examples call
 * examples/servers/demo-api.mjs on a free port; postgres.yaml writes to this suite's database.
 *
 * A new example without an entry in EXPECTED fails the suite: each one is exercised.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PlayflowClient } from '../client/http.js';
import type { ExecutionView } from '../common/protocol.js';
import { freePort } from '../cli/dev/embedded-db.js';
import { parsePlaybook } from '../playbook/index.js';
import { MemoryBroker } from '../common/broker/index.js';
import { loadConfig } from '../server/config.js';
import { createLogger } from '../common/logger.js';
import { startServer, type RunningServer } from '../server/main.js';
import { WorkerRuntime } from '../worker/runtime.js';
import { createTestDatabase, type TestDatabase } from './helpers/pg.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const EXAMPLES = join(ROOT, 'examples');
const FILES = readdirSync(EXAMPLES).filter((f) => f.endsWith('.yaml')).sort();

interface Case {
  /** Payload of the run, given the demo API's base URL and the database connection. */
  payload?: (ctx: { api: string; pg: Record<string, unknown> }) => Record<string, unknown>;
  result: unknown;
  /** Compare with toMatchObject (for results with fields that vary per run). */
  partial?: boolean;
}

/** The exact results, learnt by running each example once and checked by hand against the file. */
const EXPECTED: Record<string, Case[]> = {
  'case_routing.yaml': [
    { result: { decision: 'manual review', score: 35 } },
    { payload: () => ({ score: 72 }), result: { decision: 'approved', score: 72 } },
  ],
  'composition.yaml': [{ result: ['HELLO, GRACE!', 'HELLO, LINUS!'] }],
  // One entry per statement: CREATE TABLE … AS reports its row count, then the SELECT.
  'duckdb.yaml': [{
    result: [
      { columns: ['Count'], row_count: 1, rows: [{ Count: 4 }] },
      { columns: ['region', 'total'], row_count: 3, rows: [{ region: 'north', total: 150 }, { region: 'south', total: 80 }, { region: 'west', total: 55 }] },
    ],
  }],
  'hello_world.yaml': [
    { result: { message: 'HELLO, WORLD!' } },
    { payload: () => ({ name: 'Ada' }), result: { message: 'HELLO, ADA!' } },
  ],
  'http_pagination.yaml': [{
    payload: ({ api }) => ({ api }),
    result: ['user2', 'user3', 'user5', 'user6', 'user8', 'user9', 'user11', 'user12'],
  }],
  'loop.yaml': [{ result: { cities: 4, letters: 19 } }],
  'postgres.yaml': [{
    payload: ({ pg }) => ({ pg }),
    result: { command: 'SELECT', columns: ['orders', 'total'], row_count: 1, rows: [{ orders: 4, total: 140 }] },
  }],
  'python_args.yaml': [
    { result: 'stats: mean 20, max 30' },
    { payload: () => ({ numbers: [3, 1, 4, 1, 5] }), result: 'stats: mean 2.8, max 5' },
  ],
  // The http tool's result is the response envelope; its id and Date header vary per run.
  'retry.yaml': [{ payload: ({ api }) => ({ api }), result: { status: 200, data: { ok: true, attempts: 3 } }, partial: true }],
  'vars.yaml': [{ result: 'order 4711: 7 units' }],
  'workbook.yaml': [{ result: 144 }],
};

describe('examples/*.yaml: static checks', () => {
  it('every example has an expected result here', () => {
    expect(FILES.length).toBeGreaterThanOrEqual(11);
    expect(Object.keys(EXPECTED).sort()).toEqual(FILES);
  });

  it.each(FILES)('%s is a valid playbook without warnings, at path examples/<name>', (file) => {
    const r = parsePlaybook(readFileSync(join(EXAMPLES, file), 'utf8'));
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.playbook?.metadata.path).toBe(`examples/${file.replace(/\.yaml$/, '')}`);
  });

  it.each(FILES)('%s opens with a comment header showing the playflow dev command', (file) => {
    const text = readFileSync(join(EXAMPLES, file), 'utf8');
    expect(text.startsWith('# ')).toBe(true);
    const header = text.slice(0, text.indexOf('\napiVersion:'));
    expect(header).toContain(`npx playflow dev examples/${file}`);
  });
});

describe('examples/*.yaml: run through the real server and worker', () => {
  let db: TestDatabase;
  let server: RunningServer;
  let worker: WorkerRuntime;
  let broker: MemoryBroker;
  let client: PlayflowClient;
  let demo: Server;
  let api: string;
  let pgConn: Record<string, unknown>;

  beforeAll(async () => {
    db = await createTestDatabase('pf_examples');
    const u = new URL(db.url);
    pgConn = { host: u.hostname, port: Number(u.port || 5432), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), database: u.pathname.slice(1) };

    const { createDemoApi } = (await import(join(EXAMPLES, 'servers/demo-api.mjs'))) as { createDemoApi: () => Server };
    demo = createDemoApi();
    await new Promise<void>((resolve) => demo.listen(0, '127.0.0.1', resolve));
    const addr = demo.address();
    api = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;

    const port = await freePort(0);
    const url = `http://127.0.0.1:${port}`;
    broker = new MemoryBroker();
    const logger = createLogger({ level: 'error' });
    const config = {
      ...loadConfig({
        DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: String(port), HOST: '127.0.0.1',
        PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'), SERVER_API_URL: url,
      }),
      brokerInstance: broker,
    };
    server = await startServer({ config, logger, handleSignals: false });
    expect((server.core as { broker?: unknown }).broker).toBe(broker);
    client = new PlayflowClient({ baseUrl: url });
    worker = new WorkerRuntime({ broker, client, workerId: 'examples-worker', python: { size: 2 }, graceSeconds: 5, logger });
    await worker.start();
    // Every example is in the catalog before any runs (composition calls examples/hello_world).
    for (const f of FILES) {
      const reg = await client.registerPlaybook(readFileSync(join(EXAMPLES, f), 'utf8'));
      expect(reg.path).toBe(`examples/${f.replace(/\.yaml$/, '')}`);
    }
  });

  afterAll(async () => {
    await worker?.stop();
    await server?.stop();
    await broker?.close();
    await new Promise((r) => (demo ? demo.close(r) : r(undefined)));
    await db?.drop();
  });

  const cases = FILES.flatMap((file) => (EXPECTED[file] ?? []).map((c, i) => ({ name: `${file}${c.payload ? ` #${i}` : ''}`, file, c })));

  it.each(cases)('$name completes with its expected result', async ({ file, c }) => {
    const payload = c.payload?.({ api, pg: pgConn }) ?? {};
    const run = await client.run({ path: `examples/${file.replace(/\.yaml$/, '')}`, payload: payload as never });
    const ex: ExecutionView = await client.waitForExecution(run.execution_id, { timeoutMs: 60_000, intervalMs: 100 });
    expect({ status: ex.status, error: ex.error }).toEqual({ status: 'completed', error: null });
    if (c.partial) expect(ex.result).toMatchObject(c.result as object);
    else expect(ex.result).toEqual(c.result);
  }, 90_000);

  it('composition ran hello_world as child executions of the parent', async () => {
    const list = await client.listExecutions({ path: 'examples/hello_world', limit: 50 });
    const children = list.executions.filter((e) => e.parent_execution_id !== null);
    expect(children.map((e) => e.payload.name).sort()).toEqual(['Grace', 'Linus']);
    expect(children.every((e) => e.status === 'completed')).toBe(true);
  });
});
