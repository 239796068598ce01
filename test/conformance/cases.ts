/**
 * The conformance table: each playbook in ./playbooks with the payload it runs with and what its
 * execution must end as. Results are asserted concretely; HTTP envelopes carry a generated id
 * and headers, so those cases pick the fields that matter.
 */
import { expect } from 'vitest';
import pg from 'pg';
import type { LocalApi } from './api.js';

export interface CaseEnv {
  api: LocalApi;
  pg: { host: string; port: number; user: string; password: string; database: string };
  tmp: string;
}

export interface ExecutionView {
  execution_id: string;
  status: string;
  result: any;
  error: any;
  steps: Record<string, { status: string; runs: number; result?: any }>;
}

export interface ConformanceCase {
  file: string;
  payload?: (env: CaseEnv) => Record<string, unknown>;
  status: 'completed' | 'failed';
  /** Deep-equal expectation of the execution result. */
  result?: unknown;
  check?: (x: ExecutionView, env: CaseEnv) => void | Promise<void>;
}

const common = (env: CaseEnv) => ({ api: env.api.url, pg: env.pg, tmp: env.tmp });
const body = (x: ExecutionView) => x.result?.data ?? x.result;

export const cases: ConformanceCase[] = [
  { file: 'python_main.yaml', status: 'completed', result: { sum: 42 } },
  {
    file: 'python_body_libs.yaml', status: 'completed',
    result: { sqrt: 9, dumped: '{"n": 81}' },
  },
  { file: 'python_async.yaml', status: 'completed', result: [2, 4, 6] },
  {
    file: 'python_error_fails.yaml', status: 'failed',
    check: (x) => {
      expect(JSON.stringify(x.error)).toContain('the input was bad');
      expect(x.steps.never).toBeUndefined();
    },
  },
  { file: 'failure_handled_by_case.yaml', status: 'completed', result: { recovered: true, mentions_boom: true } },
  {
    file: 'http_get_json.yaml', payload: common, status: 'completed',
    result: { score: 77, via_data: 77 },
  },
  {
    file: 'http_post_json.yaml', payload: common, status: 'completed',
    check: (x) => {
      expect(x.result.status).toBe(200);
      expect(body(x)).toEqual({
        method: 'POST', query: { q: '1' }, content_type: expect.stringContaining('application/json'),
        authorization: null, x_trace: 'conformance', body: { order: 42, lines: ['a', 'b'] },
      });
    },
  },
  { file: 'http_error_routed.yaml', payload: common, status: 'completed', result: { handled: 404 } },
  {
    file: 'http_retry_backoff.yaml', payload: (env) => ({ ...common(env), key: 'backoff' }), status: 'completed',
    check: (x) => expect(body(x)).toEqual({ ok: true, attempts: 3 }),
  },
  {
    file: 'http_retry_exhausted.yaml', payload: (env) => ({ ...common(env), key: 'exhausted' }), status: 'failed',
    check: (x) => expect(JSON.stringify(x.error)).toMatch(/503/),
  },
  {
    file: 'pagination_page.yaml', payload: common, status: 'completed',
    check: (x) => expect((x.result as Array<{ id: number }>).map((u) => u.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]),
  },
  { file: 'pagination_offset.yaml', payload: common, status: 'completed', result: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] },
  { file: 'pagination_cursor.yaml', payload: common, status: 'completed', result: { count: 12, last: 'user12' } },
  { file: 'pagination_url.yaml', payload: common, status: 'completed', result: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] },
  {
    file: 'postgres_inline.yaml', payload: common, status: 'completed',
    check: (x) => expect(x.result.rows).toEqual([{ n: 4, total: 180 }]),
  },
  {
    file: 'postgres_credential_ref.yaml', status: 'completed',
    check: (x, env) => expect(x.result.rows).toEqual([{ db: env.pg.database, answer: 42 }]),
  },
  {
    file: 'duckdb_memory.yaml', status: 'completed',
    check: (x) => expect(x.result.rows).toEqual([{ region: 'n', total: 4 }, { region: 's', total: 2 }]),
  },
  {
    file: 'duckdb_file.yaml', payload: common, status: 'completed',
    check: (x) => expect(x.result.rows).toEqual([{ s: 10 }]),
  },
  { file: 'loop_sequential.yaml', status: 'completed', result: [30, 10, 20] },
  { file: 'loop_async.yaml', payload: common, status: 'completed', result: { count: 20, in_order: true, sum: 190 } },
  { file: 'loop_legacy_synonyms.yaml', status: 'completed', result: [1, 2, 3] },
  {
    file: 'loop_early_break.yaml', status: 'completed', result: { found: 3 },
    check: (x) => expect(x.steps.start.status).toBe('completed'),
  },
  { file: 'case_collect_result.yaml', status: 'completed', result: { label: 'squares', big: [9, 16] } },
  { file: 'vars_block.yaml', status: 'completed', result: { order_id: 4711, units: 7 } },
  { file: 'composition.yaml', status: 'completed', result: 29 },
  {
    file: 'composition_child_fails.yaml', status: 'failed',
    check: (x) => expect(JSON.stringify(x.error)).toContain('child refused 7'),
  },
  { file: 'workbook.yaml', status: 'completed', result: 'hi team!' },
  {
    file: 'fan_out_fan_in.yaml', status: 'completed',
    check: (x) => {
      // A fan-in step runs once per arriving transition.
      expect(x.steps.join.runs).toBe(2);
      expect(x.steps.left.status).toBe('completed');
      expect(x.steps.right.status).toBe('completed');
      expect(['left', 'right']).toContain(x.result.joined_from);
    },
  },
  {
    file: 'fail_action.yaml', status: 'failed',
    check: (x) => {
      expect(JSON.stringify(x.error)).toContain('validation failed');
      expect(x.steps.never).toBeUndefined();
    },
  },
  {
    file: 'skip_action.yaml', status: 'completed', result: 'finished',
    check: (x) => expect(x.steps.optional.status).toBe('skipped'),
  },
  { file: 'routing_step_args.yaml', status: 'completed', result: 'EUEUEU' },
  {
    file: 'file_tool.yaml', payload: common, status: 'completed',
    check: (x) => expect(JSON.stringify(x.result)).toContain('"rows":[1,2,3]'),
  },
  {
    file: 'legacy_call_http.yaml', payload: common, status: 'completed',
    check: (x) => expect(body(x)).toEqual({ name: 'legacy', score: 5 }),
  },
  {
    file: 'legacy_transform.yaml', status: 'completed',
    check: (x) => expect(JSON.stringify(x.result)).toContain('[2,4,6]'),
  },
  {
    file: 'sink_postgres.yaml', payload: common, status: 'completed', result: [{ n: 1, sq: 1 }, { n: 2, sq: 4 }, { n: 3, sq: 9 }],
    check: async (_x, env) => {
      const c = new pg.Client({ ...env.pg });
      await c.connect();
      try {
        expect((await c.query('SELECT n, sq FROM conf_sink ORDER BY n')).rows).toEqual([{ n: 1, sq: 1 }, { n: 2, sq: 4 }, { n: 3, sq: 9 }]);
      } finally {
        await c.end();
      }
    },
  },
  {
    file: 'http_bearer_credential.yaml', payload: common, status: 'completed',
    check: (x) => expect(body(x).authorization).toBe('Bearer conformance-token-123'),
  },
  {
    file: 'keychain_oauth2_renew.yaml', payload: common, status: 'completed',
    check: (x, env) => {
      expect(x.result.first).toMatch(/^Bearer tok-\d+$/);
      expect(x.result.second).toMatch(/^Bearer tok-\d+$/);
      expect(x.result.second).not.toBe(x.result.first); // renewed after it expired
      expect(env.api.hits.get('/token')).toBe(2);
    },
  },
  {
    file: 'payload_overrides_workload.yaml', payload: () => ({ name: 'given', settings: { region: 'eu' } }), status: 'completed',
    result: { name: 'given', settings: { retries: 1, region: 'eu' }, raw_payload: { name: 'given', settings: { region: 'eu' } } },
  },
];
