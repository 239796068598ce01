import { describe, expect, it } from 'vitest';
import { TemplateError, buildContext, evalCondition, evalExpression, isHttpEnvelope, renderString, renderValue, resultView } from './index.js';

const envelope = { id: 'r1', status: 200, data: { items: [{ id: 1 }, { id: 2 }], next: 'c2' } };

describe('buildContext: every name of the spec table', () => {
  const c = buildContext({
    workload: { api: 'http://api', pg_auth: 'pg_local', shared: 'from-workload' },
    args: { city: 'Paris' },
    vars: { order_id: 42 },
    steps: { fetch: envelope, plain: { rows: [1] } },
    execution_id: '1001',
    job: { id: 7, attempt: 2 },
    payload: { user: 'ada' },
    event: { name: 'call.done', payload: { response: { id: 'x', status: 200, data: { score: 80 } }, meta: { duration: 5 } } },
    ctx: { seen: 3 },
    keychain: { api: { access_token: 'tok' } },
    retry: { index: 2, count: 1 },
    pages: [[1], [2]],
    loop: { iterator: 'city_item', item: { name: 'Oslo' } },
  });
  const E = (e: string) => evalExpression(e, c);
  it('workload, args, vars', () => {
    expect(E('workload.api')).toBe('http://api');
    expect(E('args.city')).toBe('Paris');
    expect(E('vars.order_id')).toBe(42);
  });
  it('<step_name> with envelope data extracted, and results', () => {
    expect(E('fetch.items[1].id')).toBe(2);
    expect(E('fetch.data.items[0].id')).toBe(1);
    expect(E('plain.rows')).toEqual([1]);
    expect(E('results.fetch.status')).toBe(200);
    expect(E('results.plain.rows')).toEqual([1]);
  });
  it('execution_id, job, payload', () => {
    expect(E('execution_id')).toBe('1001');
    expect(E('job.attempt')).toBe(2);
    expect(E('payload.user')).toBe('ada');
  });
  it('event.name and event.payload; response defaults to the event payload response, unwrapped', () => {
    expect(E('event.name')).toBe('call.done');
    expect(E('event.payload.meta.duration')).toBe(5);
    expect(E('response.score')).toBe(80);
    expect(E('response.data.score')).toBe(80);
    expect(E('page.score')).toBe(80);
  });
  it('ctx, keychain, _retry, pages, iteration, loop iterator', () => {
    expect(E('ctx.seen')).toBe(3);
    expect(E('keychain.api.access_token')).toBe('tok');
    expect(E('_retry.index')).toBe(2);
    expect(E('_retry.count')).toBe(1);
    expect(E('_loop.index')).toBe(2);
    expect(E('pages | length')).toBe(2);
    expect(E('iteration')).toBe(2);
    expect(E('city_item.name')).toBe('Oslo');
  });
  it('bare workload keys resolve at top level', () => {
    expect(E('pg_auth')).toBe('pg_local');
  });
});

describe('resolution priority: vars, then step results, then workload, then built-ins', () => {
  const parts = {
    workload: { foo: 'workload', payload: 'workload-payload' },
    vars: { foo: 'var' },
    steps: { foo: { v: 'step' }, payload: { v: 'step-payload' } },
    payload: { p: 1 },
  };
  it('a var beats a step of the same name', () => {
    expect(evalExpression('foo', buildContext(parts))).toBe('var');
  });
  it('a step beats a workload key', () => {
    expect(evalExpression('foo.v', buildContext({ ...parts, vars: {} }))).toBe('step');
  });
  it('a workload key beats nothing below it', () => {
    expect(evalExpression('foo', buildContext({ workload: { foo: 'workload' } }))).toBe('workload');
  });
  it('a step and a workload key both beat a built-in of that name', () => {
    expect(evalExpression('payload.v', buildContext(parts))).toBe('step-payload');
    expect(evalExpression('payload', buildContext({ workload: { payload: 'w' }, payload: { p: 1 } }))).toBe('w');
    expect(evalExpression('payload.p', buildContext({ payload: { p: 1 } }))).toBe(1);
  });
  it('namespaced names always reach their source', () => {
    const c = buildContext(parts);
    expect(evalExpression('workload.foo', c)).toBe('workload');
    expect(evalExpression('vars.foo', c)).toBe('var');
    expect(evalExpression('results.foo.v', c)).toBe('step');
  });
  it('the loop iterator is per item and beats everything (deliberate: an item must not be shadowed)', () => {
    const c = buildContext({ ...parts, loop: { iterator: 'foo', item: 'item' } });
    expect(evalExpression('foo', c)).toBe('item');
    expect(evalExpression('vars.foo', c)).toBe('var');
  });
});

