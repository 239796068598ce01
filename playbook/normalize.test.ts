import { describe, expect, it } from 'vitest';
import { Issues } from './issues.js';
import { normalizePlaybook } from './normalize.js';
import type { Playbook, Step } from './types.js';

function normalize(workflow: unknown[], extra: Record<string, unknown> = {}) {
  const issues = new Issues();
  const doc = { apiVersion: 'playflow.io/v2', kind: 'Playbook', metadata: { name: 't' }, workflow, ...extra };
  const { playbook, sources } = normalizePlaybook(doc, issues);
  return { playbook, sources, issues };
}
const step = (pb: Playbook, i = 0): Step => pb.workflow[i];

describe('normalizePlaybook', () => {
  it('turns a then object with several keys into one action per key, in key order', () => {
    const { playbook, issues } = normalize([
      {
        step: 'a',
        case: [{ when: 'x', then: { result: { from: '{{ r }}' }, set: { ctx: { n: 1 } }, call: null, skip: true, fail: 'bad', retry: null } }],
      },
    ]);
    expect(issues.errors).toEqual([]);
    expect(step(playbook).case?.[0].then).toEqual([
      { action: 'result', from: '{{ r }}' },
      { action: 'set', ctx: { n: 1 } },
      { action: 'call', overrides: {} },
      { action: 'skip' },
      { action: 'fail', message: 'bad' },
      { action: 'retry' },
    ]);
  });

  it('keeps list order across then items and splits multi-key items', () => {
    const { playbook } = normalize([
      { step: 'a', case: [{ when: 'x', then: [{ collect: { from: 'r', into: 'all' } }, { next: 'b', fail: {} }] }] },
      { step: 'b' },
    ]);
    expect(step(playbook).case?.[0].then.map((a) => a.action)).toEqual(['collect', 'next', 'fail']);
    expect(step(playbook).case?.[0].then[0]).toEqual({ action: 'collect', from: 'r', into: 'all', mode: 'append' });
  });

  it('accepts then.next as a string, a list of strings and a list of {step, args}', () => {
    const { playbook, sources } = normalize([
      {
        step: 'a',
        case: [
          { when: 'p', then: { next: 'b' } },
          { when: 'q', then: { next: ['b', 'c'] } },
          { when: 'r', then: { next: [{ step: 'c', args: { n: 1 } }] } },
        ],
      },
      { step: 'b' },
      { step: 'c' },
    ]);
    const targets = step(playbook).case?.map((c) => (c.then[0].action === 'next' ? c.then[0].targets : []));
    expect(targets).toEqual([[{ step: 'b' }], [{ step: 'b' }, { step: 'c' }], [{ step: 'c', args: { n: 1 } }]]);
    expect(targets?.flat().map((t) => sources.get(t))).toEqual([
      'workflow[0].case[0].then.next',
      'workflow[0].case[1].then.next[0]',
      'workflow[0].case[1].then.next[1]',
      'workflow[0].case[2].then.next[0].step',
    ]);
  });

  it('reads a sink either as the tool itself or under sink.tool', () => {
    const { playbook } = normalize([
      {
        step: 'a',
        case: [{ when: 'x', then: [{ sink: { kind: 'postgres', table: 't' } }, { sink: { tool: { kind: 'duckdb', query: 'q' } } }] }],
      },
    ]);
    expect(step(playbook).case?.[0].then).toEqual([
      { action: 'sink', tool: { kind: 'postgres', table: 't' } },
      { action: 'sink', tool: { kind: 'duckdb', query: 'q' } },
    ]);
  });

  it('defaults loop iterator and mode', () => {
    const { playbook } = normalize([{ step: 'a', loop: { in: [1, 2] }, tool: { kind: 'python', code: 'result = item' } }]);
    expect(step(playbook).loop).toEqual({ in: [1, 2], iterator: 'item', mode: 'sequential' });
  });

  it('refuses both spellings of the same field', () => {
    const { issues } = normalize([
      { step: 'a', tool: { kind: 'http', url: 'u', endpoint: 'e' }, loop: { in: 'x', collection: 'y', iterator: 'i', element: 'j' } },
      { step: 'b', tool: { kind: 'postgres', query: 'q', command: 'c' } },
    ]);
    expect(issues.errors.map((e) => e.path)).toEqual([
      'workflow[0].tool.url',
      'workflow[0].loop.collection',
      'workflow[0].loop.element',
      'workflow[1].tool.query',
    ]);
  });

  it('rewrites _loop variables only where they are the old reserved names', () => {
    const { playbook, issues } = normalize([
      {
        step: 'a',
        tool: { kind: 'http', endpoint: 'e', params: { p: '{{ _loop.index }}', q: '{{ my_loop.index }}', r: '{{ x._loop.count }}' } },
      },
    ]);
    expect(step(playbook).tool?.params).toEqual({ p: '{{ _retry.index }}', q: '{{ my_loop.index }}', r: '{{ x._loop.count }}' });
    expect(issues.warnings.map((w) => w.path)).toEqual(['workflow[0].tool.params.p']);
  });

  it('fills keychain scope with the API default', () => {
    const { playbook } = normalize([{ step: 'a' }], { keychain: [{ name: 'tok', kind: 'oauth2' }, { name: 's', kind: 'env', scope: 'local' }] });
    expect(playbook.keychain).toEqual([{ name: 'tok', kind: 'oauth2', scope: 'global' }, { name: 's', kind: 'env', scope: 'local' }]);
  });

  it("rejects 'with' on a next target of a v2 document", () => {
    const { issues } = normalize([{ step: 'a', next: [{ step: 'b', with: { x: 1 } }] }, { step: 'b' }]);
    expect(issues.errors).toEqual([{ path: 'workflow[0].next[0].with', severity: 'error', message: expect.stringContaining("pass data to the next step with 'args'") }]);
  });

  it('converts v1 conditional next into ordered case entries on step.exit and keeps plain targets structural', () => {
    const issues = new Issues();
    const { playbook, sources } = normalizePlaybook(
      {
        apiVersion: 'noetl.io/v1',
        kind: 'Playbook',
        name: 'v1',
        workflow: [
          { step: 'start', type: 'start', next: [{ step: 'audit' }, { when: '{{ payload.full }}', then: [{ step: 'full', with: { all: true } }] }, { else: [{ step: 'delta' }] }] },
          { step: 'audit' },
          { step: 'full' },
          { step: 'delta' },
        ],
      },
      issues,
    );
    expect(issues.errors).toEqual([]);
    const s = step(playbook);
    expect(s.next).toEqual([{ step: 'audit' }]);
    expect(s.case).toEqual([
      { when: "{{ event.name == 'step.exit' and (payload.full) }}", then: [{ action: 'next', targets: [{ step: 'full', args: { all: true } }] }] },
      { when: "{{ event.name == 'step.exit' }}", then: [{ action: 'next', targets: [{ step: 'delta' }] }] },
    ]);
    const full = s.case?.[0].then[0];
    expect(full?.action === 'next' && sources.get(full.targets[0])).toBe('workflow[0].next[1].then[0].step');
    expect(playbook.metadata.name).toBe('v1');
  });

  it('lifts v1 legacy operation types and reports their missing parameters at the step', () => {
    const issues = new Issues();
    const { playbook } = normalizePlaybook(
      { apiVersion: 'playflow.io/v1', kind: 'Playbook', metadata: { name: 'x' }, workflow: [{ step: 'a', type: 'http.get', url: 'https://e', headers: { A: '1' } }, { step: 'b', type: 'db.update', connection: 'pg', table: 't' }] },
      issues,
    );
    expect(step(playbook).tool).toEqual({ kind: 'http', method: 'GET', endpoint: 'https://e', headers: { A: '1' } });
    expect(issues.errors.map((e) => [e.path, e.message])).toEqual([
      ['workflow[1].data', "operation 'db.update' requires 'data'"],
      ['workflow[1].where', "operation 'db.update' requires 'where'"],
    ]);
  });

  it('refuses a step with two tool definitions', () => {
    const { issues } = normalize([{ step: 'a', tool: { kind: 'python', code: 'x' }, call: { type: 'http.get', args: { url: 'u' } } }]);
    expect(issues.errors[0]).toMatchObject({ path: 'workflow[0].call', message: expect.stringContaining("keep only 'tool'") });
  });

  it('retry and pagination counts: a number written as text is a number, a template stays for the engine, other text is an error at its path', () => {
    const { playbook, issues } = normalize([
      {
        step: 'a',
        tool: { kind: 'http', endpoint: 'e' },
        retry: [{ when: '{{ error }}', then: { max_attempts: '5', initial_delay: '{{ workload.delay }}', backoff_multiplier: 'twice' } }],
        case: [{ when: '{{ error }}', then: { retry: { max_attempts: ' 2 ', max_delay: true } } }],
        loop: { pagination: { type: 'response_based', continue_while: '{{ true }}', merge_strategy: 'collect', max_iterations: '{{ workload.pages }}', retry: { max_attempts: '' } } },
      },
    ]);
    expect(step(playbook).retry?.[0].then).toEqual({ max_attempts: 5, initial_delay: '{{ workload.delay }}' });
    expect(step(playbook).case?.[0].then).toEqual([{ action: 'retry', max_attempts: 2 }]);
    expect(step(playbook).loop?.pagination).toMatchObject({ max_iterations: '{{ workload.pages }}', retry: { max_attempts: 1 } });
    expect(issues.errors.map((e) => [e.path, e.message])).toEqual([
      ['workflow[0].loop.pagination.retry.max_attempts', "must be a number or a template, got ''"],
      ['workflow[0].case[0].then.retry.max_delay', 'must be a number or a template, got a boolean'],
      ['workflow[0].retry[0].then.backoff_multiplier', "must be a number or a template, got 'twice'"],
    ]);
  });

  it('converts a legacy on_success without while into an error, not a silent policy', () => {
    const { playbook, issues } = normalize([{ step: 'a', tool: { kind: 'http', endpoint: 'e' }, retry: { on_success: { max_attempts: 3 } } }]);
    expect(step(playbook).retry).toBeUndefined();
    expect(issues.errors.map((e) => e.path)).toEqual(['workflow[0].retry.on_success.while']);
  });
});

