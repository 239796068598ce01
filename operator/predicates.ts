/**
 * Which updates of a watched object are worth a reconcile. Each controller writes its object's
 * status, and the watch hands that write back as an update. Reconciling on it would skip the work
 * queue's backoff: a failure that writes a different message each time (a 503 with a request id,
 * a refusal then a timeout) would retry at once, forever. So, as controller-runtime's
 * GenerationChangedPredicate, a status-only change is ignored; a resync, a spec change (the
 * generation), a deletion, and the metadata the controllers act on (annotations such as
 * force-delete, finalizers) still count.
 */
interface Watched {
  metadata?: {
    generation?: number;
    deletionTimestamp?: unknown;
    annotations?: Record<string, string>;
    finalizers?: string[];
  };
  status?: unknown;
}

export function worthReconciling(obj: Watched, old: Watched | undefined): boolean {
  if (old === undefined || obj === old) return true; // a resync re-delivers the cached object
  const a = obj.metadata ?? {};
  const b = old.metadata ?? {};
  return a.generation !== b.generation
    || !!a.deletionTimestamp !== !!b.deletionTimestamp
    || !sameRecord(a.annotations, b.annotations)
    || (a.finalizers ?? []).join('\n') !== (b.finalizers ?? []).join('\n');
}

function sameRecord(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => a![k] === b?.[k]);
}
