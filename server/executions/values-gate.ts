/**
 * Whether this server may store large values beside the documents that hold them (migration 280,
 * store/decision.ts). Servers of the previous version read whole event payloads, summaries and
 * snapshots; during a rolling upgrade they run beside this one on the same database and would
 * fold a step's result as missing. So the layout is written only while no live server lacks the
 * feature: every server registers `values-beside` in its runtime info, and a server that
 * heartbeat within `staleSeconds` without it closes the gate. Readers take both layouts, always.
 *
 * The answer is re-read at most every `refreshMs`, in the background after the first (which the
 * first write waits for); until it is known, and when the query fails, the gate stays as it was —
 * closed at start, the layout every version reads.
 */
import type { Db } from '../db.js';
import * as runtimeStore from '../store/runtime.js';
import { RUNTIME_LIVE_SECONDS } from '../../common/contract/limits.js';

export const VALUES_BESIDE_FEATURE = 'values-beside';

export interface ValuesGateOptions {
  /** This server's runtime name (its own registration is not counted). */
  self: string;
  /** How often the registrations are read again (default 10 s). */
  refreshMs?: number;
  /** A server whose last heartbeat is older is gone (default 60 s; servers beat every 15 s). */
  staleSeconds?: number;
}

export class ValuesGate {
  private open = false;
  private checkedAt: number | undefined;
  private checking: Promise<boolean> | null = null;

  constructor(private readonly db: Pick<Db, 'pool'>, private readonly o: ValuesGateOptions) {}

  /** May this write use the layout? */
  async beside(): Promise<boolean> {
    if (this.checkedAt === undefined) return this.refresh();
    if (Date.now() - this.checkedAt >= (this.o.refreshMs ?? 10_000)) void this.refresh();
    return this.open;
  }

  /** Reads the registrations now. */
  refresh(): Promise<boolean> {
    this.checking ??= runtimeStore.liveServersWithout(this.db.pool, VALUES_BESIDE_FEATURE, this.o.staleSeconds ?? RUNTIME_LIVE_SECONDS, this.o.self)
      .then((older) => {
        this.open = older === 0;
        return this.open;
      }, () => this.open)
      .finally(() => {
        this.checkedAt = Date.now();
        this.checking = null;
      });
    return this.checking;
  }
}
