/**
 * How long the web console takes to open a large execution: a 1,000-item loop followed by two
 * more loops (1,000 and 500 items) of http calls to a local server, about 10,000 events, run by
 * the real server and one worker process. Debian's chromium then opens the execution's page in
 * fresh contexts. Figures (median of the opens):
 *
 * - open: navigation → the graph shows every loop's progress (1000/1000, 1000/1000, 500/500);
 *   the page reads the record, the per-step counts and the log's size, never the whole log;
 * - step calls: → the selected step's (the first loop's) 1,000 calls listed (its ~4,000 events,
 *   fetched with `?step=` in pages);
 * - log first page: the events tab clicked → its first rows drawn (one page of 200 events);
 * - log end: scrolled to the bottom → the last event drawn (only that page fetched);
 * - DOM rows of the log: how many rows the virtualised list holds (of ~10,000).
 *
 *   npm run build && node dist/bench/console-open.js [opens=5]
 */
import { launchBrowser } from '../test/ui/browser.js';
import { startEchoApi, startStack, runToEnd } from './support.js';

const OPENS = Number(process.argv[2] ?? 5);

async function main() {
  const api = await startEchoApi();
  const apiUrl = api.url;
  const stack = await startStack({ workers: 1, concurrency: 32 });
  const browser = await launchBrowser();
  try {
    const loop = (name: string, items: number, next?: string) => `  - step: ${name}
    loop: { in: "{{ range(${items}) | list }}", iterator: i, mode: async, max_in_flight: 64 }
    tool: { kind: http, method: GET, endpoint: "${apiUrl}/${name}/{{ i }}" }
${next ? `    next: [{ step: ${next} }]\n` : ''}`;
    await stack.client.registerPlaybook(`apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: console_open, path: bench/console-open }
workflow:
${loop('start', 1000, 'second')}${loop('second', 1000, 'third')}${loop('third', 500)}`);
    const t = Date.now();
    const r = await runToEnd(stack.client, 'bench/console-open', {});
    if (r.execution.status !== 'completed') throw new Error(`run ended ${r.execution.status}: ${JSON.stringify(r.execution.error)}`);
    const id = String(r.execution.execution_id);
    const page0 = await (await fetch(`${stack.url}/api/events/${id}?limit=1`)).json() as { last_seq: number };
    const events = page0.last_seq;
    console.log(`console-open: execution ${id} (loops of 1000, 1000, 500 items) ran in ${Date.now() - t} ms: ${events} events`);
    const m: Record<string, number[]> = { open: [], calls: [], first: [], end: [], rows: [] };
    for (let i = 0; i < OPENS; i++) {
      const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
      const page = await context.newPage();
      // The first open's requests, with when each ended (ms after navigation): where the time goes.
      const trace: string[] = [];
      if (i === 0) page.on('requestfinished', (req) => trace.push(`${Date.now() - t0} ms ${req.url().replace(stack.url, '')} (${Math.round(req.timing().responseEnd)} ms)`));
      const t0 = Date.now();
      await page.goto(`${stack.url}/ui/executions/${id}`);
      for (const [step, n] of [['start', 1000], ['second', 1000], ['third', 500]] as const) {
        await page.locator(`.node[data-step="${step}"] .node-progress`, { hasText: `${n}/${n}` }).waitFor({ timeout: 60_000 });
      }
      m.open.push(Date.now() - t0);
      if (trace.length) console.log(`console-open: first open's requests (ended at; took):\n  ${trace.join('\n  ')}`);
      await page.locator('[data-testid="calls"][data-count="1000"]').waitFor({ timeout: 60_000 });
      m.calls.push(Date.now() - t0);
      const t1 = Date.now();
      await page.locator('[data-tab="events"]').click();
      await page.locator('[data-testid="events"] .vrow[data-loaded="true"]').first().waitFor({ timeout: 60_000 });
      m.first.push(Date.now() - t1);
      m.rows.push(await page.locator('[data-testid="events"] .vrow').count());
      const t2 = Date.now();
      await page.getByTestId('events').evaluate((el) => { el.scrollTop = el.scrollHeight; });
      await page.locator('.event-row .num', { hasText: new RegExp(`^${events}$`) }).waitFor({ timeout: 60_000 });
      m.end.push(Date.now() - t2);
      await context.close();
    }
    const fmt = (xs: number[], unit = ' ms') => {
      const s = [...xs].sort((a, b) => a - b);
      return `median ${s[Math.floor(s.length / 2)]}${unit} (min ${s[0]}, max ${s[s.length - 1]})`;
    };
    console.log(`console-open: navigation → graph with every loop's progress, ${OPENS} fresh pages: ${fmt(m.open)}; goal < 1000 ms`);
    console.log(`console-open: navigation → the first loop step's 1000 calls listed: ${fmt(m.calls)}`);
    console.log(`console-open: events tab → first page of the log drawn: ${fmt(m.first)}`);
    console.log(`console-open: scrolled to the end → event ${events} drawn: ${fmt(m.end)}`);
    console.log(`console-open: rows of the log in the DOM: ${fmt(m.rows, '')} of ${events}`);
  } finally {
    await browser.close();
    await stack.close();
    await api.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
