/**
 * Loading an execution under its lock: the process's state cache (checked against the log's last
 * seq), else the snapshot and the newer events, else the whole log; and the playbook cache
 * (catalog rows are immutable).
 */
import type pg from 'pg';
import type { ExecutionHooks } from '../services.js';
import * as queueStore from '../store/queue.js';
import { apiVarsObject, type ApiVarRow } from '../store/vars.js';
import type { Playbook } from '../../playbook/types.js';
import type { Engine, ExecutionStateView } from '../engine/contract.js';
import * as catalogStore from '../store/catalog.js';
import * as eventStore from '../store/events.js';
import * as execStore from '../store/executions.js';
import { Lru } from './lru.js';
import type { SessionSql, SessionStatement } from '../db.js';
import { isTerminal, lock, lockPrelude, LOCK_PRELUDE_STATEMENTS } from './helpers.js';
import type { CachedState, Loaded, Peek } from './tx-types.js';

export class ExecutionLoader {
  /**
   * Latest committed state per execution, an LRU that may be dropped at any time. Used only when
   * its seq equals the log's last seq read under the execution lock, so another replica's writes
   * are never missed. States are never mutated (the engine is copy-on-write).
   */
  readonly stateCache: Lru<string, CachedState>;
  readonly playbooks = new Map<string, Playbook>();

  constructor(private readonly engine: Engine<ExecutionStateView>, private readonly snapshots: boolean, stateCacheSize: number) {
    this.stateCache = new Lru(stateCacheSize);
  }

  remember(id: string, entry: CachedState) {
    if (isTerminal(entry.state.status)) this.stateCache.delete(id); // nothing more will happen to it (normally)
    else this.stateCache.set(id, entry);
  }

  async playbookFor(client: pg.PoolClient, catalogId: string): Promise<Playbook> {
    const hit = this.playbooks.get(catalogId);
    if (hit) return hit;
    const entry = await catalogStore.getById(client, catalogId, { includeDeleted: true });
    if (!entry) throw new Error(`catalog entry ${catalogId} of an execution is missing`);
    if (this.playbooks.size >= 500) this.playbooks.delete(this.playbooks.keys().next().value!);
    this.playbooks.set(catalogId, entry.playbook);
    return entry.playbook;
  }

  /**
   * Takes the execution's lock and rebuilds its state: the process cache when it is as new as the
   * log, else the snapshot + newer events, else the whole log. `peek` is the lock and the log's last
   * seq already taken with BEGIN (lockPrelude) by the caller.
   */
  async lockAndLoad(client: pg.PoolClient, executionId: string, peek?: Peek): Promise<Loaded | null> {
    let lastSeq: number;
    if (peek) {
      lastSeq = peek.lastSeq;
    } else {
      await lock(client, executionId);
      lastSeq = await eventStore.lastSeq(client, executionId);
    }
    const cached = this.stateCache.get(executionId);
    if (cached && cached.seq === lastSeq && lastSeq > 0) {
      const playbook = await this.playbookFor(client, cached.row.catalog_id);
      return { row: cached.row, state: cached.state, seq: cached.seq, snapSeq: cached.snapSeq, playbook };
    }
    // the stored summaries equal the folded state's (each write keeps them so, in the statement that
    // appends the events): taking the state's map, not aggregating the rows, keeps a cold load
    // O(log since the snapshot) and lets the next write upsert only what it changed (touchedSteps)
    const row = await execStore.get(client, executionId, { steps: false });
    if (!row) return null;
    const playbook = await this.playbookFor(client, row.catalog_id);
    let state: ExecutionStateView | undefined;
    let seq = 0;
    let snapSeq = 0;
    const snap = this.snapshots ? await eventStore.loadSnapshot<ExecutionStateView>(client, executionId) : null;
    if (snap) {
      state = snap.state;
      seq = snap.seq;
      snapSeq = snap.seq;
      for (const e of await eventStore.list(client, executionId, seq)) {
        state = this.engine.reduce(state, eventStore.toEngineEvent(e));
        seq = e.seq;
      }
    } else {
      const all = await eventStore.list(client, executionId, 0);
      if (all.length) {
        state = this.engine.fold(all.map(eventStore.toEngineEvent));
        seq = all[all.length - 1].seq;
      }
    }
    row.steps = state?.steps ?? {};
    return { row, state, seq, snapSeq, playbook };
  }
}

/** Every statement a group commit's prelude may EXECUTE, prepared on a connection's first one. */
const PRELUDE_STATEMENTS: readonly SessionStatement[] = [...LOCK_PRELUDE_STATEMENTS, queueStore.RESERVE_IDS_STATEMENT, queueStore.HOLDER_STATEMENT];

/**
 * Sent with a group commit's BEGIN: the lock, the log's last seq, the API vars when the hooks can
 * give their query, and `reserve` queue ids for eager claims (an action_started names its
 * queue_id before the row is written; ids unused are gaps, as a rolled-back insert leaves).
 */
export function groupCommitPrelude(hooks: ExecutionHooks, executionId: string, reserve: number, holders: string[] = []): SessionSql & { read: (results: pg.QueryResult[]) => Peek } {
  const parts = [lockPrelude(executionId)];
  const vars = hooks.loadVarsSql?.(executionId);
  if (vars) parts.push(vars.sql);
  if (reserve > 0) parts.push(queueStore.reserveIdsSql(reserve));
  // the leases call.done events report on, read under the lock (a reclaim takes the same lock)
  if (holders.length) parts.push(queueStore.holdersSql(holders));
  return {
    sql: parts.join('; '),
    prepare: vars ? [...PRELUDE_STATEMENTS, ...vars.prepare] : PRELUDE_STATEMENTS,
    // results: [lock, last seq, vars?, ids?, one per holder]
    read: (r) => {
      let i = 2;
      const varsRows = vars ? r[i++].rows as ApiVarRow[] : undefined;
      const ids = reserve > 0 ? r[i++].rows.map((x: { id: string }) => x.id) : [];
      const held = new Map<string, { worker_id: string | null; lease_token: string | null }>();
      for (; i < r.length; i++) for (const h of r[i].rows as Array<{ queue_id: string; worker_id: string | null; lease_token: string | null }>) held.set(h.queue_id, h);
      return { lastSeq: Number(r[1]?.rows[0]?.last_seq ?? 0), vars: varsRows ? apiVarsObject(varsRows) : undefined, queueIds: ids, holders: held };
    },
  };
}
