/**
 * The web console in real Chromium against a real server (startServer, PostgreSQL, NATS) and a
 * real worker process: run from the catalog page, read a failed step, cancel, loop progress, the
 * token prompt, and that every request the pages make stays on the server's origin.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { startServer, type RunningServer } from '../../server/main.js';
import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../common/logger.js';
import { freePort } from '../../cli/dev/embedded-db.js';
import { startHarness, type Harness } from '../conformance/harness.js';
import { closeBrowser, launchBrowser, openPage, shot, SHOTS, type Recorded } from './browser.js';

const GREETING = `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: greeting, path: ui/greeting}
workload: {name: world}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        def main(name):
            return {"greeting": "Hello, " + name}
      args: {name: "{{ workload.name }}"}
    vars: {greeted: "{{ result.greeting }}"}
    next: [{step: shout, args: {text: "{{ start.greeting }}"}}]
  - step: shout
    tool:
      kind: python
      code: |
        def main(text):
            return {"loud": text.upper()}
      args: {text: "{{ args.text }}"}
`;

const FAILING = `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: failing, path: ui/failing}
workload: {city: Atlantis}
workflow:
  - step: start
    next: [{step: lookup}]
  - step: lookup
    tool:
      kind: python
      code: |
        def main(city, api_token):
            raise ValueError("no such city: " + city)
      args: {city: "{{ workload.city }}", api_token: "hunter2-not-shown"}
    next: [{step: report}]
  - step: report
`;

const SLOW = `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: slow, path: ui/slow}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import time
        def main():
            time.sleep(20)
            return {"ok": True}
`;

/** Each item calls the test's gate server, which answers only when the test releases it. */
const LOOP = (gate: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: loop, path: ui/loop}
workload: {items: [1, 2, 3, 4]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: n, mode: sequential}
    tool:
      kind: http
      method: GET
      endpoint: "${gate}/item/{{ n }}"
`;

/** Three loops (1,000, 1,000 and 500 items) of http calls the test's server answers at once: ~10,000 events. */
const LARGE = (api: string) => {
  const loop = (name: string, items: number, next?: string) => `  - step: ${name}
    loop: {in: "{{ range(${items}) | list }}", iterator: i, mode: async, max_in_flight: 32}
    tool: {kind: http, method: GET, endpoint: "${api}/fast/${name}/{{ i }}"}
${next ? `    next: [{step: ${next}}]\n` : ''}`;
  return `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: large, path: ui/large}
workflow:
${loop('start', 1000, 'second')}${loop('second', 1000, 'third')}${loop('third', 500)}`;
};

/** Fails at `lookup` while the test's service answers 500; Retry after the service is fixed. */
const FLAKY = (api: string) => `apiVersion: playflow.io/v2
kind: Playbook
metadata: {name: flaky, path: ui/flaky}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        def main():
            return {"city": "Oslo"}
    next: [{step: lookup}]
  - step: lookup
    tool: {kind: http, method: GET, endpoint: "${api}/flaky/{{ start.city }}"}
    next: [{step: report, args: {temp: "{{ lookup.data.temp }}"}}]
  - step: report
    tool:
      kind: python
      code: |
        def main(temp):
            return {"report": "Oslo " + str(temp)}
      args: {temp: "{{ args.temp }}"}
