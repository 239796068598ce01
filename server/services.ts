/**
 * The server's service layer: what the HTTP plugins (server/app/) call and what the store-backed
 * implementations (server/store/, server/executions/) provide. Routes stay thin; every rule about
 * executions, the queue and the catalog lives behind these interfaces.
 */
import type { BoundStatement } from './pipeline.js';
import type pg from 'pg';
import type { JsonObject, Playbook, PlaybookIssue } from '../playbook/types.js';
import type {
  ClaimNextRequest, ClaimRequest, ClaimedCommand, EventView, EventsAck, ExecutionListItem, ExecutionListView, ExecutionView, HeartbeatRequest, HeartbeatResponse, Id, ReleaseLeaseRequest, ReleaseLeasesResponse,
  QueueStats, QueueThroughput, RerunRequest, RuntimeEntry, ResourceOwner, RetryRequest, RunRequest, RunResponse, WorkerEvent,
} from '../common/protocol.js';
import type { ExecutionStatus } from './engine/contract.js';
import type { CredentialService } from './secrets/credentials.js';
import type { KeychainService } from './secrets/keychain.js';
import type { VarsService } from './secrets/vars.js';
import type { SqlReader } from './store/sql-reader.js';
import type { StepCounts } from './store/events.js';
import type { ScheduleService } from './schedules/service.js';
import type { HookService } from './hooks/service.js';
import type { ExecutionOrigin } from './store/executions.js';
import type { Db, SessionSql } from './db.js';
import type { ExecutionWaiter } from './executions/waiters.js';
export type { Db };

export interface CatalogEntry {
  catalog_id: Id;
  path: string;
  version: number;
  content: string;
  playbook: Playbook;
  created_at: string;
  /** The resource that claimed the path (issue 14); absent when written through the API. */
  owner?: ResourceOwner;
}
export type CatalogSummary = Omit<CatalogEntry, 'content' | 'playbook' | 'owner'> & { name: string; description?: string };

export type CatalogVersion = Pick<CatalogEntry, 'catalog_id' | 'version' | 'created_at'>;

export interface RegisterResult {
  entry: CatalogEntry;
  /** false when identical content was already the latest version at that path. */
  created: boolean;
  warnings: PlaybookIssue[];
}

/** Work done in a registration's transaction (CatalogService.register). */
export type RegisterAlongside = (client: pg.PoolClient, entry: CatalogEntry) => Promise<void>;

/** Work done in a removal's transaction (CatalogService.remove). */
export type RemoveAlongside = (client: pg.PoolClient, path: string) => Promise<void>;

export interface CatalogService {
  /**
   * Validates with the language module; throws invalidPlaybook (422) listing every problem.
   * `adoptVersion`: with `owner`, claims a path that has no owner when its latest version is this
   * one (upgrade adoption of what an operator from before ownership registered).
   * `alongside`: runs in the registration's transaction once the entry is stored (or found
   * unchanged), so what it writes — a playbook's declared schedules — commits with the version or
   * not at all: when it throws, the version is not stored either.
   */
  register(content: string, path?: string, owner?: ResourceOwner, adoptVersion?: number, alongside?: RegisterAlongside): Promise<RegisterResult>;
  /** Latest version unless `version` is given; deleted paths are not found. */
  get(path: string, version?: number): Promise<CatalogEntry | null>;
  /** `includeDeleted`: a removed path's versions too (its running executions keep them). */
  getById(catalogId: Id, opts?: { includeDeleted?: boolean }): Promise<CatalogEntry | null>;
  list(opts?: { prefix?: string; limit?: number; offset?: number }): Promise<CatalogSummary[]>;
  /**
   * Removes a path from listings and lookups; running executions keep their version. With
   * `owner`, only when that owner holds the path (409 otherwise). `alongside` runs in the
   * removal's transaction when there was a path to remove (its declared schedules go with it):
   * when it throws, the path is not removed either.
   */
  remove(path: string, owner?: ResourceOwner, alongside?: RemoveAlongside): Promise<boolean>;
  /** Latest live version and owner of each known path (the operator's drift check). */
  versions(paths: string[]): Promise<Array<{ path: string; version: number; owner?: ResourceOwner }>>;
  /** Live versions at a path, newest first; empty when the path is unknown. */
  history(path: string): Promise<CatalogVersion[]>;
}

/** An execution as the service returns it: exactly the wire shape of GET /api/execution/{id}. */
export type ExecutionRecord = ExecutionView;

export type { ExecutionListItem, ExecutionListView };

/** An event as stored and served: exactly the wire shape of GET /api/events/{id}. */
export type StoredEvent = EventView;

