/**
 * The Playbook drift sweep: every verify interval, the catalog is asked for the latest version of
 * every path a Ready Playbook registered — GET /api/catalog/versions, 100 paths a request, no
 * playbook content — and each Playbook whose version is gone or moved is marked and enqueued, so
 * its reconcile registers it again. 10,000 Playbooks cost 100 small requests per interval instead
 * of 10,000 document reads, and the reconciles of objects in step do no I/O at all.
 *
 * Upgrade adoption: an entry still at the Playbook's version but without owner was registered by
 * an operator from before ownership; it is marked too, and the reconcile claims it (registration
 * with `adopt_version`).
 */
import type { Logger } from '../log.js';
import type { OperatorServerApi } from '../api.js';
import type { PlaybookResource } from '../types.js';
import { yieldIfBusy } from '../yield.js';

export const DRIFT_BATCH = 100;

export interface DriftSweepOptions {
  api: OperatorServerApi;
  log: Logger;
  /** The cached Playbooks (iterated, not copied). */
  playbooks: () => Iterable<PlaybookResource>;
  /** Called with `namespace/name` of each Playbook out of step with the catalog. */
  onDrift: (key: string) => void;
  batchSize?: number;
}

/** One sweep; resolves with the number of drifted Playbooks. Server errors reject (the next sweep retries). */
export async function sweepPlaybookDrift(opts: DriftSweepOptions): Promise<number> {
  const size = opts.batchSize ?? DRIFT_BATCH;
  let batch: Array<{ key: string; path: string; version: number }> = [];
  let found = 0;
  const flush = async () => {
    const paths = [...new Set(batch.map((b) => b.path))];
    const versions = await opts.api.playbookVersions(paths);
    for (const b of batch) {
      const entry = versions.get(b.path);
      if (entry?.version === b.version && entry.owner) continue;
      found += 1;
      if (entry?.version === b.version) opts.log.info({ key: b.key, path: b.path, version: b.version }, 'catalog entry without owner (registered before ownership): adopting');
      else opts.log.info({ key: b.key, path: b.path, expected: b.version, found: entry?.version ?? null }, 'catalog drift');
      opts.onDrift(b.key);
    }
    batch = [];
  };
  for (const o of opts.playbooks()) {
    const st = o.status;
    if (o.metadata.deletionTimestamp || !st?.catalogPath || st.catalogVersion === undefined) continue;
    if (!st.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) continue;
    batch.push({ key: `${o.metadata.namespace}/${o.metadata.name}`, path: st.catalogPath, version: st.catalogVersion });
    if (batch.length >= size) {
      await flush();
      await yieldIfBusy();
    }
  }
  if (batch.length) await flush();
  return found;
}
