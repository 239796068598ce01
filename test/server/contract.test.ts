/**
 * One contract (issue 16, item 1): the schemas of common/contract/ are what fastify validates
 * requests with, what the OpenAPI document (/docs/json) publishes, and — through `Static` — the
 * types common/protocol.ts gives clients. A request that breaks the contract is refused at the
 * edge with a 400 naming the field in the schema's own words; the service never sees it.
 */
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  CLAIM_NEXT_MAX, ClaimNextRequest, ClaimRequest, contractSchemas, EXECUTION_LIST_LIMIT, HeartbeatRequest, RunBody, WorkerEvent,
  type Static, type TSchema,
} from '../../common/contract/index.js';
import type * as protocol from '../../common/protocol.js';
import { simplePlaybook, startTestServer, type TestServer } from './helpers.js';

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer();
  expect((await s.call('POST', '/api/catalog/playbook', { content: simplePlaybook('contract/one') })).statusCode).toBe(201);
});

afterAll(async () => {
  await s?.close();
});

/**
 * A contract schema as @fastify/swagger writes it into an OpenAPI 3.0 document: `$id` dropped,
 * `{$ref: 'Name#'}` pointing into components, `type: [t, 'null']` as `type: t, nullable: true`.
 */
function asOpenApi(schema: TSchema): unknown {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (!node || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) {
      if (k === '$id') continue;
      if (k === '$ref' && typeof v === 'string') out.$ref = `#/components/schemas/${v.replace(/#$/, '')}`;
      else if (k === 'type' && Array.isArray(v) && v.includes('null')) {
        out.type = v.find((t) => t !== 'null');
        out.nullable = true;
      } else out[k] = walk(v);
    }
    return out;
  };
  return walk(JSON.parse(JSON.stringify(schema)));
}

/** A schema's own refusal wording (`x-message`, see server/app/support.ts). */
const wording = (schema: TSchema): string => (schema as TSchema & { 'x-message': string })['x-message'];

/** The refusal of a field: its details entry. */
async function refusal(method: 'GET' | 'POST', url: string, body?: unknown) {
  const r = await s.call(method, url, body);
  expect(r.statusCode, `${method} ${url}: ${r.body}`).toBe(400);
  const err = r.json().error as { code: string; message: string; details: Array<{ location: string; field: string; message: string }> };
  expect(err.code).toBe('bad_request');
  return err;
}

