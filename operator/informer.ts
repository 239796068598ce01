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
 */
import type { Watch } from '@kubernetes/client-node';
import type { Logger } from './log.js';

export interface ListResult<T> {
  metadata?: { resourceVersion?: string };
  items: T[];
}

export interface InformerOptions<T> {
  name: string;
  /** Watch path, e.g. /apis/playflow.io/v1alpha1/namespaces/ns/playbooks. */
  path: string;
  list: () => Promise<ListResult<T>>;
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

export function objectKey(o: KubeObjectLike): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

export class Informer<T extends KubeObjectLike> {
  private readonly cache = new Map<string, T>();
  private rv = '';
  private stopped = true;
  private synced = false;
  private abort?: AbortController;
  private loopDone?: Promise<void>;
  private resyncTimer?: NodeJS.Timeout;
  private readonly handlers: { add: Handler<T>[]; update: Handler<T>[]; delete: Handler<T>[] } = { add: [], update: [], delete: [] };
  private syncWaiters: Array<() => void> = [];
  private wakeSleep?: () => void;
  /** Relists done (the first list included); tests read it. */
  relists = 0;

  constructor(private readonly opts: InformerOptions<T>) {}

  on(event: 'add' | 'update' | 'delete', handler: Handler<T>): void {
    this.handlers[event].push(handler);
  }

  get(namespace: string, name: string): T | undefined {
    return this.cache.get(`${namespace}/${name}`);
  }

  list(): T[] {
    return [...this.cache.values()];
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
      this.resyncTimer = setInterval(() => {
        for (const o of this.cache.values()) this.emit('update', o, o);
      }, resync);
      this.resyncTimer.unref?.();
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

  private async relist(): Promise<void> {
    const result = await this.opts.list();
    this.relists += 1;
    const seen = new Set<string>();
    for (const item of result.items ?? []) {
      const key = objectKey(item);
      seen.add(key);
      const old = this.cache.get(key);
      this.cache.set(key, item);
      if (!old) this.emit('add', item);
      else if (old.metadata?.resourceVersion !== item.metadata?.resourceVersion) this.emit('update', item, old);
    }
    for (const [key, old] of [...this.cache]) {
      if (!seen.has(key)) {
        this.cache.delete(key);
        this.emit('delete', old);
      }
    }
    this.rv = result.metadata?.resourceVersion ?? '';
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
          (type: string, obj: any) => {
            if (finished) return;
            events += 1;
            switch (type) {
              case 'ADDED':
              case 'MODIFIED': {
                const key = objectKey(obj);
                const old = this.cache.get(key);
                this.cache.set(key, obj);
                if (old) this.emit('update', obj, old);
                else this.emit('add', obj);
                break;
              }
              case 'DELETED': {
                const key = objectKey(obj);
                const old = this.cache.get(key);
                this.cache.delete(key);
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
