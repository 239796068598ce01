/** startServer (what `playflow server start` runs): listening, graceful stop with a request in flight. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../server/logger.js';
import { startServer } from '../../server/main.js';
import { createTestDatabase } from '../helpers/pg.js';

describe('startServer', () => {
  it('finishes a request in flight on stop, then refuses new connections', async () => {
    const db = await createTestDatabase('pfmain');
    const config = loadConfig({ DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
    const server = await startServer({ config, handleSignals: false, dev: true, logger: createLogger({ level: 'silent' }) });
    try {
      const base = server.address;
      expect((await fetch(`${base}/health`)).status).toBe(200);
      // The credentials routes are mounted (dev key).
      expect((await fetch(`${base}/api/credentials`)).status).toBe(200);

      const slow = fetch(`${base}/api/postgres/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close' },
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
