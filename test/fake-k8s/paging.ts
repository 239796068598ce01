/**
 * Paginated lists (`limit` / `continue`), as the real API server serves them from etcd:
 *
 * - A list with `limit=N` (N > 0) answers at most N items. When more remain, `metadata.continue`
 *   is an opaque token and `metadata.remainingItemCount` counts the rest (only without label or
 *   field selectors, as the real server); the last page has neither.
 * - Every page of one list is a consistent snapshot at the first page's resourceVersion: objects
 *   created, changed or deleted meanwhile do not show up (etcd reads at that revision; here the
 *   first page keeps the collection as it was — stored objects are replaced, never mutated).
 * - The token is the real one's format: base64url of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`
 *   where key is `namespace/name` of the last item sent. A token that does not decode is 400
 *   `continue key is not valid`; `resourceVersion` with `continue` is 400; a token whose snapshot
 *   is gone — older than the watch history (`compact()`), or past the snapshot TTL (etcd's
 *   compaction, every 5 minutes by default) — is 410 Expired, and the client starts a new list.
 */
import { HttpError } from './errors.js';
import type { Obj } from './resources.js';

const TOKEN_VERSION = 'meta.k8s.io/v1';
/** etcd compacts every 5 minutes by default: a continue token lives at most that long. */
export const SNAPSHOT_TTL_MS = 5 * 60_000;
const MAX_SNAPSHOTS = 64;

export interface ContinueToken {
  rv: number;
  /** Items with a key (namespace/name) sorting after this one come next. */
  after: string;
}

/** Ordering of a list: etcd's, bytewise by key. */
export const byKey = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function encodeContinue(rv: number, lastKey: string): string {
  return Buffer.from(JSON.stringify({ v: TOKEN_VERSION, rv, start: `${lastKey}\u0000` })).toString('base64url');
}

export function decodeContinue(token: string): ContinueToken {
  const invalid = (why: string) => new HttpError(400, 'BadRequest', `continue key is not valid: ${why}`);
  let parsed: { v?: unknown; rv?: unknown; start?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as typeof parsed;
  } catch {
    throw invalid('illegal base64 data or JSON');
  }
  if (parsed?.v !== TOKEN_VERSION) throw invalid('incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  if (typeof parsed.rv !== 'number' || !Number.isInteger(parsed.rv) || parsed.rv <= 0) throw invalid('incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  if (typeof parsed.start !== 'string' || parsed.start.length === 0) throw invalid('encoded key is empty');
  return { rv: parsed.rv, after: parsed.start.endsWith('\u0000') ? parsed.start.slice(0, -1) : parsed.start };
}

/** `limit` query value: absent, empty or ≤ 0 = no limit (the real server's reading). */
export function parseLimit(raw: string | null): number {
  if (raw === null || raw === '') return 0;
  const n = Number(raw);
  if (!Number.isInteger(n)) throw new HttpError(400, 'BadRequest', `invalid value for limit: ${JSON.stringify(raw)}`);
  return n > 0 ? n : 0;
}

export const EXPIRED_CONTINUE = 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.';

interface Snapshot {
  at: number;
  /** Every object of the kind (all namespaces), sorted by key. */
  items: Array<{ key: string; obj: Obj }>;
}

/** The collections as they were at the first page of each paginated list still being read. */
export class ListSnapshots {
  private readonly snaps = new Map<string, Snapshot>();

  constructor(private readonly ttlMs = SNAPSHOT_TTL_MS) {}

  /** Keeps the collection at `rv` (once per rv and kind); returns it. */
  take(rv: number, resKey: string, current: () => Array<{ key: string; obj: Obj }>): Snapshot {
    const id = `${rv}|${resKey}`;
    let snap = this.snaps.get(id);
    if (!snap) {
      this.prune();
      snap = { at: Date.now(), items: current().sort((a, b) => byKey(a.key, b.key)) };
      this.snaps.set(id, snap);
      if (this.snaps.size > MAX_SNAPSHOTS) this.snaps.delete(this.snaps.keys().next().value!);
    }
    return snap;
  }

  /** The snapshot a continue token reads, or a 410 Expired when it is gone. */
  get(rv: number, resKey: string, compactedThrough: number): Snapshot {
    this.prune();
    const snap = rv >= compactedThrough ? this.snaps.get(`${rv}|${resKey}`) : undefined;
    if (!snap) throw new HttpError(410, 'Expired', EXPIRED_CONTINUE);
    return snap;
  }

  /** Forgets every snapshot (compaction): outstanding tokens expire. */
  clear(): void {
    this.snaps.clear();
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, s] of this.snaps) if (now - s.at > this.ttlMs) this.snaps.delete(id);
  }
}

/** Index of the first item after `after` (binary search over the sorted keys). */
export function firstAfter(items: Array<{ key: string }>, after: string): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byKey(items[mid]!.key, after) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
