/**
 * A shared informer: list, then watch from the list's resourceVersion, keeping a local cache and
 * calling handlers on add/update/delete. Uses client-node's `Watch` for the stream (the real
 * watch protocol) and a typed-API list function for the list.
 *
 * Unlike client-node's `ListWatch`, it never gives up: a watch that ends cleanly (server timeout,
 * dropped connection) resumes from the last resourceVersion seen (bookmarks included); a 410 Gone —
 * as an ERROR event or as the HTTP status — means the history is compacted, so it relists and
 * reconciles the cache against the new list (objects that vanished meanwhile produce delete
 * callbacks); any other failure retries with capped exponential backoff. `resync` re-delivers
 * every cached object as an update periodically, so level-triggered reconcilers see each object
 * again even without changes.
 *
 * Indexes (client-go's Indexers): `addIndex(name, fn)` keeps value → keys maps updated with every
 * cache change, so "which objects claim this catalog path / reference this Secret" is a map
 * lookup instead of a scan of the whole cache — the scan made a resync of N objects O(N²).
 *
 * Large collections: the list is read in pages (`limit`/`continue`, 500 a page like client-go's
 * reflector) and every pass over the cache — a page's items, the deletions after a relist, a
 * resync — yields to the event loop once it has run its slice (yield.ts). One unpaged list of
 * 10,000 Playbooks was a single JSON.parse of the whole collection plus a synchronous pass
 * storing, indexing and enqueueing every object: hundreds of milliseconds with nothing else
 * running, and the peak of the operator's memory.
 */
import type { Watch } from '@kubernetes/client-node';
import type { Logger } from './log.js';
import { yieldIfBusy } from './yield.js';

export interface ListResult<T> {
  /** `continue` as the JSON has it; `_continue` as client-node's typed lists (V1ListMeta) name it. */
  metadata?: { resourceVersion?: string; continue?: string; _continue?: string };
  items: T[];
}

/** One page of a list: at most `limit` items, from `continue` (the previous page's token). */
export interface ListPage {
  limit?: number;
  continue?: string;
}

/** Items a list page asks for (client-go's reflector pages by 500 too). */
export const DEFAULT_PAGE_SIZE = 500;

export interface InformerOptions<T> {
  name: string;
  /** Watch path, e.g. /apis/playflow.io/v1alpha1/namespaces/ns/playbooks. */
  path: string;
  /** Lists one page; a server that ignores `limit` answers everything in one page. */
  list: (page: ListPage) => Promise<ListResult<T>>;
  /** Items per list page (default DEFAULT_PAGE_SIZE; 0 = unpaged). */
  pageSize?: number;
  /** Applied to every object before it is cached (list items and watch events), e.g. stripForCache. */
  transform?: (obj: T) => T;
  watch: Watch;
  log: Logger;
  /** Server-side watch timeout (randomised ±50% like client-go). Default 300 s. */
  watchTimeoutSeconds?: number;
  /** Re-deliver every cached object as an update this often; 0 disables. */
  resyncMs?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/** The little an informer needs to know about an object. */
export interface KubeObjectLike {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
}

export type Handler<T> = (obj: T, old?: T) => void;

/** The index values of an object (e.g. its catalog path); none = not indexed. */
export type IndexFunc<T> = (obj: T) => string[];

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * Drops what the controllers never read from an object about to be cached, as controller-runtime's
 * TransformStripManagedFields: `metadata.managedFields` (server-side apply bookkeeping, often a
 * third of an object) and kubectl's last-applied-configuration annotation (the whole object again,
 * as a string — for a Secret, its data). At 10,000 Playbooks that is most of the cache.
 */
export function stripForCache<T extends KubeObjectLike>(obj: T): T {
  const md = obj?.metadata as { managedFields?: unknown; annotations?: Record<string, string> } | undefined;
  if (!md) return obj;
  delete md.managedFields;
  if (md.annotations && LAST_APPLIED in md.annotations) {
    delete md.annotations[LAST_APPLIED];
    if (Object.keys(md.annotations).length === 0) delete md.annotations;
  }
  return obj;
}

export function objectKey(o: KubeObjectLike): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

