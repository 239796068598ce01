import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type SecretsHarness } from '../../test/helpers/secrets.js';
import { createSecretsHooks } from './hooks.js';
import { silentLogger } from '../../common/logger.js';

let h: SecretsHarness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

const setVars = (exec: string | number, body: object) => h.app.inject({ method: 'POST', url: `/api/vars/${exec}`, payload: body });
const all = async (exec: string | number) => (await h.app.inject({ method: 'GET', url: `/api/vars/${exec}` })).json();
const one = (exec: string | number, name: string) => h.app.inject({ method: 'GET', url: `/api/vars/${exec}/${encodeURIComponent(name)}` });

describe('vars API', () => {
  it('POST sets any JSON value with the given var_type and source_step', async () => {
    const r = await setVars(100, { variables: { s: 'text', n: 42, f: 1.5, o: { a: [1, { b: null }] }, l: [1, 2], t: true, z: null }, var_type: 'computed', source_step: 'calc' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ execution_id: '100', variables_set: 7, var_names: ['s', 'n', 'f', 'o', 'l', 't', 'z'] });
    const a = await all(100);
    expect(a.count).toBe(7);
    expect(a.variables.o).toMatchObject({ value: { a: [1, { b: null }] }, type: 'computed', source_step: 'calc', access_count: 0 });
    expect(a.variables.z.value).toBeNull();
    expect(a.variables.t.value).toBe(true);
    expect(Object.keys(a.variables.s).sort()).toEqual(['access_count', 'accessed_at', 'created_at', 'source_step', 'type', 'value']);
  });

  it('var_type defaults to user_defined; source_step to null', async () => {
    await setVars(101, { variables: { city: 'Paris' } });
    expect((await all(101)).variables.city).toMatchObject({ value: 'Paris', type: 'user_defined', source_step: null });
  });

  it('GET all does not change access tracking; GET one increments access_count and updates accessed_at', async () => {
    const before = (await all(100)).variables.n;
    await all(100);
    expect((await all(100)).variables.n).toEqual(before);
    await new Promise((r) => setTimeout(r, 15));
    const r1 = await one(100, 'n');
    expect(r1.statusCode).toBe(200);
    expect(Object.keys(r1.json()).sort()).toEqual(['access_count', 'accessed_at', 'created_at', 'execution_id', 'source_step', 'type', 'value', 'var_name']);
    expect(r1.json()).toMatchObject({ execution_id: '100', var_name: 'n', value: 42, type: 'computed', source_step: 'calc', access_count: 1 });
    expect(new Date(r1.json().accessed_at).getTime()).toBeGreaterThan(new Date(before.accessed_at).getTime());
    expect((await one(100, 'n')).json().access_count).toBe(2);
    expect((await all(100)).variables.n.access_count).toBe(2);
    expect((await one(100, 'nope')).statusCode).toBe(404);
  });

  it('upsert preserves created_at, refreshes accessed_at, replaces value/type/source_step', async () => {
    const before = (await all(100)).variables.s;
    await new Promise((r) => setTimeout(r, 15));
    await setVars('100', { variables: { s: { now: 'object' } }, var_type: 'iterator_state', source_step: 'loop' });
    const after = (await all(100)).variables.s;
    expect(after.created_at).toBe(before.created_at);
    expect(new Date(after.accessed_at).getTime()).toBeGreaterThan(new Date(before.accessed_at).getTime());
    expect(after).toMatchObject({ value: { now: 'object' }, type: 'iterator_state', source_step: 'loop' });
  });

  it('var_name longer than 255 characters is a 400 naming it; 255 is fine', async () => {
    const long = 'v'.repeat(256);
    const r = await setVars(102, { variables: { ok: 1, [long]: 2 } });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.message).toContain(long);
    expect(r.json().error.message).toContain('255');
    expect((await all(102)).count).toBe(0);
    expect((await setVars(102, { variables: { ['w'.repeat(255)]: 1 } })).json().variables_set).toBe(1);
  });

  it('var_name length counts characters, not UTF-16 units: 255 emoji are fine, 256 are refused', async () => {
    const r = await setVars(104, { variables: { ['😀'.repeat(128)]: 1, ['😀'.repeat(255)]: 2 } });
    expect(r.statusCode).toBe(200);
    expect((await all(104)).count).toBe(2);
    const long = await setVars(104, { variables: { ['😀'.repeat(256)]: 3 } });
    expect(long.statusCode).toBe(400);
    expect(long.json().error.message).toContain('exceeds 255 characters');
  });

  it('var_type outside the four values, missing variables, bad execution ids are 400', async () => {
    expect((await setVars(103, { variables: { a: 1 }, var_type: 'global' })).statusCode).toBe(400);
    for (const t of ['user_defined', 'step_result', 'computed', 'iterator_state']) {
      expect((await setVars(103, { variables: { a: 1 }, var_type: t })).statusCode).toBe(200);
    }
    expect((await setVars(103, { var_type: 'computed' })).statusCode).toBe(400);
    expect((await setVars('abc', { variables: {} })).statusCode).toBe(400);
  });

  it('DELETE answers {execution_id, var_name, deleted}', async () => {
    const d = await h.app.inject({ method: 'DELETE', url: '/api/vars/101/city' });
    expect(d.json()).toEqual({ execution_id: '101', var_name: 'city', deleted: true });
    const again = await h.app.inject({ method: 'DELETE', url: '/api/vars/101/city' });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual({ execution_id: '101', var_name: 'city', deleted: false });
  });

  it('int64 execution ids round-trip as strings', async () => {
    const big = '9007199254740993';
    expect((await setVars(big, { variables: { a: 1 } })).json().execution_id).toBe(big);
    expect((await all(big)).execution_id).toBe(big);
  });
});

