/** startServer (what `playflow server start` runs): listening, graceful stop with a request in flight. */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../common/logger.js';
import { startServer } from '../../server/main.js';
import { createTestDatabase } from '../helpers/pg.js';

describe('startServer', () => {
  it('finishes a request in flight on stop, then refuses new connections', async () => {
    const db = await createTestDatabase('pfmain');
    const config = loadConfig({
      DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', PLAYFLOW_API_TOKEN: 't', PLAYFLOW_SQL_API: 'on',
    });
    const server = await startServer({ config, handleSignals: false, dev: true, logger: createLogger({ level: 'silent' }) });
    try {
      const base = server.address;
      expect((await fetch(`${base}/health`)).status).toBe(200);
      // The credentials routes are mounted (dev key).
      expect((await fetch(`${base}/api/credentials`, { headers: { authorization: 'Bearer t' } })).status).toBe(200);

      const slow = fetch(`${base}/api/postgres/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close', authorization: 'Bearer t' },
        body: JSON.stringify({ query: "SELECT pg_sleep(0.8), 'done' AS r" }),
      });
      await new Promise((r) => setTimeout(r, 200));
      const stopping = server.stop();
      const res = await slow;
      expect(res.status).toBe(200);
      expect(((await res.json()) as { result: Array<{ r: string }> }).result[0].r).toBe('done');
      await stopping;
      await expect(fetch(`${base}/health`)).rejects.toThrow();
      await server.stop(); // idempotent
    } finally {
      await server.stop().catch(() => {});
      await db.drop();
    }
  });
});

describe('startServer stop with sockets that hold no request', () => {
  // A browser's preconnected socket, or a request still being sent: Node's close() waited for them
  // for minutes, which held playflow dev's Ctrl-C while a console tab was open.
  it('closes them and returns at once, while a keep-alive socket with a finished request is closed as before', async () => {
    const db = await createTestDatabase('pfmain');
    const config = loadConfig({ DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
    const server = await startServer({ config, handleSignals: false, dev: true, logger: createLogger({ level: 'silent' }) });
    const port = Number(new URL(server.address).port);
    const open = async (send?: string) => {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      await new Promise((r) => s.once('connect', r));
      if (send) s.write(send);
      return Object.assign(s, { ended: new Promise<void>((r) => s.once('close', () => r())) });
    };
    try {
      const empty = await open();
      const partial = await open('GET /health HTTP/1.1\r\nHost: x\r\n');
      const kept = await open('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      await new Promise((r) => kept.once('data', r));
      await new Promise((r) => setTimeout(r, 100));
      const t0 = Date.now();
      await server.stop();
      expect(Date.now() - t0).toBeLessThan(5_000);
      await Promise.all([empty.ended, partial.ended, kept.ended]);
    } finally {
      await server.stop().catch(() => {});
      await db.drop();
    }
  }, 60_000);
});

describe('startServer refuses an open API on a reachable address', () => {
  it('HOST=0.0.0.0 without a token: a ConfigError naming PLAYFLOW_API_TOKEN and PLAYFLOW_ALLOW_ANONYMOUS, before touching the database', async () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', BROKER_URL: 'memory', PORT: '0', HOST: '0.0.0.0', LOG_LEVEL: 'silent' });
    await expect(startServer({ config, handleSignals: false, dev: true, logger: createLogger({ level: 'silent' }) }))
      .rejects.toThrow(/PLAYFLOW_API_TOKEN.*PLAYFLOW_ALLOW_ANONYMOUS=true/);
  });

  it('PLAYFLOW_ALLOW_ANONYMOUS=true: it listens', async () => {
    const db = await createTestDatabase('pfmain');
    const config = loadConfig({ DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '0.0.0.0', LOG_LEVEL: 'silent', PLAYFLOW_ALLOW_ANONYMOUS: 'true' });
    const server = await startServer({ config, handleSignals: false, dev: true, logger: createLogger({ level: 'silent' }) });
    try {
      expect((await fetch(`http://127.0.0.1:${new URL(server.address).port}/healthz`)).status).toBe(200);
    } finally {
      await server.stop();
      await db.drop();
    }
  });
});

describe('startServer takes PLAYFLOW_MAX_BODY_BYTES as its body limit', () => {
  it('a body over the limit is 413 before it reaches a route; under it, the route answers', async () => {
    const db = await createTestDatabase('pfbody');
    const config = loadConfig({
      DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', PLAYFLOW_API_TOKEN: 't', PLAYFLOW_MAX_BODY_BYTES: '20000',
    });
    const server = await startServer({ config, handleSignals: false, dev: true, logger: createLogger({ level: 'silent' }) });
    try {
      const run = (name: string) => fetch(`${server.address}/api/run/playbook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer t' },
        body: JSON.stringify({ path: 'no/such', payload: { name } }),
      });
      expect((await run('x'.repeat(30_000))).status).toBe(413);
      expect((await run('x'.repeat(10_000))).status).toBe(404); // read, and refused by the route: no such playbook
    } finally {
      await server.stop().catch(() => {});
      await db.drop();
    }
  });
});