export class Informer<T extends KubeObjectLike> {
  private readonly cache = new Map<string, T>();
  private readonly indexers = new Map<string, IndexFunc<T>>();
  /** index name → value → keys of the objects with that value. */
  private readonly indices = new Map<string, Map<string, Set<string>>>();
  private rv = '';
  private stopped = true;
  private synced = false;
  private abort?: AbortController;
  private loopDone?: Promise<void>;
  private resyncTimer?: NodeJS.Timeout;
  private readonly handlers: { add: Handler<T>[]; update: Handler<T>[]; delete: Handler<T>[] } = { add: [], update: [], delete: [] };
  private syncWaiters: Array<() => void> = [];
  private wakeSleep?: () => void;
  private resyncing?: Promise<void>;
  /** Relists done (the first list included); tests read it. */
  relists = 0;

  constructor(private readonly opts: InformerOptions<T>) {}

  on(event: 'add' | 'update' | 'delete', handler: Handler<T>): void {
    this.handlers[event].push(handler);
  }

  /** Adds an index; objects already cached are indexed at once. */
  addIndex(name: string, fn: IndexFunc<T>): void {
    this.indexers.set(name, fn);
    this.indices.set(name, new Map());
    for (const [key, obj] of this.cache) this.indexOne(name, fn, key, obj);
  }

  /** Cached objects whose index `name` has `value`. */
  byIndex(name: string, value: string): T[] {
    const keys = this.indices.get(name)?.get(value);
    if (!keys) return [];
    const out: T[] = [];
    for (const k of keys) {
      const o = this.cache.get(k);
      if (o) out.push(o);
    }
    return out;
  }

  get size(): number {
    return this.cache.size;
  }

  private indexOne(name: string, fn: IndexFunc<T>, key: string, obj: T): void {
    const index = this.indices.get(name)!;
    for (const v of fn(obj)) {
      let keys = index.get(v);
      if (!keys) index.set(v, (keys = new Set()));
      keys.add(key);
    }
  }

  private unindexOne(name: string, fn: IndexFunc<T>, key: string, obj: T): void {
    const index = this.indices.get(name)!;
    for (const v of fn(obj)) {
      const keys = index.get(v);
      if (!keys) continue;
      keys.delete(key);
      if (keys.size === 0) index.delete(v);
    }
  }

  private store(key: string, obj: T): T | undefined {
    const old = this.cache.get(key);
    if (old === obj) return old;
    for (const [name, fn] of this.indexers) {
      if (old) this.unindexOne(name, fn, key, old);
      this.indexOne(name, fn, key, obj);
    }
    this.cache.set(key, obj);
    return old;
  }

  private remove(key: string): T | undefined {
    const old = this.cache.get(key);
    if (!old) return undefined;
    for (const [name, fn] of this.indexers) this.unindexOne(name, fn, key, old);
    this.cache.delete(key);
    return old;
  }