describe('one contract: common/contract drives validation, the document and the types', () => {
  it('every shared component of /docs/json is the contract schema of that name', async () => {
    const doc = (await s.call('GET', '/docs/json')).json();
    for (const schema of contractSchemas) {
      expect(doc.components.schemas[schema.$id!], schema.$id).toEqual(asOpenApi(schema));
    }
    // request bodies too: the claim body in the document is the contract's ClaimRequest
    const claim = doc.paths['/api/v2/commands/{queue_id}/claim'].post.requestBody.content['application/json'].schema;
    expect(claim).toEqual(asOpenApi(ClaimRequest));
    const run = doc.paths['/api/v2/execute'].post.requestBody.content['application/json'].schema;
    expect(run).toEqual(asOpenApi(RunBody));
  });

  it('a body breaking the contract is a 400 naming the field in the words of the schema', async () => {
    const workerIdRule = wording(ClaimRequest.properties.worker_id);
    const claim = await refusal('POST', '/api/v2/commands/1/claim', { worker_id: 'execution:12' });
    expect(claim.details).toEqual([{ location: 'body', field: 'worker_id', message: workerIdRule }]);
    expect(claim.message).toBe(`body field 'worker_id' ${workerIdRule}`);
    // the same WorkerId rule, from the same schema, on the heartbeat, the release and claim_next
    expect((await refusal('POST', '/api/v2/commands/1/heartbeat', { worker_id: 'w'.repeat(201) })).details[0])
      .toEqual({ location: 'body', field: 'worker_id', message: wording(HeartbeatRequest.properties.worker_id) });
    expect((await refusal('POST', '/api/v2/workers/execution:1/release')).details[0].field).toBe('worker_id');
    const next = await refusal('POST', '/api/v2/events', {
      events: [{ execution_id: '1', name: 'step.note' }], claim_next: { worker_id: 'w', max: CLAIM_NEXT_MAX + 1 },
    });
    expect(next.details).toEqual([{ location: 'body', field: 'claim_next.max', message: `must be <= ${ClaimNextRequest.properties.max.maximum}` }]);
  });

  it('a name the server records itself is refused at the edge, naming the field; the execution is untouched', async () => {
    const run = (await s.call('POST', '/api/v2/execute', { path: 'contract/one' })).json();
    const before = (await s.call('GET', `/api/events/${run.execution_id}`)).json();
    const err = await refusal('POST', '/api/v2/events', { events: [{ execution_id: run.execution_id, step: null, name: 'execution_completed', payload: {} }] });
    expect(err.details).toEqual([{ location: 'body', field: 'events[0].name', message: wording(WorkerEvent.properties.name) }]);
    const after = (await s.call('GET', `/api/events/${run.execution_id}`)).json();
    expect(after.last_seq).toBe(before.last_seq);
    expect((await s.call('GET', `/api/execution/${run.execution_id}`)).json().status).not.toBe('completed');
  });

  it('a run body with a field it does not have is refused by name, and no execution is started', async () => {
    const before = (await s.call('GET', '/api/executions?path=contract/one&limit=1000')).json().count;
    for (const url of ['/api/run/playbook', '/api/v2/execute']) {
      // a typo and a reference-era name: ignored, either started the playbook without its input
      for (const field of ['paylod', 'args']) {
        const err = await refusal('POST', url, { path: 'contract/one', [field]: { x: 1 } });
        expect(err.details).toEqual([{ location: 'body', field, message: 'is not allowed' }]);
        expect(err.message).toBe(`body field '${field}' is not allowed`);
      }
    }
    expect((await s.call('GET', '/api/executions?path=contract/one&limit=1000')).json().count).toBe(before);
    // every field the contract has still passes
    const ok = await s.call('POST', '/api/run/playbook', { path: 'contract/one', payload: { x: 1 }, version: 1 });
    expect(ok.statusCode, ok.body).toBe(201);
  });

  it('the document gives every route with a body its 413 and 415, and a run its 410 (a child of an ended parent)', async () => {
    const doc = (await s.call('GET', '/docs/json')).json();
    const withBody: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        if (!op.requestBody) continue;
        withBody.push(`${method} ${path}`);
        expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['413', '415']));
      }
    }
    expect(withBody).toContain('post /api/run/playbook');
    for (const path of ['/api/run/playbook', '/api/v2/execute']) expect(Object.keys(doc.paths[path].post.responses)).toContain('410');
    // and the server answers them as documented
    const text = await s.call('POST', '/api/run/playbook', 'x', { 'content-type': 'text/plain' });
    expect(text.statusCode).toBe(415);
  });

  it('list limits are the contract constants: default in the answer, one above the cap refused', async () => {
    const list = await s.call('GET', '/api/executions');
    expect(list.json()).toMatchObject({ limit: EXECUTION_LIST_LIMIT.default, offset: 0 });
    expect((await s.call('GET', `/api/executions?limit=${EXECUTION_LIST_LIMIT.max}`)).statusCode).toBe(200);
    const over = await refusal('GET', `/api/executions?limit=${EXECUTION_LIST_LIMIT.max + 1}`);
    expect(over.details).toEqual([{ location: 'querystring', field: 'limit', message: `must be <= ${EXECUTION_LIST_LIMIT.max}` }]);
  });

  it('id 0 is a well-formed id that no row has: 404 everywhere, as any unknown id', async () => {
    expect((await s.call('GET', '/api/execution/0')).statusCode).toBe(404);
    expect((await s.call('POST', '/api/v2/events', { execution_id: 0, name: 'step.note' })).statusCode).toBe(404);
    expect((await s.call('POST', '/api/v2/events', { execution_id: '0', name: 'step.note' })).statusCode).toBe(404);
    expect((await s.call('POST', '/api/v2/commands/0/claim', { worker_id: 'w' })).statusCode).toBe(404);
    expect((await s.call('POST', '/api/execution/0/cancel')).statusCode).toBe(404);
    // and a child naming parent 0 is "parent not found", not a malformed request
    expect((await s.call('POST', '/api/v2/execute', { path: 'contract/one', parent_execution_id: 0 })).statusCode).toBe(404);
  });

  it('lease_seconds is one rule for claim, heartbeat and claim_next: a positive number of seconds', async () => {
    // a fraction passes the edge on the claim as on claim_next (unknown queue entry: 404, not 400)
    expect((await s.call('POST', '/api/v2/commands/987654321/claim', { worker_id: 'w', lease_seconds: 1.5 })).statusCode).toBe(404);
    expect((await refusal('POST', '/api/v2/commands/1/claim', { worker_id: 'w', lease_seconds: 0 })).details[0].field).toBe('lease_seconds');
    expect((await refusal('POST', '/api/v2/events', { events: [{ execution_id: '1', name: 'step.note' }], claim_next: { worker_id: 'w', lease_seconds: 0 } })).details[0].field)
      .toBe('claim_next.lease_seconds');
  });

  it('the types common/protocol.ts publishes are the static types of the schemas', () => {
    expectTypeOf<protocol.ClaimRequest>().toEqualTypeOf<Static<typeof ClaimRequest>>();
    expectTypeOf<protocol.WorkerEvent>().toEqualTypeOf<Static<typeof WorkerEvent>>();
    expectTypeOf<protocol.ClaimNextRequest>().toEqualTypeOf<Static<typeof ClaimNextRequest>>();
    expectTypeOf<protocol.ClaimRequest['lease_seconds']>().toEqualTypeOf<number | undefined>();
  });
});
