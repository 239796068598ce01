/**
 * The HTTP layer over a core on real NATS JetStream (unique stream/subject/consumer names):
 * /health reports the broker, and starting an execution publishes its command notification.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { buildApp } from '../../server/app/index.js';
import { createServerCore, type ServerCore } from '../../server/core.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { BROKER_URL, uniqueBrokerNames } from '../helpers/nats.js';
import { simplePlaybook } from './helpers.js';

let db: TestDatabase;
let core: ServerCore;
let app: FastifyInstance;
const names = uniqueBrokerNames('HTTP');

beforeAll(async () => {
  db = await createTestDatabase('pfnats');
  core = await createServerCore({
    databaseUrl: db.url, serverUrl: 'http://playflow.test', sweeper: false, poolSize: 4,
    broker: { url: BROKER_URL, ...names },
  });
  await core.start();
  app = await buildApp(core.deps);
});
afterAll(async () => {
  await app?.close();
  await core?.close();
  await db?.drop();
  // Remove the suite's stream so runs leave nothing behind.
  const nc = await connect({ servers: BROKER_URL });
  await (await jetstreamManager(nc)).streams.delete(names.stream).catch(() => {});
  await nc.close();
});

describe('with NATS JetStream', () => {
  it('/health reports the broker reachable', async () => {
    const r = await app.inject({ method: 'GET', url: '/health' });
    expect(r.statusCode).toBe(200);
    expect(r.json().checks.broker.status).toBe('ok');
  });

  it('POST /api/v2/execute publishes {execution_id, queue_id, step, server_url}', async () => {
    await app.inject({ method: 'POST', url: '/api/catalog/playbook', payload: { content: simplePlaybook('nats/one') } });
    const r = await app.inject({ method: 'POST', url: '/api/v2/execute', payload: { path: 'nats/one', payload: {} } });
    expect(r.statusCode).toBe(201);
    const { execution_id } = r.json();
    const msgs = await core.broker.fetch({ max: 1, expiresMs: 5000 });
    expect(msgs).toHaveLength(1);
    expect(msgs[0].data).toEqual({ execution_id, queue_id: expect.stringMatching(/^\d+$/), step: 'start', server_url: 'http://playflow.test' });
    msgs[0].ack();
    const claim = await app.inject({ method: 'POST', url: `/api/v2/commands/${msgs[0].data.queue_id}/claim`, payload: { worker_id: 'w' } });
    expect(claim.statusCode).toBe(200);
  });
});
