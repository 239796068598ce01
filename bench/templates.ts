/**
 * Template budgets under attack: renders each resource-bomb template of issue 19 in this process
 * (as the server does, in its event loop) and prints how it ended, how long the render took and
 * the longest event-loop stall seen meanwhile (perf_hooks monitorEventLoopDelay, 1 ms
 * resolution). Figures only.
 *
 *   npm run build && node dist/bench/templates.js
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { renderString, templateLimits } from '../playbook/template/index.js';
import { ATTACKS, LARGE_BUT_FINE, nested } from '../test/fixtures/template-attacks.js';

const ctx = { workload: {}, deep: nested(5000) };
const pause = () => new Promise((r) => setTimeout(r, 20));

async function main() {
  console.log(`limits: ${JSON.stringify(templateLimits())}`);
  console.log('template'.padEnd(30), 'outcome'.padEnd(9), 'render ms'.padStart(10), 'max stall ms'.padStart(13));
  let worst = 0;
  for (const [name, template] of [...Object.entries(ATTACKS), ...Object.entries(LARGE_BUT_FINE)]) {
    await pause();
    const h = monitorEventLoopDelay({ resolution: 1 });
    h.enable();
    await pause();
    const t0 = performance.now();
    let outcome = 'rendered';
    try {
      renderString(template, ctx);
    } catch (e) {
      outcome = (e as { kind?: string }).kind ?? 'error';
    }
    const ms = performance.now() - t0;
    await pause();
    h.disable();
    const stall = h.max / 1e6;
    worst = Math.max(worst, stall);
    console.log(name.padEnd(30), outcome.padEnd(9), ms.toFixed(0).padStart(10), stall.toFixed(0).padStart(13));
  }
  console.log(`longest event-loop stall: ${worst.toFixed(0)} ms (render budget ${templateLimits().maxMs} ms)`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
