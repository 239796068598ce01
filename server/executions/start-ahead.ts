/**
 * What a top-level start needs before its one round trip (starts.ts `startAhead`): the catalog
 * row an earlier start found live at the request's path, and an execution id taken ahead. With
 * both, the engine decides the first step before anything is sent, and the insert, the write and
 * the id of a later start go in one pipeline; the insert checks that the row is still live.
 *
 * Ids are taken from the execution sequence, so they stay unique across replicas. They are used
 * only while fresh (`maxAgeMs`): `GET /api/executions` lists by id, and an id held for long would
 * list a new execution behind those other replicas started since. A stale id is a gap, nothing else.
 */
import { Lru } from './lru.js';

/** The catalog row a start of `path` (at `version`, or the latest) found live. */
export interface LiveCatalogRow {
  catalog_id: string;
  version: number;
}

/** Ids kept for starts to come, with when they were taken. */
interface HeldId {
  id: string;
  at: number;
}

export class StartAhead {
  private readonly live: Lru<string, LiveCatalogRow>;
  private ids: HeldId[] = [];
  private refilling = false;

  constructor(
    /** Takes `count` ids from the sequence (one statement). */
    private readonly takeIds: (count: number) => Promise<string[]>,
    private readonly opts: { maxAgeMs?: number; paths?: number; now?: () => number } = {},
  ) {
    this.live = new Lru(opts.paths ?? 500);
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  catalogRow(path: string, version: number | undefined): LiveCatalogRow | undefined {
    return this.live.get(key(path, version));
  }

  /** A start of `path` (at the `version` asked, if any) inserted an execution of `row`. */
  found(path: string, version: number | undefined, row: LiveCatalogRow): void {
    this.live.set(key(path, version), { catalog_id: row.catalog_id, version: row.version });
  }

  /** The row guessed for `path` was no longer live (deleted, or a newer version registered). */
  stale(path: string, version: number | undefined): void {
    this.live.delete(key(path, version));
  }

  /**
   * A fresh id, or none: then `wanted` are taken in the background (one statement at a time), and
   * this start goes the two-round-trip way.
   */
  takeId(wanted: number): string | undefined {
    const oldest = this.now() - (this.opts.maxAgeMs ?? 1000);
    while (this.ids.length > 0 && this.ids[0].at < oldest) this.ids.shift();
    const held = this.ids.shift();
    if (!held) this.refill(wanted);
    return held?.id;
  }

  /** Ids a start's pipeline took after its insert. */
  keep(ids: readonly string[]): void {
    const at = this.now();
    for (const id of ids) this.ids.push({ id, at });
  }

  private refill(count: number): void {
    if (this.refilling) return;
    this.refilling = true;
    // never throws: a failed refill only means the next starts take two round trips
    void this.takeIds(Math.max(1, count)).then((ids) => this.keep(ids), () => {}).finally(() => { this.refilling = false; });
  }
}

const key = (path: string, version: number | undefined) => (version === undefined ? `${path}\n` : `${path}\n${version}`);
