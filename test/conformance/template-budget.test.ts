/**
 * Template budgets on a real server: each attack template of issue 19, rendered by the server
 * when it issues a step's command, fails that step (and its execution) with a budget error, while
 * another execution on the same server keeps completing its steps on a real worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ATTACKS } from '../fixtures/template-attacks.js';
import { startHarness, type Harness } from './harness.js';

let h: Harness;

async function api(method: string, url: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${h.url}${url}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

async function register(path: string, workflow: string): Promise<void> {
  const content = `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: { name: ${path.split('/').pop()}, path: ${path} }\nworkflow:\n${workflow}`;
  const r = await api('POST', '/api/catalog/playbook', { content });
  expect(r.status, JSON.stringify(r.json)).toBeLessThan(300);
}

async function waitEnd(id: string): Promise<any> {
  for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
    const r = await api('GET', `/api/execution/${id}`);
    if (['completed', 'failed', 'cancelled'].includes(r.json?.status)) return r.json;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error(`execution ${id} did not end`);
}

beforeAll(async () => {
  h = await startHarness({ workers: 1 });
}, 120_000);

afterAll(async () => {
  await h?.close();
});

describe('template budgets on the server', () => {
  it('each attack fails its step with a budget error; another execution completes all its steps', async () => {
    await register('budget/ticker', `  - step: start
    loop: { in: "{{ range(30) | list }}", iterator: i, mode: sequential }
    tool: { kind: python, code: "def main(i):\\n    return i", args: { i: "{{ i }}" } }
`);
    const attacks = Object.entries(ATTACKS).filter(([name]) => !name.includes('deep'));
    for (const [i, [, template]] of attacks.entries()) {
      await register(`budget/attack${i}`, `  - step: start
    tool: { kind: python, code: "result = 1", args: { x: ${JSON.stringify(template)} } }
`);
    }

    const ticker = await api('POST', '/api/run/playbook', { path: 'budget/ticker' });
    expect(ticker.status).toBe(201);
    const started = await Promise.all(attacks.map((_, i) => api('POST', '/api/run/playbook', { path: `budget/attack${i}` })));
    const ids = started.map((r) => {
      expect(r.status).toBe(201);
      return r.json.execution_id as string;
    });

    const ends = await Promise.all(ids.map(waitEnd));
    for (const [i, end] of ends.entries()) {
      expect(end.status, attacks[i][0]).toBe('failed');
      expect(JSON.stringify(end.error), attacks[i][0]).toMatch(/over budget|too large/);
      expect(JSON.stringify(end.error), attacks[i][0]).toContain('tool.args.x');
    }

    const t = await waitEnd(ticker.json.execution_id);
    expect(t.status).toBe('completed');
    const events = await api('GET', `/api/events/${ticker.json.execution_id}?limit=1000`);
    const done = events.json.events.filter((e: { name?: string; event_type?: string }) => (e.name ?? e.event_type) === 'call.done');
    expect(done).toHaveLength(30);
    // the server answers its probes afterwards
    expect((await api('GET', '/readyz')).status).toBe(200);
  }, 240_000);
});
