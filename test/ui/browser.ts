/**
 * Debian's chromium driven by playwright-core (no browser download: `.ci/run` installs the
 * package). Records every request a page makes, so a test can assert they all stay same-origin.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium; .ci/run does) or set CHROMIUM_PATH`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/**
 * Closes the contexts, then the browser, each bounded: Chromium can leave a close pending for good
 * (one racing a navigation commit: microsoft/playwright#41900, #42366), which would turn a passing
 * suite into a hook timeout. Playwright kills the browser process when this process exits anyway.
 */
export async function closeBrowser(browser: Browser | undefined, contexts: BrowserContext[] = [], ms = 15_000): Promise<void> {
  const bounded = (p: Promise<unknown>) => Promise.race([p.catch(() => {}), new Promise((r) => setTimeout(r, ms).unref())]);
  await bounded(Promise.all(contexts.map((c) => c.close())));
  if (browser) await bounded(browser.close());
}

/** Screenshots of the tests go to a temporary folder, never into the repository. */
export const SHOTS = mkdtempSync(path.join(tmpdir(), 'playflow-ui-shots-'));

export interface Recorded {
  context: BrowserContext;
  page: Page;
  /** Every URL requested by the page (documents, scripts, styles, fetches, fonts, images). */
  requests: string[];
  /** URLs the page's Content-Security-Policy refused: the browser never sent them. */
  blocked: string[];
  /** Console errors and uncaught page errors (a CSP violation is one). */
  problems: string[];
}

export async function openPage(browser: Browser): Promise<Recorded> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const requests: string[] = [];
  const problems: string[] = [];
  const blocked: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('requestfailed', (r) => {
    if (/^(csp|net::ERR_BLOCKED_BY_CSP)$/.test(r.failure()?.errorText ?? '')) blocked.push(r.url());
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  return { context, page, requests, blocked, problems };
}

export async function shot(page: Page, name: string): Promise<string> {
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}
