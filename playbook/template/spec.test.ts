/**
 * Every template and condition that appears in the two spec documents and DESIGN.md, plus the
 * templates of the repository's example playbooks, evaluated the way the engine uses them.
 */
import { describe, expect, it } from 'vitest';
import { TemplateError, buildContext, deferKeychain, evalCondition, renderString, renderValue } from './index.js';
import type { Json } from '../types.js';

const httpOk = (body: Json) => ({ id: 'req-1', status: 200, data: body });

describe('credentials-keychain-variables.md', () => {
  it('{{ keychain.<name>.<field> }} reads a keychain entry field', () => {
    const c = buildContext({ keychain: { api_token: { access_token: 'abc', token_type: 'Bearer' } } });
    expect(renderString('{{ keychain.api_token.access_token }}', c)).toBe('abc');
    expect(renderString('{{ keychain.api_token.token_type }} {{ keychain.api_token.access_token }}', c)).toBe('Bearer abc');
  });
  it('keychain references are deferred to the worker by the engine', () => {
    const tool = { kind: 'http', headers: { Authorization: 'Bearer {{ keychain.api_token.access_token }}' }, endpoint: '{{ workload.api }}/x' };
    const out = renderValue(tool, buildContext({ workload: { api: 'http://h' } }), { field: 'tool', defer: deferKeychain });
    expect(out).toEqual({ kind: 'http', headers: { Authorization: 'Bearer {{ keychain.api_token.access_token }}' }, endpoint: 'http://h/x' });
  });
  it('a failed renewal resolves the entry to an empty object: rendering fails', () => {
    const c = buildContext({ keychain: { api_token: {} } });
    expect(() => renderString('{{ keychain.api_token.access_token }}', c, { field: 'tool.headers.Authorization' })).toThrow(
      "'{{ keychain.api_token.access_token }}' in tool.headers.Authorization: 'keychain.api_token' has no attribute 'access_token'",
    );
  });
  it('{{ vars.<name> }} / {{ vars.<var_name> }} read execution variables of any JSON type', () => {
    const c = buildContext({ vars: { order_id: 42, customer: { name: 'ada' }, flags: [true] } });
    expect(renderString('{{ vars.order_id }}', c)).toBe(42);
    expect(renderString('{{ vars.customer }}', c)).toEqual({ name: 'ada' });
    expect(renderString('/orders/{{ vars.order_id }}', c)).toBe('/orders/42');
    expect(renderString('{{ vars.flags }}', c)).toEqual([true]);
  });
  it('auth: "{{ workload.<name> }}" gives the credential reference name', () => {
    const c = buildContext({ workload: { pg_auth: 'pg_local' } });
    expect(renderString('{{ workload.pg_auth }}', c, { field: 'tool.auth' })).toBe('pg_local');
  });
  it('vars block: entries render with result bound (data extracted) and prior steps by name', () => {
    const c = buildContext({
      result: httpOk({ order_id: 'o-1', lines: [{ qty: 2 }, { qty: 5 }] }),
      steps: { start: { greeting: 'hi' } },
    });
    const vars = { order_id: '{{ result.order_id }}', units: "{{ result.lines | map(attribute='qty') | sum }}", greeting: '{{ start.greeting }}' };
    expect(renderValue(vars, c)).toEqual({ order_id: 'o-1', units: 7, greeting: 'hi' });
  });
  it('vars block: a template that fails to render raises TemplateError naming the var (the server logs and skips it)', () => {
    const c = buildContext({ result: httpOk({}) });
    try {
      renderString('{{ result.missing_field }}', c, { field: 'vars.order_id' });
      throw new Error('no error');
    } catch (e) {
      expect(e).toBeInstanceOf(TemplateError);
      expect((e as TemplateError).field).toBe('vars.order_id');
      expect((e as TemplateError).variable).toBe('result.missing_field');
    }
  });
});

