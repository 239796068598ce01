/** Which step summaries a decision changed: what the execution row's steps column must upsert. */
import type { StepSummary } from '../engine/contract.js';

/**
 * The summaries the engine said its decisions changed, when `prev` (the execution row's) is the
 * very map those decisions started from: O(changed steps), where `changedSteps` is O(steps) (a
 * fifth of the server's time at 10,000 steps). Undefined when that does not hold.
 */
export function touchedSteps(
  prev: Record<string, StepSummary>, next: Record<string, StepSummary>, touched: { from: Record<string, StepSummary>; names: Iterable<string> } | undefined,
): Record<string, StepSummary> | undefined {
  if (!touched || touched.from !== prev) return undefined;
  const changed: Record<string, StepSummary> = {};
  for (const name of touched.names) {
    if (!Object.prototype.hasOwnProperty.call(next, name)) return undefined; // removed: write them all
    changed[name] = next[name];
  }
  return changed;
}

/**
 * The summaries of `next` that are not in `prev`, when `prev` is what the execution row holds and
 * `next` only adds or replaces summaries; undefined (write them all) when one was removed. The
 * engine never changes a summary in place (copy-on-write), so a changed one is a new object and
 * comparing references finds them without serialising anything.
 */
export function changedSteps(prev: Record<string, StepSummary>, next: Record<string, StepSummary>): Record<string, StepSummary> | undefined {
  const changed: Record<string, StepSummary> = {};
  if (prev === next) return changed;
  let kept = 0; // summaries of prev still in next
  for (const name of Object.keys(next)) {
    if (Object.prototype.hasOwnProperty.call(prev, name)) kept++;
    if (prev[name] !== next[name]) changed[name] = next[name];
  }
  return kept === Object.keys(prev).length ? changed : undefined;
}
