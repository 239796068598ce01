/** SecretsClient against the real app (buildApp over PostgreSQL) on a local port. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import { createHarness, type SecretsHarness } from '../test/helpers/secrets.js';
import { ApiError, PlayflowClient } from './http.js';
import { SecretsClient } from './secrets.js';

let h: SecretsHarness;
let s: SecretsClient;
beforeAll(async () => {
  h = await createHarness();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  s = new SecretsClient(new PlayflowClient({ baseUrl: `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}` }));
});
afterAll(async () => {
  await h?.close();
});

describe('SecretsClient', () => {
  it('credentials: put, list, get (with data and cache), read, delete; validation failures are ApiError 400 with the errors', async () => {
    const meta = await s.putCredential({ name: 'api one', type: 'api_key', data: { api_key: 'k' }, tags: ['x'], description: 'first' });
    expect(meta).toMatchObject({ name: 'api one', type: 'api_key', tags: ['x'] });
    expect((await s.listCredentials({ tag: 'x' })).credentials.map((c) => c.name)).toEqual(['api one']);
    const full = await s.getCredential('api one', { include_data: true, execution_id: 12n, parent_execution_id: 11 });
    expect(full.data).toEqual({ api_key: 'k' });
    expect(full.cache).toMatchObject({ scope_type: 'execution', execution_id: '12' });
    expect((await s.getCredential(meta.id)).data).toBeUndefined();
    expect(await s.readCredential('api one')).toMatchObject({ credential_key: 'api one', credential_type: 'api_key', data: { api_key: 'k' } });
    const err = await s.putCredential({ name: 'bad', type: 'basic', data: {}, schema: { required: ['username'] } }).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 400, code: 'validation_failed', message: 'Credential validation failed', details: ['Missing required field: username'] });
    expect(await s.deleteCredential('api one')).toMatchObject({ deleted: true });
    await expect(s.readCredential('api one')).rejects.toMatchObject({ status: 404 });
  });

  it('keychain: set, get by scope, list, delete', async () => {
    expect((await s.setKeychain(9, 'tok', { token_data: { a: 1 }, scope_type: 'local', execution_id: 5n, ttl_seconds: 30 })).cache_key).toBe('tok:9:5');
    expect(await s.getKeychain(9, 'tok', { scope_type: 'local', execution_id: 5 })).toMatchObject({ status: 'success', token_data: { a: 1 } });
    expect((await s.getKeychain('9', 'tok')).status).toBe('not_found');
    expect((await s.listKeychain(9)).count).toBe(1);
    expect((await s.deleteKeychain(9, 'tok', { scope_type: 'local', execution_id: '5' })).status).toBe('success');
  });

  it('vars: set, list, get, delete', async () => {
    expect(await s.setVars(77, { a: 1, b: { c: [true] } }, { var_type: 'computed', source_step: 'x' })).toEqual({ execution_id: '77', variables_set: 2, var_names: ['a', 'b'] });
    expect((await s.listVars('77')).variables.b).toMatchObject({ value: { c: [true] }, type: 'computed', source_step: 'x' });
    expect(await s.getVar(77, 'a')).toMatchObject({ value: 1, access_count: 1 });
    expect(await s.deleteVar(77, 'a')).toEqual({ execution_id: '77', var_name: 'a', deleted: true });
    await expect(s.getVar(77, 'a')).rejects.toMatchObject({ status: 404 });
  });
});
