/** The execution service's internal shapes: a transaction's context, a loaded execution, the group commit's items. */
import type { Counter } from 'prom-client';
import type { ClaimedCommand } from '../../common/protocol.js';
import type { JsonObject, Playbook } from '../../playbook/types.js';
import type { Command, Decision, EngineEvent, ExecutionStateView } from '../engine/contract.js';
import type { ExecutionRow } from '../store/executions.js';
import type * as queueStore from '../store/queue.js';
import type { OutboxItem } from './outbox.js';
import type { TxOptions } from '../db.js';

export interface TxCtx {
  toPublish: OutboxItem[];
  /** Queue rows inserted (their ids are remembered once the transaction committed), with the command of each one queued due. */
  queueRows: Array<queueStore.InsertedCommand & { command?: Command }>;
  /** Queue rows a claim of this transaction leased (no longer fresh, see QueueRef). */
  claimed: string[];
  /** States to put in the process cache once the transaction committed. */
  cache: Map<string, CachedState>;
  /**
   * Executions that became terminal in this transaction, with their children still running as
   * the transaction read them: they are cancelled after the commit.
   */
  terminated: { id: string; openChildren: string[] }[];
  /**
   * The metrics this transaction adds to, added once it committed (service.ts `committed`): a
   * transaction that is redone (a stale speculation or start, a serialization failure, a batch
   * applied again one by one) counts once, and one that did not commit not at all.
   */
  counts: Count[];
}

/** One increment of a counter: `n` (default 1) to the series of `labels`. */
export interface Count {
  counter: Counter<string>;
  labels?: Partial<Record<string, string>>;
  n?: number;
}

export interface CachedState {
  seq: number;
  state: ExecutionStateView;
  snapSeq: number;
  /** The execution row as this process last wrote it (its mutable columns follow the state). */
  row: ExecutionRow;
  /**
   * The API vars the decisions that produced this state saw (hooks.loadVars), when none of them
   * wrote vars: a speculative decision (group-commit.ts speculate) decides with them, and its write
   * checks they are still current.
   */
  vars?: JsonObject;
  /**
   * Queue ids taken after the commit that produced this state, for the eager claims of the next
   * speculative decision: greater than every row of the execution so far, and used only while no
   * other decision came in between (the guard), so queue ids still follow creation order.
   */
  queueIds?: string[];
}

export interface QueueRef {
  execution_id: string;
  command_id: number;
  step: string;
  /**
   * The command of a row this process inserted queued and due that it has not seen claimed since:
   * its first claim may be speculated (group-commit.ts `speculate`); the write leases the row only if it
   * is still queued and undelivered.
   */
  fresh?: Command;
}

export interface Loaded {
  row: ExecutionRow;
  state: ExecutionStateView | undefined;
  seq: number;
  /** seq of the stored snapshot (0: none). */
  snapSeq: number;
  playbook: Playbook;
}

export interface Applied {
  decision: Decision;
  recorded: boolean;
  inserted: queueStore.InsertedCommand[];
  row: ExecutionRow;
  externalVars: JsonObject;
  /** The decision wrote vars (through the hooks): the vars it was made with are no longer current. */
  varsWritten: boolean;
}

/** What one caller of the group commit waits for. */
export type BatchRequest =
  | { kind: 'event'; event: EngineEvent; claimNext?: EagerClaim; holder?: LeaseHolder }
  | { kind: 'claim'; queueId: string; commandId: number; workerId: string; lease: number; fresh?: Command };
/** Who reports a call.done: checked against the queue row's lease under the execution lock. */
export interface LeaseHolder { queueId: string; workerId: string | null; leaseToken: string | null }
export type BatchItem = BatchRequest & { resolve: (v: any) => void; reject: (e: unknown) => void };
/** An event's share of a group commit (its EventsAck counts, and its eager claims). */
export interface EventOutcome { recorded: boolean; commands: number; claimed?: ClaimedCommand[] }
/** claim_next of an events request, validated. */
export interface EagerClaim { workerId: string; lease: number; max: number; pool: string; /** ClaimNextRequest.resent */ resent: boolean }

/**
 * What BEGIN brought back (see prelude): the log's last seq, the API vars when the hooks can send
 * their query with it, and queue ids reserved for eager claims.
 */
export interface Peek {
  lastSeq: number;
  vars?: JsonObject;
  queueIds: string[];
  holders: Map<string, { worker_id: string | null; lease_token: string | null }>;
  /** A speculation: claims of fresh rows are leased by the write (DecisionBatch.claim), not before it. */
  speculative?: boolean;
}
export type ItemOutcome = { ok: true; value: EventOutcome | ClaimedCommand } | { ok: false; err: unknown };

/**
 * What the service does with a transaction's context (service.ts): about to commit, not
 * committed, committed, and after the commit. Starts and GroupCommit run transactions of their
 * own and hand their contexts to these.
 */
export interface TxLifecycle {
  ending(ctx: TxCtx): void;
  abandoned(ctx: TxCtx): void;
  committed(ctx: TxCtx): void;
  afterCommit(ctx: TxCtx): Promise<void>;
}

/**
 * A transaction of the service: `retryUniqueChild` retries a child's start that met its twin's
 * row; `lastCommits`: `fn` runs nothing after the decision's write or the end's statements, so
 * that statement may carry the COMMIT (lazy-tx.ts decisionCommitRules).
 */
export type RunOptions = { retryUniqueChild?: boolean; lastCommits?: boolean } & TxOptions;