  get(namespace: string, name: string): T | undefined {
    return this.cache.get(`${namespace}/${name}`);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  values(): IterableIterator<T> {
    return this.cache.values();
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  waitForSync(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loopDone = this.run();
    const resync = this.opts.resyncMs ?? 0;
    if (resync > 0) {
      this.resyncTimer = setInterval(() => void this.resync(), resync);
      this.resyncTimer.unref?.();
    }
  }

  /**
   * Re-delivers every cached object as an update (the periodic resync; tests call it directly).
   * Runs in slices (yield.ts); the returned promise settles when every object was delivered.
   */
  resync(): Promise<void> {
    return this.resyncing ??= this.resyncSliced().finally(() => {
      this.resyncing = undefined;
    });
  }

  private async resyncSliced(): Promise<void> {
    for (const o of [...this.cache.values()]) {
      // Skip what was replaced or removed while this resync yielded: its own event carried it.
      if (this.cache.get(objectKey(o)) === o) this.emit('update', o, o);
      const y = yieldIfBusy();
      if (y) await y;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.abort?.abort();
    this.wakeSleep?.();
    // A list call in flight cannot be aborted; do not let it hold a shutdown for long.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.loopDone, new Promise<void>((r) => { timer = setTimeout(r, 5000); })]);
    clearTimeout(timer);
  }

  private emit(event: 'add' | 'update' | 'delete', obj: T, old?: T): void {
    for (const h of this.handlers[event]) {
      try {
        h(obj, old);
      } catch (err) {
        this.opts.log.error({ err, informer: this.opts.name }, 'informer handler failed');
      }
    }
  }

  private async run(): Promise<void> {
    const min = this.opts.minBackoffMs ?? 200;
    const max = this.opts.maxBackoffMs ?? 30_000;
    let failures = 0;
    while (!this.stopped) {
      try {
        if (!this.rv) await this.relist();
        const outcome = await this.watchOnce();
        if (outcome === 'expired') {
          this.opts.log.info({ informer: this.opts.name }, 'watch history expired (410): relisting');
          this.rv = '';
        }
        failures = 0;
      } catch (err) {
        if (this.stopped) break;
        const status = (err as { statusCode?: number; code?: number }).statusCode ?? (err as { code?: number }).code;
        if (status === 410) {
          this.rv = '';
          continue;
        }
        failures += 1;
        const delay = Math.min(max, min * 2 ** Math.min(failures - 1, 20));
        this.opts.log.warn({ informer: this.opts.name, err: String((err as Error)?.message ?? err), delayMs: delay }, 'list/watch failed; retrying');
        await this.sleep(delay);
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wakeSleep = undefined;
        resolve();
      }, ms);
      this.wakeSleep = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  /**
   * Lists page by page, storing each page as it arrives (every page is of one snapshot, at the
   * first page's resourceVersion), then drops what the list no longer has. An expired continue
   * token (410) propagates: run() starts a new list.
   */
  private async relist(): Promise<void> {
    const limit = this.opts.pageSize ?? DEFAULT_PAGE_SIZE;
    const seen = new Set<string>();
    let token: string | undefined;
    let rv = '';
    do {
      const page = await this.opts.list(limit > 0 ? { limit, ...(token ? { continue: token } : {}) } : {});
      if (this.stopped) return;
      if (!token) rv = page.metadata?.resourceVersion ?? '';
      token = page.metadata?.continue || page.metadata?._continue || undefined;
      for (const raw of page.items ?? []) {
        const item = this.opts.transform ? this.opts.transform(raw) : raw;
        const key = objectKey(item);
        seen.add(key);
        const old = this.store(key, item);
        if (!old) this.emit('add', item);
        else if (old.metadata?.resourceVersion !== item.metadata?.resourceVersion) this.emit('update', item, old);
        const y = yieldIfBusy();
        if (y) await y;
      }
    } while (token);
    this.relists += 1;
    for (const key of [...this.cache.keys()]) {
      if (!seen.has(key)) this.emit('delete', this.remove(key)!);
      const y = yieldIfBusy();
      if (y) await y;
    }
    this.rv = rv;
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters) w();
      this.syncWaiters = [];
    }
  }

  /** One watch connection. Resolves 'closed' on a clean end, 'expired' on 410; rejects on errors. */
  private watchOnce(): Promise<'closed' | 'expired'> {
    const base = this.opts.watchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.max(1, Math.round(base * (0.5 + Math.random())));
    let expired = false;
    let failure: Error | undefined;
    let events = 0;
    const started = Date.now();
    return new Promise((resolve, reject) => {
      let finished = false;
      const finish = (err: unknown): void => {
        if (finished) return;
        finished = true;
        if (expired) resolve('expired');
        else if (err || failure) reject(err ?? failure);
        // A stream the server ends at once with nothing in it is a failure in disguise (a proxy, an
        // overloaded API server): back off rather than reconnect in a tight loop.
        else if (events === 0 && Date.now() - started < 1000 && !this.stopped) reject(new Error('watch closed immediately'));
        else resolve('closed');
      };
      this.opts.watch
        .watch(this.opts.path, { resourceVersion: this.rv, allowWatchBookmarks: true, timeoutSeconds },
          (type: string, raw: any) => {
            if (finished) return;
            events += 1;
            const obj = this.opts.transform && raw?.metadata && (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') ? this.opts.transform(raw) : raw;
            switch (type) {
              case 'ADDED':
              case 'MODIFIED': {
                const old = this.store(objectKey(obj), obj);
                if (old) this.emit('update', obj, old);
                else this.emit('add', obj);
                break;
              }
              case 'DELETED': {
                const old = this.remove(objectKey(obj));
                this.emit('delete', old ?? obj);
                break;
              }
              case 'BOOKMARK':
                break;
              case 'ERROR':
                if (obj?.code === 410) expired = true;
                else {
                  failure = Object.assign(new Error(`watch error: ${obj?.message ?? JSON.stringify(obj)}`), { statusCode: obj?.code });
                  this.abort?.abort();
                }
                return;
              default:
                return;
            }
            const rv = obj?.metadata?.resourceVersion;
            if (rv) this.rv = rv;
          },
          (err: unknown) => finish(err))
        .then((ctl) => {
          this.abort = ctl;
          if (this.stopped || finished) ctl.abort();
        }, (err: unknown) => finish(err));
    });
  }
}
