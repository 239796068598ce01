/**
 * The server's service layer: what the HTTP plugins (server/app/) call and what the store-backed
 * implementations (server/store/, server/executions/) provide. Routes stay thin; every rule about
 * executions, the queue and the catalog lives behind these interfaces.
 */
import type pg from 'pg';
import type { JsonObject, Playbook, PlaybookIssue } from '../playbook/types.js';
import type {
  ClaimNextRequest, ClaimRequest, ClaimedCommand, EventView, EventsAck, ExecutionView, HeartbeatRequest, HeartbeatResponse, Id,
  QueueStats, RunRequest, RunResponse, WorkerEvent,
} from '../client/protocol.js';
import type { ExecutionStatus } from './engine/contract.js';
import type { CredentialService } from './secrets/credentials.js';
import type { KeychainService } from './secrets/keychain.js';
import type { VarsService } from './secrets/vars.js';

export interface Db {
  pool: pg.Pool;
  /**
   * Runs fn in one transaction (BEGIN … COMMIT, ROLLBACK on throw). `opts.begin`: statements sent
   * with BEGIN in one round trip, their results passed to fn.
   */
  tx<T>(fn: (client: pg.PoolClient, begun: pg.QueryResult[]) => Promise<T>, opts?: { begin?: string }): Promise<T>;
}

export interface CatalogEntry {
  catalog_id: Id;
  path: string;
  version: number;
  content: string;
  playbook: Playbook;
  created_at: string;
}
export type CatalogSummary = Omit<CatalogEntry, 'content' | 'playbook'> & { name: string; description?: string };

export interface RegisterResult {
  entry: CatalogEntry;
  /** false when identical content was already the latest version at that path. */
  created: boolean;
  warnings: PlaybookIssue[];
}

export interface CatalogService {
  /** Validates with the language module; throws invalidPlaybook (422) listing every problem. */
  register(content: string, path?: string): Promise<RegisterResult>;
  /** Latest version unless `version` is given; deleted paths are not found. */
  get(path: string, version?: number): Promise<CatalogEntry | null>;
  getById(catalogId: Id): Promise<CatalogEntry | null>;
  list(opts?: { prefix?: string; limit?: number; offset?: number }): Promise<CatalogSummary[]>;
  /** Removes a path from listings and lookups; running executions keep their version. */
  remove(path: string): Promise<boolean>;
}

/** An execution as the service returns it: exactly the wire shape of GET /api/execution/{id}. */
export type ExecutionRecord = ExecutionView;

/** An event as stored and served: exactly the wire shape of GET /api/events/{id}. */
export type StoredEvent = EventView;

export interface ExecutionService {
  /** Throws notFound for an unknown path, badRequest for a bad payload. */
  start(req: RunRequest): Promise<RunResponse>;
  get(executionId: Id): Promise<ExecutionRecord | null>;
  list(opts?: { status?: ExecutionStatus; path?: string; limit?: number; offset?: number }): Promise<ExecutionRecord[]>;
  /** Ordered by seq; `after` is the last seq already seen. */
  events(executionId: Id, opts?: { after?: number; limit?: number }): Promise<{ events: StoredEvent[]; next_after: number | null }>;
  /** Each event is applied in its execution's transaction; duplicates are counted, not applied. */
  /** `claimNext`: eager dispatch of the commands the last event issues (ClaimNextRequest). */
  handleEvents(events: WorkerEvent[], opts?: { claimNext?: ClaimNextRequest }): Promise<EventsAck>;
  claim(queueId: Id, req: ClaimRequest): Promise<ClaimedCommand>;
  heartbeat(queueId: Id, req: HeartbeatRequest): Promise<HeartbeatResponse>;
  cancel(executionId: Id): Promise<ExecutionRecord>;
}

export interface QueueService {
  stats(): Promise<QueueStats>;
}

export interface RuntimeRegistration {
  kind: 'server' | 'worker';
  name: string;
  info?: JsonObject;
}
export interface RuntimeService {
  register(reg: RuntimeRegistration): Promise<void>;
  heartbeat(kind: RuntimeRegistration['kind'], name: string): Promise<void>;
  list(): Promise<Array<RuntimeRegistration & { last_heartbeat: string; registered_at: string }>>;
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
  /** Probe for /health (added by the HTTP layer; a `Broker` from server/broker satisfies it). Absent: reported `skipped`. */
  broker?: BrokerProbe;
  /** Credentials, keychain and execution variables (server/secrets); their routes are off when absent. */
  credentials?: CredentialService;
  keychain?: KeychainService;
  vars?: VarsService;
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
   * rows `{var_name, var_value}`: the service sends it with the transaction's BEGIN instead of
   * spending a round trip on it. Optional; without it loadVars is called.
   */
  loadVarsSql?(executionId: string): string;
  /** The execution reached a terminal status: drop its variables and local/shared keychain entries. */
  onExecutionTerminal(client: pg.PoolClient, execution: { execution_id: Id; root_execution_id: Id; catalog_id: Id }): Promise<void>;
}

export const noopHooks: ExecutionHooks = {
  async onVarsSet() {},
  async loadVars() {
    return {};
  },
  async onExecutionTerminal() {},
};
