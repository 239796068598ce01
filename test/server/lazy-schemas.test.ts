/**
 * Route schemas compile at their first use (server/app/lazy-compilers.ts): the app starts with
 * none compiled, a request compiles what it needs once, validation and serialization answer as the
 * eager compilers did, and `compileAll` still finds every schema of the app compilable.
 */
import { Ajv } from 'ajv';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaCompilers } from '../../server/app/index.js';
import { LazyCompilers } from '../../server/app/lazy-compilers.js';
import { startTestServer, type TestServer } from './helpers.js';

describe('route schemas compiled at first use', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('starts with every schema pending; a request compiles its own once; compileAll compiles the rest', async () => {
    const compilers = schemaCompilers(s.app);
    const atStart = compilers.counts();
    expect(atStart.compiled).toBe(0);
    // every route has response schemas (200 and its errors), most have request parts too
    expect(atStart.pending).toBeGreaterThan(200);

    const list = await s.call('GET', '/api/catalog/playbooks');
    expect(list.statusCode).toBe(200);
    const afterOne = compilers.counts();
    expect(afterOne.compiled).toBeGreaterThan(0);
    expect(afterOne.compiled).toBeLessThan(5);
    expect(afterOne.compiled + afterOne.pending).toBe(atStart.pending);

    // the same request again compiles nothing more
    expect((await s.call('GET', '/api/catalog/playbooks')).statusCode).toBe(200);
    expect(compilers.counts()).toEqual(afterOne);

    const n = compilers.compileAll();
    expect(n).toBe(afterOne.pending);
    expect(compilers.counts()).toEqual({ compiled: atStart.pending, pending: 0 });
    expect((await s.call('GET', '/api/catalog/playbooks')).statusCode).toBe(200);
  });

  it('a lazily compiled validator refuses a bad body with the field named, and coerces query strings', async () => {
    const bad = await s.call('POST', '/api/catalog/playbook', { content: 5, path: 'x/y' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toMatch(/content/);
    // limit is an integer in the schema; the query string's text is coerced by the text validator
    const page = await s.call('GET', '/api/executions?limit=2');
    expect(page.statusCode).toBe(200);
    const tooMany = await s.call('GET', '/api/executions?limit=abc');
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().error.message).toMatch(/limit/);
  });

  it('a response is serialized by its schema: a field the schema does not name is not sent', async () => {
    const app = Fastify();
    const compilers = new LazyCompilers();
    const lazy = Fastify({ schemaController: { compilersFactory: { buildSerializer: compilers.serializerFactory() } } });
    for (const a of [app, lazy]) {
      a.get('/x', { schema: { response: { 200: { type: 'object', properties: { shown: { type: 'string' } } } } } }, async () => ({ shown: 'yes', hidden: 'secret' }));
    }
    try {
      expect(compilers.counts()).toEqual({ compiled: 0, pending: 0 }); // routes are set up at ready
      await lazy.ready();
      expect(compilers.counts()).toEqual({ compiled: 0, pending: 2 }); // GET /x and fastify's HEAD /x
      const eager = await app.inject({ method: 'GET', url: '/x' });
      const late = await lazy.inject({ method: 'GET', url: '/x' });
      expect(late.body).toBe(eager.body);
      expect(late.json()).toEqual({ shown: 'yes' });
      expect(compilers.counts()).toEqual({ compiled: 1, pending: 1 });
    } finally {
      await app.close();
      await lazy.close();
    }
  });

  it("hands ajv the parent data, so coercion can replace a whole body (fastify passes it when the validator has ajv's schemaEnv)", async () => {
    const ajv = new Ajv({ coerceTypes: 'array' });
    const compilers = new LazyCompilers();
    const app = Fastify();
    app.setValidatorCompiler(compilers.validator(({ schema }: { schema: object }) => ajv.compile(schema)));
    app.post('/n', { schema: { body: { type: 'array', items: { type: 'integer' } } } }, async (req) => ({ body: req.body }));
    try {
      const res = await app.inject({ method: 'POST', url: '/n', headers: { 'content-type': 'application/json' }, payload: '"7"' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ body: [7] });
      const bad = await app.inject({ method: 'POST', url: '/n', headers: { 'content-type': 'application/json' }, payload: '["x"]' });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().message).toMatch(/must be integer/);
    } finally {
      await app.close();
    }
  });
});