describe('ExecutionHooks', () => {
  const hooks = createSecretsHooks({ logger: silentLogger });

  it('onVarsSet writes step_result with source_step; loadVars returns the other types only', async () => {
    await setVars(200, { variables: { from_api: 'x', shared: 'api' } });
    await h.db.tx((c) => hooks.onVarsSet(c, '200', { user_id: 7, shared: 'step', rows: [{ a: 1 }] }, 'fetch_user'));
    const a = await all(200);
    expect(a.variables.user_id).toMatchObject({ value: 7, type: 'step_result', source_step: 'fetch_user' });
    expect(a.variables.shared).toMatchObject({ value: 'step', type: 'step_result', source_step: 'fetch_user' });
    await setVars(200, { variables: { computed_v: 3 }, var_type: 'computed' });
    const loaded = await h.db.tx((c) => hooks.loadVars(c, '200'));
    expect(loaded).toEqual({ from_api: 'x', computed_v: 3 });
  });

  it('loadVars returns what the API set, a var_type step_result included, and not what the vars block set', async () => {
    await h.db.tx((c) => hooks.onVarsSet(c, '203', { engine_v: 1, both: 'engine' }, 'fetch'));
    await setVars(203, { variables: { api_v: 'x' }, var_type: 'step_result', source_step: 'external' });
    expect(await h.db.tx((c) => hooks.loadVars(c, '203'))).toEqual({ api_v: 'x' });
    // the last writer owns a name: the API's over the engine's, and the engine's over the API's
    await setVars(203, { variables: { both: 'api' }, var_type: 'step_result' });
    expect(await h.db.tx((c) => hooks.loadVars(c, '203'))).toEqual({ api_v: 'x', both: 'api' });
    await h.db.tx((c) => hooks.onVarsSet(c, '203', { api_v: 'engine' }, 'fetch'));
    expect(await h.db.tx((c) => hooks.loadVars(c, '203'))).toEqual({ both: 'api' });
  });

  it('onVarsSet handles emoji names by characters: 255 kept, 256 skipped', async () => {
    await h.db.tx((c) => hooks.onVarsSet(c, '204', { ['😀'.repeat(255)]: 1, ['😀'.repeat(256)]: 2 }, 's'));
    expect(Object.keys((await all(204)).variables)).toEqual(['😀'.repeat(255)]);
  });

  it('onVarsSet skips over-long names instead of failing the transaction', async () => {
    await h.db.tx((c) => hooks.onVarsSet(c, '201', { ok: 1, ['x'.repeat(300)]: 2 }, 's'));
    expect(Object.keys((await all(201)).variables)).toEqual(['ok']);
  });

  it('onExecutionTerminal removes the execution\'s variables only', async () => {
    await setVars(202, { variables: { keep: 1 } });
    await h.db.tx((c) => hooks.onExecutionTerminal(c, { execution_id: '200', root_execution_id: '200', catalog_id: '1' }));
    expect((await all(200)).count).toBe(0);
    expect((await all(202)).count).toBe(1);
  });
});