describe('playbooks-executions-events.md', () => {
  it('Jinja2-style {{ expression }} is evaluated deterministically', () => {
    const c = buildContext({ payload: { n: 2 } });
    expect(renderString('{{ payload.n * 21 }}', c)).toBe(42);
    expect(renderString('{{ payload.n * 21 }}', c)).toBe(renderString('{{ payload.n * 21 }}', c));
  });
  it('case when: a Jinja boolean expression evaluated with an event object', () => {
    const c = buildContext({ event: { name: 'step.enter', payload: {} } });
    expect(evalCondition("event.name == 'step.enter'", c)).toBe(true);
    expect(evalCondition("event.name == 'call.done'", c)).toBe(false);
  });
  it("when: error.status in [500, 502, 503] (call.done with an HTTP error)", () => {
    const failed = buildContext({ event: { name: 'call.done', payload: { error: { status: 502, message: 'bad gateway' } } } });
    expect(evalCondition('error.status in [500, 502, 503]', failed)).toBe(true);
    expect(evalCondition('{{ error.status in [500, 502, 503] }}', failed)).toBe(true);
    const notFound = buildContext({ event: { name: 'call.done', payload: { error: { status: 404 } } } });
    expect(evalCondition('error.status in [500, 502, 503]', notFound)).toBe(false);
    const ok = buildContext({ event: { name: 'call.done', payload: { response: httpOk({}) } } });
    expect(evalCondition('error.status in [500, 502, 503]', ok)).toBe(false);
  });
  it('response.data... addresses the API body (envelope unwrapped), and so does response...', () => {
    const c = buildContext({ event: { name: 'call.done' }, response: httpOk({ items: [1, 2], has_more: true, page: 1 }) });
    expect(evalCondition('response.data.has_more', c)).toBe(true);
    expect(evalCondition('response.has_more', c)).toBe(true);
    expect(renderString('{{ response.data.items }}', c)).toEqual([1, 2]);
    expect(renderString('{{ response.data.page + 1 }}', c)).toBe(2);
  });
  it('retry reserved variables: _retry.index, _retry.count, iteration, page, pages', () => {
    const c = buildContext({ response: httpOk({ page: 3, total_pages: 5 }), retry: { index: 3, count: 2 }, pages: [[1], [2]], workload: { page_size: 50 }, vars: { since: '2024-01-01' } });
    expect(renderString('{{ _retry.index }}', c)).toBe(3);
    expect(renderString('{{ _retry.count }}', c)).toBe(2);
    expect(renderString('{{ iteration }}', c)).toBe(3);
    expect(renderString('{{ page.page }}', c)).toBe(3);
    expect(renderString('{{ pages | length }}', c)).toBe(2);
    expect(evalCondition('_retry.index < 10 and response.data.page < response.data.total_pages', c)).toBe(true);
    // next_call templates also see workload and vars
    const nextCall = { params: { page: '{{ response.data.page + 1 }}', size: '{{ workload.page_size }}', since: '{{ vars.since }}' } };
    expect(renderValue(nextCall, c, { field: 'retry[0].then.next_call' })).toEqual({ params: { page: 4, size: 50, since: '2024-01-01' } });
  });
  it('legacy _loop.index / _loop.count still read the retry counters', () => {
    const c = buildContext({ retry: { index: 2, count: 1 } });
    expect(renderString('{{ _loop.index }}/{{ _loop.count }}', c)).toBe('2/1');
  });
  it('legacy loop.pagination continue_while: response envelope with data, iteration (0-based), accumulated', () => {
    const c = buildContext({ response: httpOk({ next_cursor: 'abc', items: [1] }), iteration: 0, extra: { accumulated: [1, 2, 3] } });
    expect(evalCondition('response.data.next_cursor is not none and response.data.next_cursor != ""', c)).toBe(true);
    expect(evalCondition('response.data.next_cursor', c)).toBe(true);
    expect(evalCondition('iteration < 1000 and (accumulated | length) < 10', c)).toBe(true);
    const end = buildContext({ response: httpOk({ next_cursor: null, items: [] }), iteration: 4 });
    expect(evalCondition('response.data.next_cursor is not none and response.data.next_cursor != ""', end)).toBe(false);
    expect(evalCondition('response.data.next_cursor', end)).toBe(false);
    expect(evalCondition('response.status == 200', end)).toBe(true);
  });
  it('pagination patterns: page number, offset, cursor, URL-based next_call.url from a links field', () => {
    const c = buildContext({ response: httpOk({ page: 1, pageSize: 20, offset: 0, limit: 20, cursor: 'n1', links: { next: 'http://api/items?page=2' } }), retry: { index: 1, count: 1 } });
    expect(renderValue({ page: '{{ response.data.page + 1 }}', pageSize: '{{ response.data.pageSize }}' }, c)).toEqual({ page: 2, pageSize: 20 });
    expect(renderValue({ offset: '{{ response.data.offset + response.data.limit }}', limit: '{{ response.data.limit }}' }, c)).toEqual({ offset: 20, limit: 20 });
    expect(renderString('{{ response.data.cursor }}', c)).toBe('n1');
    expect(renderString('{{ response.data.links.next }}', c)).toBe('http://api/items?page=2');
  });
  it('loop: `in` expression gives the native collection; the iterator is visible in tool config and when', () => {
    const base = { workload: { cities: [{ name: 'Oslo' }, { name: 'Lima' }] } };
    expect(renderString('{{ workload.cities }}', buildContext(base), { field: 'loop.in' })).toEqual([{ name: 'Oslo' }, { name: 'Lima' }]);
    const item = buildContext({ ...base, loop: { iterator: 'city', item: { name: 'Lima' } } });
    expect(renderValue({ params: { q: '{{ city.name }}' } }, item)).toEqual({ params: { q: 'Lima' } });
    expect(evalCondition("city.name == 'Lima'", item)).toBe(true);
  });
  it('next action args render to native values from previous step results', () => {
    const c = buildContext({ steps: { fetch: httpOk({ users: [{ id: 1 }] }) } });
    expect(renderValue({ users: '{{ fetch.users }}', first: '{{ fetch.data.users[0].id }}' }, c)).toEqual({ users: [{ id: 1 }], first: 1 });
  });
});

