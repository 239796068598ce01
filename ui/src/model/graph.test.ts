import { describe, expect, it } from 'vitest';
import type { Playbook } from '../types.js';
import { graphOf, layout } from './graph.js';
import { redact, REDACTED } from './redact.js';

const pb: Playbook = {
  metadata: { name: 't' },
  workflow: [
    { step: 'start', next: [{ step: 'fetch' }] },
    {
      step: 'fetch', tool: { kind: 'http' }, loop: { in: '{{ x }}', iterator: 'i', mode: 'async' },
      case: [{ when: "{{ event.name == 'call.error' }}", then: [{ action: 'next', targets: [{ step: 'recover' }] }] }],
      next: [{ step: 'end' }, { step: 'nowhere' }],
    },
    { step: 'recover', tool: { kind: 'python' }, next: [{ step: 'end' }] },
    { step: 'end' },
  ],
};

describe('graphOf / layout', () => {
  it('draws structural next and case next edges (labelled by their event); unknown targets are dropped', () => {
    const g = graphOf(pb);
    expect(g.nodes.map((n) => [n.id, n.kind, n.loop])).toEqual([['start', 'route', false], ['fetch', 'http', true], ['recover', 'python', false], ['end', 'route', false]]);
    expect(g.edges.map((e) => [e.source, e.target, e.conditional, e.label])).toEqual([
      ['start', 'fetch', false, undefined],
      ['fetch', 'recover', true, 'call.error'],
      ['fetch', 'end', false, undefined],
      ['recover', 'end', false, undefined],
    ]);
  });

  it('lays out top to bottom: a successor sits below its step', () => {
    const { nodes } = layout(pb);
    const y = Object.fromEntries(nodes.map((n) => [n.id, n.y]));
    expect(y.fetch).toBeGreaterThan(y.start);
    expect(y.end).toBeGreaterThan(y.recover);
  });
});

describe('redact', () => {
  it('hides values under secret-looking keys at any depth, keeps templates and other values', () => {
    const out = redact({ url: 'https://x', headers: { Authorization: 'Bearer abc', accept: 'json' }, auth: { password: 'pw', user: 'u' }, api_key: '{{ secret.key }}', list: [{ token: 't' }] });
    expect(out).toEqual({ url: 'https://x', headers: { Authorization: REDACTED, accept: 'json' }, auth: { password: REDACTED, user: 'u' }, api_key: '{{ secret.key }}', list: [{ token: REDACTED }] });
  });
});
