/**
 * A real server for HTTP tests: a fresh PostgreSQL database, the real core (migrations, services)
 * on the in-process broker, and the app from buildApp, driven with `app.inject` (or listening,
 * for subprocess tests).
 */
import type { FastifyInstance, InjectOptions } from 'fastify';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildApp, type AppOptions } from '../../server/app/index.js';
import { createServerCore, type ServerCore } from '../../server/core.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';

export interface InjectResponse {
  statusCode: number;
  body: string;
  headers: Record<string, string | string[] | number | undefined>;
  json<T = any>(): T;
}

export interface TestServer {
  app: FastifyInstance;
  core: ServerCore;
  db: TestDatabase;
  /** app.inject with the token (when the app has one) and JSON bodies. */
  call(method: InjectOptions['method'], url: string, body?: unknown, headers?: Record<string, string>): Promise<InjectResponse>;
  close(): Promise<void>;
}

export async function startTestServer(opts: AppOptions = {}): Promise<TestServer> {
  const db = await createTestDatabase('pfhttp');
  let core: ServerCore | undefined;
  try {
    core = await createServerCore({ databaseUrl: db.url, brokerUrl: 'memory', serverUrl: 'http://playflow.test', sweeper: false, poolSize: 4 });
    await core.start();
    const app = await buildApp(core.deps, opts);
    const c = core;
    return {
      app,
      core: c,
      db,
      call(method, url, body, headers = {}) {
        const h: Record<string, string> = { ...headers };
        if (opts.apiToken && !('authorization' in h)) h.authorization = `Bearer ${opts.apiToken}`;
        if (body !== undefined && !('content-type' in h)) h['content-type'] = 'application/json';
        return app.inject({ method, url, headers: h, payload: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
      },
      async close() {
        await app.close();
        await c.close();
        await db.drop();
      },
    };
  } catch (err) {
    await core?.close().catch(() => {});
    await db.drop().catch(() => {});
    throw err;
  }
}

export function example(name: string): string {
  return readFileSync(fileURLToPath(new URL(`../../examples/${name}`, import.meta.url)), 'utf8');
}

export function fixture(rel: string): string {
  return readFileSync(fileURLToPath(new URL(`../fixtures/playbooks/${rel}`, import.meta.url)), 'utf8');
}

/** A one-step playbook at `path` (a python step; no worker runs in these tests). */
export function simplePlaybook(path: string, extra = ''): string {
  return `apiVersion: playflow.io/v2
kind: Playbook
metadata:
  name: ${path.split('/').pop()}
  path: ${path}
workload:
  greeting: hello
workflow:
  - step: start
    tool:
      kind: python
      code: |
        result = {"ok": True}
${extra}`;
}
