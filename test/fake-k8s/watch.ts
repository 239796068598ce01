/**
 * The watch protocol: a retained history of ADDED/MODIFIED/DELETED events under one increasing
 * resourceVersion, streams that replay from a resourceVersion (or start with synthetic ADDED
 * events), BOOKMARKs, `timeoutSeconds`, and 410 Expired for a resourceVersion older than the
 * retained history. Also the selector matching that lists share with watches.
 */
import type http from 'node:http';
import { HttpError, statusOf } from './errors.js';
import type { Obj } from './resources.js';

export interface HistoryEntry {
  rv: number;
  resKey: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Obj;
}

export interface Filter {
  resKey: string;
  namespace?: string;
  fieldSelector?: Record<string, string>;
  labelSelector?: Record<string, string>;
}

interface WatchConn extends Filter {
  bookmarks: boolean;
  res: http.ServerResponse;
  timers: NodeJS.Timeout[];
  closed: boolean;
}

export function getPath(obj: Obj, dotted: string): any {
  let cur: any = obj;
  for (const part of dotted.split('.')) {
    if (cur == null || typeof cur !== 'object') return undefined;
    cur = cur[part];
  }
  return cur;
}

/** Equality selectors only (`a=b`, `a==b`). */
export function parseSelector(s: string | null): Record<string, string> | undefined {
  if (!s) return undefined;
  const out: Record<string, string> = {};
  for (const part of s.split(',')) {
    const m = /^([^=!]+)==?(.*)$/.exec(part.trim());
    if (!m) throw new HttpError(400, 'BadRequest', `unsupported selector: ${part}`);
    out[m[1]!.trim()] = m[2]!.trim();
  }
  return out;
}

export function filterOf(resKey: string, namespace: string | undefined, url: URL): Filter {
  return {
    resKey,
    namespace,
    fieldSelector: parseSelector(url.searchParams.get('fieldSelector')),
    labelSelector: parseSelector(url.searchParams.get('labelSelector')),
  };
}

export function matches(f: Filter, resKey: string, obj: Obj): boolean {
  if (f.resKey !== resKey) return false;
  if (f.namespace && obj.metadata.namespace !== f.namespace) return false;
  for (const [k, v] of Object.entries(f.fieldSelector ?? {})) if (String(getPath(obj, k) ?? '') !== v) return false;
  for (const [l, v] of Object.entries(f.labelSelector ?? {})) if ((obj.metadata.labels ?? {})[l] !== v) return false;
  return true;
}

export class WatchHub {
  private history: HistoryEntry[] = [];
  private compactedThrough = 0;
  private readonly watches = new Set<WatchConn>();
  enabled = true;

  constructor(private readonly bookmarkIntervalMs: number, private readonly currentRv: () => number) {}

  get open(): number {
    return this.watches.size;
  }

  /** The resourceVersion up to which history is forgotten (older reads get 410 Gone). */
  get compactedRv(): number {
    return this.compactedThrough;
  }

  /** Forget every event so far: watches resuming from an older resourceVersion get 410 Gone. */
  compact(): void {
    this.history = [];
    this.compactedThrough = this.currentRv();
  }

  record(entry: HistoryEntry): void {
    this.history.push(entry);
    if (this.history.length > 10_000) {
      const dropped = this.history.splice(0, 5_000);
      this.compactedThrough = dropped[dropped.length - 1]!.rv;
    }
    for (const w of this.watches) this.deliver(w, entry);
  }

  dropAll(): void {
    for (const w of [...this.watches]) this.close(w);
  }

  /** Sends an ERROR event with a Status of `code` on every open watch, then closes them. */
  failAll(code: number, reason: string): void {
    for (const w of [...this.watches]) {
      w.res.write(JSON.stringify({ type: 'ERROR', object: statusOf(new HttpError(code, reason, `injected ${reason}`)) }) + '\n');
      this.close(w);
    }
  }

  /** Serves one watch request; `existing` are the objects of the resource now (for ADDED). */
  serve(filter: Filter, kind: string, apiVersion: string, url: URL, res: http.ServerResponse, existing: Iterable<Obj>): void {
    if (!this.enabled) throw new HttpError(503, 'ServiceUnavailable', 'watches are disabled (test hook)');
    const rvParam = url.searchParams.get('resourceVersion') ?? '';
    const w: WatchConn = {
      ...filter,
      bookmarks: url.searchParams.get('allowWatchBookmarks') === 'true',
      res,
      timers: [],
      closed: false,
    };
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache' });
    res.flushHeaders();
    if (rvParam === '' || rvParam === '0') {
      // "Get State and Start at Most Recent": synthetic ADDED for everything that exists.
      for (const o of existing) {
        if (matches(w, w.resKey, o)) res.write(JSON.stringify({ type: 'ADDED', object: o }) + '\n');
      }
    } else {
      const from = Number(rvParam);
      if (!Number.isFinite(from) || from < this.compactedThrough) {
        res.write(JSON.stringify({
          type: 'ERROR',
          object: statusOf(new HttpError(410, 'Expired', `too old resource version: ${rvParam} (${this.compactedThrough})`)),
        }) + '\n');
        res.end();
        return;
      }
      for (const e of this.history) if (e.rv > from) this.deliver(w, e);
    }
    this.watches.add(w);
    res.on('close', () => this.close(w));
    const timeout = Number(url.searchParams.get('timeoutSeconds') ?? '0');
    if (timeout > 0) w.timers.push(setTimeout(() => this.close(w), timeout * 1000));
    if (w.bookmarks) {
      w.timers.push(setInterval(() => {
        if (w.closed) return;
        res.write(JSON.stringify({
          type: 'BOOKMARK',
          object: { kind, apiVersion, metadata: { resourceVersion: String(this.currentRv()) } },
        }) + '\n');
      }, this.bookmarkIntervalMs));
    }
  }

  private deliver(w: WatchConn, e: HistoryEntry): void {
    if (w.closed || !matches(w, e.resKey, e.object)) return;
    w.res.write(JSON.stringify({ type: e.type, object: e.object }) + '\n');
  }

  private close(w: WatchConn): void {
    if (w.closed) return;
    w.closed = true;
    for (const t of w.timers) clearTimeout(t);
    this.watches.delete(w);
    w.res.end();
  }
}