export interface ExecutionService {
  /** Throws notFound for an unknown path; `req` is valid (common/contract RunBody, checked at the HTTP edge). `origin`: what started it (rerun, schedule tick). */
  start(req: RunRequest, origin?: ExecutionOrigin): Promise<RunResponse>;
  /** `steps: false`: without the step summaries (`steps` is `{}`), for a caller that needs only the outcome. */
  get(executionId: Id, opts?: { steps?: boolean }): Promise<ExecutionRecord | null>;
  /** Newest first; `view: 'summary'` leaves out payload, result and steps. */
  list(opts?: { status?: ExecutionStatus; path?: string; parent?: Id; limit?: number; offset?: number; view?: ExecutionListView }): Promise<ExecutionListItem[]>;
  /** Ordered by seq; `after` is the last seq already seen. */
  events(executionId: Id, opts?: { after?: number; limit?: number }): Promise<{ events: StoredEvent[]; next_after: number | null }>;
  /** Per-step counts of the log (calls, loop progress) without reading payloads; null when unknown. */
  stepCounts(executionId: Id): Promise<StepCounts[] | null>;
  /** Each event is applied in its execution's transaction; duplicates are counted, not applied. */
  /** `claimNext`: eager dispatch of the commands the last event issues (ClaimNextRequest). */
  handleEvents(events: WorkerEvent[], opts?: { claimNext?: ClaimNextRequest }): Promise<EventsAck>;
  claim(queueId: Id, req: ClaimRequest): Promise<ClaimedCommand>;
  heartbeat(queueId: Id, req: HeartbeatRequest): Promise<HeartbeatResponse>;
  /** Ends one lease if that worker holds it (its claim's answer was lost); `released` 0 otherwise. */
  releaseLease(queueId: Id, req: ReleaseLeaseRequest): Promise<ReleaseLeasesResponse>;
  /** Ends the leases of a worker id at once (a worker restarting with that id). */
  releaseWorker(workerId: string): Promise<ReleaseLeasesResponse>;
  cancel(executionId: Id): Promise<ExecutionRecord>;
  /** Resumes a failed or cancelled execution in place; 409 `not_retryable` otherwise. */
  retry(executionId: Id, req?: RetryRequest): Promise<ExecutionRecord>;
  /** A new execution of the same version with the same (or the given) payload, linked to this one. */
  rerun(executionId: Id, req?: RerunRequest): Promise<RunResponse>;
}

export interface QueueService {
  /** Depth of every pool, or of one. */
  stats(pool?: string): Promise<QueueStats>;
  /** Commands finished per minute over the last `minutes` minutes, oldest first (zeros included). */
  throughput(minutes: number): Promise<QueueThroughput>;
}

export interface RuntimeRegistration {
  kind: 'server' | 'worker';
  name: string;
  info?: JsonObject;
}
export interface RuntimeService {
  register(reg: RuntimeRegistration): Promise<void>;
  heartbeat(kind: RuntimeRegistration['kind'], name: string): Promise<void>;
  list(): Promise<RuntimeEntry[]>;
}

/** Everything the HTTP app needs; built once by `server start` (and by tests). */
export interface ServerDeps {
  db: Db;
  catalog: CatalogService;
  executions: ExecutionService;
  queue: QueueService;
  runtime: RuntimeService;
  /** Base URL workers use to reach this server (goes into notifications). */
  serverUrl: string;
  /** Probe for /health (added by the HTTP layer; a `Broker` from common/broker satisfies it). Absent: reported `skipped`. */
  broker?: BrokerProbe;
  /** Credentials, keychain and execution variables (server/secrets); their routes are off when absent. */
  credentials?: CredentialService;
  keychain?: KeychainService;
  vars?: VarsService;
  /** POST /api/postgres/execute's read-only pool (PLAYFLOW_SQL_API=on); absent: that route answers 503. */
  sql?: SqlReader;
  /** Schedules (server/schedules); their routes are off when absent. */
  schedules?: ScheduleService;
  /** Wakes `?wait=` requests when an execution ends (executions/waiters.ts); absent: they re-read on a timer. */
  waiters?: ExecutionWaiter;
  /** True once the server began to stop (its database may be going away too). */
  stopping?: () => boolean;
  /** Webhook triggers (server/hooks); their routes are off when absent. */
  webhooks?: HookService;
}

/** What /health needs of the broker. */
export interface BrokerProbe {
  readonly kind?: string;
  /** true when the broker answers. */
  ping(): Promise<boolean>;
}

/**
 * Extension points the execution service calls inside an execution's transaction, so that
 * variables and keychain entries stay consistent with the event log. The credentials/keychain/
 * vars module implements them; `noopHooks` keeps the core usable without it.
 */
export interface ExecutionHooks {
  /** The engine recorded a `vars_set` event: persist with var_type `step_result`. */
  onVarsSet(client: pg.PoolClient, executionId: Id, variables: JsonObject, sourceStep: string): Promise<void>;
  /** Variables visible to templates besides the engine's own (set through the vars API). */
  loadVars(client: pg.PoolClient, executionId: Id): Promise<JsonObject>;
  /**
   * loadVars as one statement without parameters (the id is a checked decimal, inlined), answering
   * rows `{var_name, var_value}`, and the session statements it EXECUTEs (db.ts): the service sends
   * it with the transaction's BEGIN instead of spending a round trip on it. Optional; without it
   * loadVars is called.
   */
  loadVarsSql?(executionId: string): SessionSql;
  /**
   * The execution reached a terminal status: drop its variables and local/shared keychain entries.
   * `status` failed or cancelled: a retry may resume it, so its API variables stay (retention
   * deletes them with the execution).
   */
  onExecutionTerminal(client: pg.PoolClient, execution: TerminalExecution): Promise<void>;
  /**
   * onExecutionTerminal as statements without parameters (ids inlined, checked), `;`-separated:
   * the service sends them with the rest of the end's statements in one round trip. Optional;
   * without it onExecutionTerminal is called.
   */
  onExecutionTerminalSql?(execution: TerminalExecution): string;
  /**
   * onExecutionTerminal as bound statements: the service sends them with the write that ends the
   * execution in one pipeline (server/pipeline.ts). Optional; without it the SQL above is used.
   */
  onExecutionTerminalStatements?(execution: TerminalExecution): BoundStatement[];
}

/** What ExecutionHooks are told of an execution that reached a terminal status. */
export interface TerminalExecution {
  execution_id: Id;
  root_execution_id: Id;
  catalog_id: Id;
  status?: ExecutionStatus;
}

export const noopHooks: ExecutionHooks = {
  async onVarsSet() {},
  async loadVars() {
    return {};
  },
  async onExecutionTerminal() {},
};