describe('result views (envelope data extracted, .data still works)', () => {
  it('an envelope exposes the body, and .data reaches the body', () => {
    const c = buildContext({ steps: { s: envelope } });
    expect(renderString('{{ s.next }}', c)).toBe('c2');
    expect(renderString('{{ s.data.next }}', c)).toBe('c2');
    expect(renderString('{{ s }}', c)).toEqual(envelope.data);
    expect(renderString('{{ s.data }}', c)).toEqual(envelope.data);
  });
  it('when the body has its own data field, .data is that field', () => {
    const c = buildContext({ steps: { s: { id: 1, status: 200, data: { data: [1, 2], total: 2 } } } });
    expect(renderString('{{ s.data }}', c)).toEqual([1, 2]);
    expect(renderString('{{ s.total }}', c)).toBe(2);
  });
  it('a list body: indexing works and .data is the list', () => {
    const c = buildContext({ steps: { s: { id: 1, status: 200, data: [{ a: 1 }] } } });
    expect(renderString('{{ s[0].a }}', c)).toBe(1);
    expect(renderString('{{ s.data[0].a }}', c)).toBe(1);
    expect(renderString('{{ s | length }}', c)).toBe(1);
    expect(renderString('{{ s }}', c)).toEqual([{ a: 1 }]);
  });
  it("the envelope's own fields stay reachable when the body lacks them", () => {
    const c = buildContext({ steps: { s: envelope } });
    expect(renderString('{{ s.status }}', c)).toBe(200);
    expect(renderString('{{ s.keys() }}', c)).toEqual(['items', 'next']);
    expect(renderString('x{{ s }}', c)).toBe('x' + JSON.stringify(envelope.data));
  });
  it('a scalar body of an envelope is the value itself', () => {
    const c = buildContext({ steps: { s: { id: 1, status: 200, data: 'text body' } } });
    expect(renderString('{{ s }}', c)).toBe('text body');
  });
  it('a result without data is left as is', () => {
    expect(resultView({ a: 1 })).toEqual({ a: 1 });
    expect(resultView([1])).toEqual([1]);
    expect(resultView(5)).toBe(5);
  });
  it('isHttpEnvelope recognises {id, status, data} only', () => {
    expect(isHttpEnvelope(envelope)).toBe(true);
    expect(isHttpEnvelope({ status: 200, data: 1, headers: {} })).toBe(true);
    expect(isHttpEnvelope({ data: 1, other: 2 })).toBe(false);
    expect(isHttpEnvelope({ data: 1 })).toBe(false);
  });
  it('views do not change the recorded results', () => {
    const rec = { id: 1, status: 200, data: { a: 1 } };
    buildContext({ steps: { s: rec }, response: rec });
    expect(rec).toEqual({ id: 1, status: 200, data: { a: 1 } });
  });
});

describe('call.done: response and error', () => {
  it('response is the API body; response.data.x reaches the body field x', () => {
    const c = buildContext({ event: { name: 'call.done' }, response: { id: 'q', status: 200, data: { page: 1, total_pages: 3 } } });
    expect(evalCondition('response.page < response.total_pages', c)).toBe(true);
    expect(evalCondition('response.data.page < response.data.total_pages', c)).toBe(true);
  });
  it('error has status for HTTP (also when the error is an envelope with a body)', () => {
    const c1 = buildContext({ error: { status: 503, message: 'unavailable' } });
    expect(evalCondition('error.status in [500, 502, 503]', c1)).toBe(true);
    const c2 = buildContext({ error: { status: 502, data: { detail: 'bad gateway' } } });
    expect(evalCondition('error.status in [500, 502, 503]', c2)).toBe(true);
    expect(renderString('{{ error.detail }}', c2)).toBe('bad gateway');
  });
  it('on success there is no error: error conditions are false, not failures', () => {
    const c = buildContext({ event: { name: 'call.done', payload: { response: { id: 1, status: 200, data: {} } } } });
    expect(evalCondition('error.status in [500, 502, 503]', c)).toBe(false);
    expect(evalCondition('error is defined', c)).toBe(false);
  });
  it('rendering a missing response names it', () => {
    expect(() => renderString('{{ response.page + 1 }}', buildContext({}), { field: 'retry[0].then.next_call.params.page' })).toThrow(TemplateError);
  });
});

describe('vars block: result', () => {
  it('result is the step result with data extracted', () => {
    const c = buildContext({ result: { id: 1, status: 200, data: { order_id: 'o-9', lines: [{ qty: 2 }, { qty: 3 }] } } });
    expect(renderValue({ order_id: '{{ result.order_id }}', units: "{{ result.lines | map(attribute='qty') | sum }}" }, c)).toEqual({ order_id: 'o-9', units: 5 });
    expect(renderString('{{ result.data.order_id }}', c)).toBe('o-9');
  });
  it('a non-HTTP result with a data field also exposes data as result', () => {
    const c = buildContext({ result: { data: { x: 1 }, count: 4 } });
    expect(renderString('{{ result.x }}', c)).toBe(1);
    expect(renderString('{{ result.count }}', c)).toBe(4);
  });
});

describe('hostile context keys', () => {
  it('keys such as __proto__ in workload or vars are dropped, never written as prototypes', () => {
    const workload = JSON.parse('{"__proto__": {"polluted": 1}, "ok": 1}');
    const c = buildContext({ workload });
    expect(Object.getPrototypeOf(c)).toBe(Object.prototype);
    expect(evalExpression('ok', c)).toBe(1);
    expect(evalExpression('polluted', c)).toBeUndefined();
  });
});