`;

let h: Harness;
let gate: Server;
/** The flaky service answers 500 until a test fixes it. */
let flakyBroken = true;
let flakyCalls = 0;
/** Requests of the loop's items waiting at the gate, in arrival order. */
const waiting: Array<() => void> = [];
let browser: Browser;
const pages: Recorded[] = [];

async function register(content: string) {
  const r = await fetch(`${h.url}/api/catalog/playbook`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ content }) });
  expect(r.status, await r.clone().text()).toBeLessThan(300);
  return (await r.json()) as { path: string; version: number };
}

async function run(path: string, payload: object = {}) {
  const r = await fetch(`${h.url}/api/run/playbook`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ path, payload }) });
  expect(r.status).toBe(201);
  return ((await r.json()) as { execution_id: string }).execution_id;
}

/** What the server says about an execution, for a failure message. */
async function diagnose(id: string): Promise<string> {
  const ex = (await (await fetch(`${h.url}/api/execution/${id}`)).json()) as { status: string; error?: unknown };
  const ev = (await (await fetch(`${h.url}/api/events/${id}`)).json()) as { events: Array<{ name: string; step: string | null }> };
  return `execution ${id} is ${ex.status} (error ${JSON.stringify(ex.error)}); events: ${ev.events.map((e) => `${e.name}${e.step ? `@${e.step}` : ''}`).join(', ')}`;
}

async function page() {
  const p = await openPage(browser);
  p.page.setDefaultTimeout(90_000);
  pages.push(p);
  return p;
}

beforeAll(async () => {
  gate = createServer((req, res) => {
    if (req.url?.startsWith('/fast/')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok": true}');
    if (req.url?.startsWith('/flaky/')) {
      flakyCalls += 1;
      if (flakyBroken) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error": "weather service down"}');
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"temp": 21}');
    }
    waiting.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ item: req.url })));
  });
  await new Promise<void>((r) => gate.listen(0, '127.0.0.1', () => r()));
  const gateUrl = `http://127.0.0.1:${(gate.address() as AddressInfo).port}`;
  // both started at once, and whichever started is kept for afterAll even when the other failed
  // (a Promise.all lost a harness that started beside a browser that could not: its database stayed)
  const [harness, launched] = await Promise.allSettled([startHarness({ workers: 1 }), launchBrowser()]);
  if (harness.status === 'fulfilled') h = harness.value;
  if (launched.status === 'fulfilled') browser = launched.value;
  for (const r of [harness, launched]) if (r.status === 'rejected') throw r.reason;
  for (const pb of [GREETING, FAILING, SLOW, LOOP(gateUrl), LARGE(gateUrl), FLAKY(gateUrl)]) await register(pb);
}, 120_000);

afterAll(async () => {
  await closeBrowser(browser, pages.map((p) => p.context));
  await h?.close();
  gate?.closeAllConnections();
  gate?.close();
  process.stderr.write(`console screenshots: ${SHOTS}\n`);
}, 120_000);