describe('DESIGN.md §5 and §8', () => {
  it('{{ step.data.x }} and {{ step.x }} both reach a step result', () => {
    const c = buildContext({ steps: { step: httpOk({ x: 'X' }) } });
    expect(renderString('{{ step.data.x }}', c)).toBe('X');
    expect(renderString('{{ step.x }}', c)).toBe('X');
  });
  it("'{{ fetch.data.items }}' in tool.params.items: 'fetch' is undefined", () => {
    expect(() => renderValue({ items: '{{ fetch.data.items }}' }, buildContext({}), { field: 'tool.params' })).toThrow(
      "'{{ fetch.data.items }}' in tool.params.items: 'fetch' is undefined",
    );
  });
  it("{{ ''.constructor.constructor('return process')().version }} is refused", () => {
    expect(() => renderString("{{ ''.constructor.constructor('return process')().version }}", {})).toThrow(/not allowed/);
  });
});

describe('example playbooks in examples/', () => {
  it('case_routing / retry / pagination conditions', () => {
    const low = buildContext({ event: { name: 'call.done' }, response: httpOk({ score: 30 }) });
    expect(evalCondition("{{ event.name == 'call.done' and response.score < 50 }}", low)).toBe(true);
    expect(evalCondition("{{ event.name == 'call.done' and response.score >= 50 }}", low)).toBe(false);
    const pg = buildContext({ response: httpOk({ page: 2, total_pages: 3 }) });
    expect(evalCondition('{{ response.page < response.total_pages }}', pg)).toBe(true);
    expect(renderString('{{ response.page + 1 }}', pg)).toBe(3);
    const err = buildContext({ error: { status: 500 } });
    expect(evalCondition('{{ error.status in [500, 502, 503] }}', err)).toBe(true);
  });
  it('args, workload, step and vars references', () => {
    const c = buildContext({
      workload: { api: 'http://a', numbers: [1, 2], people: ['x'], pg: 'pg', table: 't', name: 'n', key: 'k', score: 1 },
      args: { measured: 1.5, score: 60, text: 'hello', users: [{ id: 1 }] },
      steps: { start: { greeting: 'hello' } },
      vars: { order_id: 'o', units: 3 },
      loop: { iterator: 'person', item: 'ada' },
    });
    expect(renderValue({ a: '{{ args.measured }}', b: '{{ args.score }}', c: '{{ args.text }}', d: '{{ args.users }}' }, c)).toEqual({ a: 1.5, b: 60, c: 'hello', d: [{ id: 1 }] });
    expect(renderValue({ a: '{{ workload.numbers }}', b: '{{ workload.people }}', c: '{{ workload.table }}' }, c)).toEqual({ a: [1, 2], b: ['x'], c: 't' });
    expect(renderString('{{ start.greeting }}, {{ person }}', c)).toBe('hello, ada');
    expect(renderString('{{ start }}', c)).toEqual({ greeting: 'hello' });
    expect(renderValue({ o: '{{ vars.order_id }}', u: '{{ vars.units }}' }, c)).toEqual({ o: 'o', u: 3 });
  });
});
