/**
 * The one `.data` rule (README "Results and .data"), as a table: for every kind of result a
 * tool records, the same expression reaches the same value whether the result is read by step
 * name, as `response` in a rule, as `result` or (for failures) as `error`.
 */
import { describe, expect, it } from 'vitest';
import { buildContext, evalExpression, renderString } from './index.js';
import type { Json } from '../types.js';

const http = (data: Json) => ({ id: 'r1', status: 200, data, headers: { 'content-type': 'application/json' } });

interface Row {
  what: string;
  /** The result as the tool recorded it. */
  recorded: Json;
  /** expression (with `x` standing for the result) → expected value; `undefined` = not defined. */
  reads: Array<[string, unknown]>;
}

const rows: Row[] = [
  {
    what: 'HTTP envelope, object body',
    recorded: http({ items: [1, 2], next: 'c2' }),
    reads: [['x', { items: [1, 2], next: 'c2' }], ['x.items', [1, 2]], ['x.data.items', [1, 2]], ['x.data', { items: [1, 2], next: 'c2' }], ['x.status', 200], ['x.data.next', 'c2']],
  },
  {
    what: 'HTTP envelope, body with its own top-level data (reference APIs)',
    recorded: http({ data: [{ id: 1 }], paging: { hasMore: true, page: 1 } }),
    reads: [
      ['x', { data: [{ id: 1 }], paging: { hasMore: true, page: 1 } }],
      ['x.data', [{ id: 1 }]],
      ['x.data.paging.hasMore', true], // spec wording: response.data… is the body
      ['x.data.data', [{ id: 1 }]], // reference wording: response.data.data is the body's list
      ['x.paging.page', 1],
      ['x.data[0].id', 1],
      ['x.status', 200],
    ],
  },
  {
    what: 'HTTP envelope, list body',
    recorded: http([{ a: 1 }, { a: 2 }]),
    reads: [['x', [{ a: 1 }, { a: 2 }]], ['x | length', 2], ['x.data[1].a', 2], ['x.status', 200]],
  },
  {
    what: 'HTTP envelope, text body',
    recorded: http('plain text'),
    reads: [['x', 'plain text']],
  },
  {
    what: 'python result without data',
    recorded: { value: 20 },
    reads: [['x', { value: 20 }], ['x.value', 20], ['x.data.value', 20], ['x.data', { value: 20 }]],
  },
  {
    what: 'python result with its own data and other fields (never unwrapped)',
    recorded: { status: 'ok', data: { rows: 3 }, note: 'n' },
    reads: [['x', { status: 'ok', data: { rows: 3 }, note: 'n' }], ['x.status', 'ok'], ['x.data', { rows: 3 }], ['x.data.rows', 3], ['x.rows', 3], ['x.data.note', 'n']],
  },
  {
    what: 'python scalar',
    recorded: 42,
    reads: [['x', 42], ['x.data', undefined]],
  },
  {
    what: 'postgres result',
    recorded: { command: 'SELECT', row_count: 1, rows: [{ n: 1 }], columns: ['n'] },
    reads: [['x.rows[0].n', 1], ['x.data.rows[0].n', 1], ['x.row_count', 1]],
  },
  {
    what: 'list result (loop results, several statements)',
    recorded: [1, 2, 3],
    reads: [['x', [1, 2, 3]], ['x.data', [1, 2, 3]], ['x | sum', 6]],
  },
  {
    what: 'HTTP error (tool error outcome)',
    recorded: { message: 'HTTP 404', status: 404, code: 'http_error', data: { detail: 'no such user' } },
    reads: [['x.status', 404], ['x.data.detail', 'no such user'], ['x.detail', 'no such user'], ['x.code', 'http_error']],
  },
];

const read = (ctx: object, expr: string) => evalExpression(expr, ctx);
/** Renders to JSON, as a tool config field would receive it: the hidden names never leak. */
const asJson = (ctx: object, expr: string) => renderString(`{{ ${expr} }}`, ctx);

describe('the .data rule, one table for every place a result is read', () => {
  for (const row of rows) {
    describe(row.what, () => {
      const places: Array<[string, object, (e: string) => string]> = [
        ['by step name', buildContext({ steps: { fetch: row.recorded } }), (e) => e.replace(/^x/, 'fetch')],
        ['as response in a rule', buildContext({ event: { name: 'call.done' }, response: row.recorded }), (e) => e.replace(/^x/, 'response')],
        ['as result (vars, step.exit)', buildContext({ result: row.recorded }), (e) => e.replace(/^x/, 'result')],
        ['as error', buildContext({ error: row.recorded }), (e) => e.replace(/^x/, 'error')],
      ];
      for (const [where, ctx, name] of places) {
        it(where, () => {
          for (const [expr, want] of row.reads) {
            const e = name(expr);
            if (want === undefined) expect(read(ctx, e), e).toBeUndefined();
            else expect(asJson(ctx, e), e).toEqual(want);
          }
        });
      }
    });
  }

  it('serialising a view gives the recorded body exactly (no hidden names leak)', () => {
    const c = buildContext({ steps: { s: http({ data: [1], paging: { p: 1 } }), p: { value: 1 } } });
    expect(renderString('{{ s | tojson }}', c)).toBe('{"data":[1],"paging":{"p":1}}');
    expect(renderString('{{ p | tojson }}', c)).toBe('{"value":1}');
    expect(renderString('{{ s.data | tojson }}', c)).toBe('[1]');
  });
});