describe('v1 documents', () => {
  const v1 = (workflow: unknown[]) => {
    const issues = new Issues();
    normalizePlaybook({ apiVersion: 'noetl.io/v1', kind: 'Playbook', metadata: { name: 'x' }, workflow }, issues);
    return issues.errors.map((e) => e.path);
  };

  it('refuses a step-level when, which has no automatic v2 equivalent', () => {
    expect(v1([{ step: 'a', type: 'python', code: 'x', when: '{{ ok }}' }])).toEqual(['workflow[0].when']);
  });

  it('refuses inline attributes on a step without type instead of dropping them', () => {
    expect(v1([{ step: 'a', tool: { kind: 'http', endpoint: 'e' }, headers: { A: '1' } }])).toEqual(['workflow[0].headers']);
  });
});

describe('small normalisations', () => {
  it('upper-cases literal http methods and leaves templated ones', () => {
    const { playbook } = normalize([
      { step: 'a', tool: { kind: 'http', method: 'post', endpoint: 'e' }, next: ['b'] },
      { step: 'b', tool: { kind: 'http', method: '{{ args.method }}', endpoint: 'e' } },
    ]);
    expect(playbook.workflow.map((s) => s.tool?.method)).toEqual(['POST', '{{ args.method }}']);
  });

  it('reads fail: false and skip: false as no action', () => {
    const { playbook } = normalize([{ step: 'a', case: [{ when: 'x', then: { fail: false, skip: false, set: { ctx: { a: 1 } } } }] }]);
    expect(step(playbook).case?.[0].then).toEqual([{ action: 'set', ctx: { a: 1 } }]);
  });
});
