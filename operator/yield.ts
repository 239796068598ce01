/**
 * Cooperative scheduling for the controllers. A reconcile of an object already in sync does no
 * I/O, so a resync of thousands of them would run as one chain of microtasks and block the event
 * loop for seconds — past the leader lease's renew deadline, with /healthz and watches starved.
 * Workers call `yieldIfBusy()` between reconciles: once the current slice has run `budgetMs`, it
 * waits for `setImmediate`, letting timers and I/O in.
 */
import { performance } from 'node:perf_hooks';

const DEFAULT_BUDGET_MS = 10;
let sliceStart = performance.now();

export function yieldIfBusy(budgetMs = DEFAULT_BUDGET_MS): Promise<void> | undefined {
  if (performance.now() - sliceStart < budgetMs) return undefined;
  return new Promise((resolve) => {
    setImmediate(() => {
      sliceStart = performance.now();
      resolve();
    });
  });
}