// A shared 2-core machine: generous per-test limits (no timing is asserted).
describe('web console', { timeout: 180_000 }, () => {
  it('runs a playbook from the catalog page with a payload and its nodes turn green', async () => {
    const { page: p } = await page();
    await p.goto(`${h.url}/ui/catalog/ui/greeting`);
    await p.getByTestId('yaml').locator('.cm-content').waitFor();
    expect(await p.getByTestId('yaml').innerText()).toContain('def main(name)');
    // The server's validation error for a payload that is not an object is shown as it answered.
    const editor = p.getByTestId('payload-editor').locator('.cm-content');
    await editor.click();
    await p.keyboard.press('Control+A');
    await p.keyboard.type('[1, 2]');
    await p.getByTestId('run').click();
    await expect.poll(() => p.getByTestId('run-error').textContent()).toMatch(/payload/);
    await editor.click();
    await p.keyboard.press('Control+A');
    await p.keyboard.type('{"name": "Ada"}');
    await p.getByTestId('run').click();
    await p.waitForURL(/\/ui\/executions\/\d+$/);
    const id = /(\d+)$/.exec(p.url())![1];
    try {
      for (const step of ['start', 'shout']) await p.locator(`.node[data-step="${step}"][data-state="completed"]`).waitFor();
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${await diagnose(id)} (screenshot ${await shot(p, 'run-from-catalog-failed')})`, { cause: err });
    }
    const border = await p.locator('.node[data-step="shout"]').evaluate((el) => (globalThis as any).getComputedStyle(el).borderTopColor as string);
    expect(border).toBe('rgb(30, 158, 87)');
    await p.locator('[data-testid="execution"][data-status="completed"]').waitFor();
    await p.locator('[data-tab="result"]').click();
    expect(await p.getByTestId('tab-result').innerText()).toContain('HELLO, ADA');
    // The variables the run set (its vars_set events), by name.
    await p.locator('[data-tab="vars"]').click();
    await expect.poll(() => p.getByTestId('tab-vars').innerText()).toContain('"greeted": "Hello, Ada"');
    await shot(p, 'run-from-catalog');
  });

  it('opens a failed execution and shows the failing step, its error and its args (secrets redacted)', async () => {
    const id = await run('ui/failing');
    const { page: p } = await page();
    await p.goto(`${h.url}/ui/executions/${id}`);
    await p.locator('[data-testid="execution"][data-status="failed"]').waitFor({ timeout: 90_000 });
    await p.locator('.node[data-step="lookup"][data-state="failed"]').waitFor();
    // The failing step is selected on arrival.
    await p.locator('[data-testid="step-panel"][data-step="lookup"]').waitFor();
    expect(await p.getByTestId('call-error').innerText()).toContain('no such city: Atlantis');
    const args = await p.getByTestId('call-args').innerText();
    expect(args).toContain('"city": "Atlantis"');
    expect(args).not.toContain('hunter2');
    expect(args).toContain('••••');
    expect(await p.getByTestId('call-tool').innerText()).not.toContain('hunter2');
    // The step after the failure never ran and never will: "not run", not "pending".
    const report = p.locator('.node[data-step="report"][data-state="not-run"]');
    expect(await report.locator('.node-state').innerText()).toBe('not run');
    await report.click();
    await p.locator('[data-testid="step-panel"][data-step="report"] [data-status="not-run"]').waitFor();
    await shot(p, 'failed-execution');
  });

  it('cancels a running execution', async () => {
    const id = await run('ui/slow');
    const { page: p } = await page();
    await p.goto(`${h.url}/ui/executions/${id}`);
    await p.locator('.node[data-step="start"][data-state="running"]').waitFor({ timeout: 90_000 });
    await p.getByRole('button', { name: 'Cancel' }).click();
    await p.locator('[data-testid="execution"][data-status="cancelled"]').waitFor({ timeout: 90_000 });
    await p.locator('.node[data-step="start"][data-state="cancelled"]').waitFor();
    const ex = (await (await fetch(`${h.url}/api/execution/${id}`)).json()) as { status: string };
    expect(ex.status).toBe('cancelled');
    await shot(p, 'cancelled');
  });

  it('shows a loop step’s item progress n/m as items finish', async () => {
    const id = await run('ui/loop');
    const { page: p } = await page();
    await p.goto(`${h.url}/ui/executions/${id}`);
    const progress = p.locator('.node[data-step="start"] .node-progress');
    await expect.poll(() => progress.textContent(), { timeout: 90_000 }).toBe('0/4');
    for (let done = 1; done <= 4; done++) {
      // Release the one item at the gate (sequential: the next is not called before).
      await expect.poll(() => waiting.length, { timeout: 90_000 }).toBe(1);
      waiting.shift()!();
      await expect.poll(() => progress.textContent(), { timeout: 90_000 }).toBe(`${done}/4`);
      if (done === 2) await shot(p, 'loop-running');
    }
    await p.locator('.node[data-step="start"][data-state="completed"]').waitFor();
    expect(await p.getByTestId('loop-progress').innerText()).toBe('4/4 items');
    expect(await p.getByTestId('calls').getAttribute('data-count')).toBe('4');
  });

  it('opens an execution with a 1,000-item loop and ~10,000 events from its counts, and pages its log', async () => {
    const id = await run('ui/large');
    // Seeded by a real run: three loops of http calls to the test's server.
    await expect.poll(async () => ((await (await fetch(`${h.url}/api/execution/${id}`)).json()) as { status: string }).status, { timeout: 170_000, interval: 500 })
      .toMatch(/completed|failed|cancelled/);
    const { events: firstPage, last_seq: total } = (await (await fetch(`${h.url}/api/events/${id}?limit=1`)).json()) as { events: unknown[]; last_seq: number };
    expect(firstPage).toHaveLength(1);
    expect(total, await diagnose(id)).toBeGreaterThanOrEqual(10_000);

    const { page: p, requests } = await page();
    await p.goto(`${h.url}/ui/executions/${id}`);
    await p.locator('[data-testid="execution"][data-status="completed"]').waitFor();
    for (const [step, n] of [['start', 1000], ['second', 1000], ['third', 500]] as const) {
      await expect.poll(() => p.locator(`.node[data-step="${step}"] .node-progress`).textContent()).toBe(`${n}/${n}`);
      await p.locator(`.node[data-step="${step}"][data-state="completed"]`).waitFor();
    }
    expect(await p.getByTestId('event-count').innerText()).toBe(String(total));
    // The selected (first) step's calls come from its own events, in pages.
    await p.locator('[data-testid="calls"][data-count="1000"]').waitFor();
    expect(await p.getByTestId('loop-progress').innerText()).toBe('1000/1000 items');

    // The raw log: sized for every event, only a screenful of rows in the DOM, the first page drawn.
    await p.locator('[data-tab="events"]').click();
    const log = p.getByTestId('events');
    expect(await log.getAttribute('data-count')).toBe(String(total));
    await expect.poll(() => log.locator('.vrow[data-loaded="true"] .num').first().textContent()).toBe('1');
    const rows = await log.locator('.vrow').count();
    expect(rows).toBeGreaterThan(10);
    expect(rows).toBeLessThan(200);
    // Its end, fetched when scrolled to.
    await log.evaluate((el) => { el.scrollTop = el.scrollHeight; });
    await log.locator('.event-row .num', { hasText: new RegExp(`^${total}$`) }).waitFor();
    expect(await log.locator('.vrow').count()).toBeLessThan(200);
    await shot(p, 'large-execution');

    // Never the whole log: the log's pages are small, and the rest is narrowed to one step.
    const reads = requests.filter((u) => u.includes(`/api/events/${id}`)).map((u) => new URL(u).searchParams);
    expect(reads.length).toBeGreaterThan(0);
    for (const sp of reads) {
      expect(sp.get('limit'), sp.toString()).not.toBeNull();
      if (!sp.get('step')) expect(Number(sp.get('limit')), sp.toString()).toBeLessThanOrEqual(200);
    }
  });

  it('retries a failed execution from the failed step once the service it calls is fixed', async () => {
    flakyBroken = true;
    const id = await run('ui/flaky');
    const { page: p } = await page();
    await p.goto(`${h.url}/ui/executions/${id}`);
    await p.locator('[data-testid="execution"][data-status="failed"]').waitFor({ timeout: 120_000 });
    await p.locator('.node[data-step="lookup"][data-state="failed"]').waitFor();
    await p.locator('.node[data-step="start"][data-state="completed"]').waitFor();
    expect(await p.getByTestId('call-error').innerText()).toContain('500');
    const callsBefore = flakyCalls;
    flakyBroken = false;
    await p.getByTestId('retry').click();
    try {
      await p.locator('[data-testid="execution"][data-status="completed"]').waitFor({ timeout: 120_000 });
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${await diagnose(id)}`, { cause: err });
    }
    for (const step of ['start', 'lookup', 'report']) await p.locator(`.node[data-step="${step}"][data-state="completed"]`).waitFor();
    expect(await p.getByTestId('retry').count()).toBe(0);
    expect(flakyCalls).toBeGreaterThan(callsBefore);
    const ex = (await (await fetch(`${h.url}/api/execution/${id}`)).json()) as { status: string; result: unknown; retries: number };
    expect(ex.status).toBe('completed');
    expect(ex.retries).toBe(1);
    await p.locator('[data-tab="result"]').click();
    expect(await p.getByTestId('tab-result').innerText()).toContain('Oslo 21');
    await shot(p, 'retried');
  });

  it('lists executions with filters and opens one', async () => {
    const { page: p } = await page();
    await p.goto(`${h.url}/`);
    await p.waitForURL(/\/ui\/$/);
    await p.getByTestId('filter-status').selectOption('failed');
    // The list refetches with the filter; poll until the page shows its answer (failed ones only).
    const statuses = () => p.locator('[data-testid="executions"] [data-status]').evaluateAll((els) => els.map((e) => e.getAttribute('data-status')));
    await expect.poll(async () => [...new Set(await statuses())], { timeout: 90_000 }).toEqual(['failed']);
    await p.locator('[data-testid="executions"] tr[data-execution] a').first().click();
    await p.locator('[data-testid="execution"][data-status="failed"]').waitFor();
    // A worker that stopped heartbeating stays listed, as offline; the running ones are online.
    await fetch(`${h.url}/api/runtime/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kind: 'worker', name: 'ui-stopped' }) });
    await h.server.core.deps.db.pool.query("UPDATE runtime SET last_heartbeat = now() - interval '10 minutes' WHERE name = 'ui-stopped'");
    for (const url of ['/ui/queue', '/ui/credentials']) {
      await p.goto(`${h.url}${url}`);
      await p.locator('table tbody tr').first().waitFor();
      if (url !== '/ui/queue') continue;
      expect(await p.locator('tr[data-runtime="ui-stopped"] [data-status]').getAttribute('data-status')).toBe('offline');
      expect(await p.locator('tr[data-runtime="ui-stopped"]').innerText()).toMatch(/\(6\d\d s ago\)/);
      const online = await p.locator('[data-testid="runtimes"] [data-status="online"]').count();
      expect(online).toBeGreaterThan(0); // this server and its worker
    }
    expect(await p.locator('[data-stat="queued"]').count()).toBe(0); // credentials page now
    await shot(p, 'credentials');
  });

  it('every request of every page stays on the server’s origin, and no page hit a CSP violation', async () => {
    const { page: p } = await page();
    await p.goto(`${h.url}/redoc`);
    await p.locator('.api-content, redoc h1').first().waitFor({ timeout: 90_000 });
    const origin = new URL(h.url).origin;
    const blocked = new Set(pages.flatMap((x) => x.blocked));
    const all = pages.flatMap((x) => x.requests).filter((u) => !u.startsWith('data:') && !u.startsWith('blob:') && !blocked.has(u));
    expect(all.length).toBeGreaterThan(20);
    expect(all.filter((u) => new URL(u).origin !== origin)).toEqual([]);
    for (const x of pages.slice(0, -1)) expect(x.problems.filter((m) => /Content Security Policy/.test(m))).toEqual([]);
  });
});

describe('web console with an API token', { timeout: 180_000 }, () => {
  let secured: RunningServer;
  let url: string;
  beforeAll(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const config = { ...loadConfig({ ...h.env, PORT: String(port), PLAYFLOW_API_TOKEN: 'ui-token-42', SERVER_API_URL: url }), host: '127.0.0.1' };
    secured = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'warn' }) });
  }, 60_000);
  afterAll(async () => {
    await secured?.stop();
  });

  it('asks for the token once, keeps it in session storage only, and uses it', async () => {
    const { context, page: p, requests } = await page();
    await p.goto(`${url}/ui/executions`);
    await p.getByTestId('token-prompt').waitFor();
    await p.getByTestId('token-input').fill('wrong');
    await p.getByRole('button', { name: 'Continue' }).click();
    await expect.poll(() => p.getByTestId('token-prompt').innerText()).toContain('refused');
    await p.getByTestId('token-input').fill('ui-token-42');
    await p.getByRole('button', { name: 'Continue' }).click();
    await p.locator('[data-testid="executions"] tr[data-execution]').first().waitFor();
    expect(await p.evaluate('sessionStorage.getItem("playflow.token")')).toBe('ui-token-42');
    expect(await p.evaluate('localStorage.length')).toBe(0);
    expect(await context.cookies()).toEqual([]);
    // Another page of the same tab does not ask again.
    await p.goto(`${url}/ui/queue`);
    await p.locator('[data-stat="queued"]').waitFor();
    expect(await p.getByTestId('token-prompt').count()).toBe(0);
    expect(requests.filter((u) => u.includes('ui-token-42'))).toEqual([]);
    await shot(p, 'token');
  });
});

describe('console endpoints and serving', () => {
  it('/ redirects to /ui/, pages get index.html with a strict CSP and a fresh nonce, assets are cached', async () => {
    const root = await fetch(`${h.url}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/ui/');
    const a = await fetch(`${h.url}/ui/executions/123`);
    const b = await fetch(`${h.url}/ui/executions/123`);
    expect(a.status).toBe(200);
    const csp = a.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    const nonce = /'nonce-([^']+)'/.exec(csp)![1];
    expect(await a.text()).toContain(`content="${nonce}"`);
    expect(b.headers.get('content-security-policy')).not.toContain(nonce);
    const html = await b.text();
    const asset = /src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)![1];
    const js = await fetch(`${h.url}${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('cache-control')).toContain('immutable');
    expect((await fetch(`${h.url}/ui/assets/nope.js`)).status).toBe(404);
    const redoc = await fetch(`${h.url}/redoc`);
    expect(await redoc.text()).not.toMatch(/https?:\/\//);
    expect((await fetch(`${h.url}/redoc/redoc.standalone.js`)).status).toBe(200);
  });

  it('catalog versions, executions by parent, queue throughput, and the events long poll', async () => {
    const v2 = await register(GREETING.replace('Hello, ', 'Hi, '));
    const versions = (await (await fetch(`${h.url}/api/catalog/versions/ui/greeting`)).json()) as { versions: Array<{ version: number }> };
    expect(versions.versions.map((v) => v.version)).toEqual([v2.version, v2.version - 1]);
    const missing = await fetch(`${h.url}/api/catalog/versions/ui/none`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toContain("'ui/none'");

    const none = (await (await fetch(`${h.url}/api/executions?parent=1`)).json()) as { executions: unknown[] };
    expect(none.executions).toEqual([]);
    const bad = await fetch(`${h.url}/api/executions?parent=x`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("'parent'");

    const tp = (await (await fetch(`${h.url}/api/queue/throughput?minutes=5`)).json()) as { minutes: Array<{ done: number; failed: number }> };
    expect(tp.minutes).toHaveLength(5);
    expect(tp.minutes.reduce((n, m) => n + m.done, 0)).toBeGreaterThan(0);

    const loopId = (await (await fetch(`${h.url}/api/executions?path=ui/loop&limit=1`)).json() as { executions: Array<{ execution_id: string }> }).executions[0].execution_id;
    const counts = (await (await fetch(`${h.url}/api/execution/${loopId}/steps`)).json()) as { steps: unknown[] };
    expect(counts.steps).toEqual([{ step: 'start', calls: 4, started: 4, done: 4, errors: 0, loop_total: 4, loop_done: 4 }]);
    expect((await fetch(`${h.url}/api/execution/999999/steps`)).status).toBe(404);

    // One step's events, one kind of events, and the log's size, for the console's paging.
    const all = (await (await fetch(`${h.url}/api/events/${loopId}?limit=5000`)).json()) as { events: Array<{ seq: number; step: string | null; name: string }>; last_seq: number };
    expect(all.last_seq).toBe(all.events.length);
    expect(all.events.map((e) => e.seq)).toEqual(all.events.map((_, i) => i + 1));
    const stepPage = (await (await fetch(`${h.url}/api/events/${loopId}?step=start&limit=3`)).json()) as typeof all & { next_after: number | null };
    const ofStart = all.events.filter((e) => e.step === 'start');
    expect(stepPage.events.map((e) => e.seq)).toEqual(ofStart.slice(0, 3).map((e) => e.seq));
    expect(stepPage.next_after).toBe(ofStart[2].seq);
    expect(stepPage.last_seq).toBe(all.last_seq);
    const rest = (await (await fetch(`${h.url}/api/events/${loopId}?step=start&after=${stepPage.next_after}&limit=5000`)).json()) as typeof stepPage;
    expect(rest.events.map((e) => e.seq)).toEqual(ofStart.slice(3).map((e) => e.seq));
    expect(rest.next_after).toBeNull();
    const calls = (await (await fetch(`${h.url}/api/events/${loopId}?name=command_issued`)).json()) as typeof all;
    expect(calls.events).toHaveLength(4);
    expect(calls.events.every((e) => e.name === 'command_issued' && e.step === 'start')).toBe(true);
    const emptyStep = await fetch(`${h.url}/api/events/${loopId}?step=`);
    expect(emptyStep.status).toBe(400);
    expect(((await emptyStep.json()) as { error: { message: string } }).error.message).toContain('step');
    expect((await fetch(`${h.url}/api/events/999999?step=start`)).status).toBe(404);
    const doc = (await (await fetch(`${h.url}/docs/json`)).json()) as { paths: Record<string, { get?: { parameters?: Array<{ name: string }> } }> };
    const params = doc.paths['/api/events/{id}'].get!.parameters!.map((x) => x.name);
    expect(params).toEqual(expect.arrayContaining(['after', 'limit', 'wait', 'step', 'name']));

    const id = await run('ui/greeting', { name: 'Lin' });
    const first = (await (await fetch(`${h.url}/api/events/${id}?limit=1`)).json()) as { events: Array<{ seq: number }> };
    // Waits for what comes after the first event instead of answering an empty page at once.
    const next = (await (await fetch(`${h.url}/api/events/${id}?after=${first.events[0].seq}&wait=20`)).json()) as { events: Array<{ seq: number }> };
    expect(next.events.length).toBeGreaterThan(0);
    expect(next.events[0].seq).toBe(first.events[0].seq + 1);
  });
});
