/**
 * The one typed HTTP client of the Playflow server API (used by the CLI, the worker and the
 * operator). Every method maps to one endpoint; shapes are those of common/protocol.ts.
 *
 * Errors: every non-2xx answer becomes an `ApiError` carrying the HTTP status and the server's
 * `{error: {code, message, details}}`. A server that cannot be reached (connection refused, DNS,
 * timeout) becomes an `ApiError` with status 0 and code `unreachable` (or `timeout`), so callers
 * handle one error type.
 *
 * IDs are accepted as string, number or bigint and always sent as decimal strings.
 */
import { redactUrl } from '../common/redact-url.js';
import { stringifyJson } from '../common/raw-json.js';
import type {
  CatalogEntryView, CatalogVersions, CatalogVersionsView, ResourceOwner, ClaimNextRequest, ClaimRequest, ClaimedCommand, DeletePlaybookResponse, ErrorBody, EventsAck, EventsPage,
  ExecutionFullList, ExecutionStatusName, ExecutionSummaryList, ExecutionView, HealthResponse, HeartbeatRequest, HeartbeatResponse, ReleaseLeaseRequest, ReleaseLeasesResponse,
  PlaybookList, PostgresExecuteResponse, QueueStats, RegisterPlaybookResponse, RerunRequest, RetryRequest, RunRequest, RunResponse,
  ScheduleList, ScheduleSource, ScheduleSpec, ScheduleTicks, ScheduleView,
  RuntimeList, RuntimeRegisterRequest, StatusOk, WorkerEvent,
} from '../common/protocol.js';
import { EVENTS_PAGE_LIMIT, MAX_WAIT_SECONDS } from '../common/contract/limits.js';

export type IdLike = string | number | bigint;

/** Filters and page of GET /api/executions. */
export interface ExecutionListOptions {
  status?: ExecutionStatusName;
  path?: string;
  /** Only the children of this execution. */
  parent?: IdLike;
  limit?: number;
  offset?: number;
}

/** The server's cap on `wait` (seconds): part of the contract. */
export { MAX_WAIT_SECONDS };

export interface PlayflowClientOptions {
  /** e.g. http://localhost:8082 (a trailing slash is ignored). */
  baseUrl: string;
  /** Bearer token (PLAYFLOW_API_TOKEN). */
  token?: string;
  /** Per-request timeout; default 30 s. */
  timeoutMs?: number;
  /** Extra headers on every request (e.g. a user agent). */
  headers?: Record<string, string>;
  /** Replaces the global fetch (tests, custom dispatchers). */
  fetch?: typeof fetch;
}

export class ApiError extends Error {
  constructor(
    /** HTTP status; 0 when no answer was received. */
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** True when the server was not reached at all (retrying may help). */
  get unreachable(): boolean {
    return this.status === 0;
  }
}

/** A failure a wait may retry: no answer (restart, ECONNREFUSED, timeout) or a gateway's 502/503/504. */
function transient(err: unknown): err is ApiError {
  return err instanceof ApiError && (err.unreachable || err.status === 502 || err.status === 503 || err.status === 504);
}

/** awaitExecution's backoff while retrying: the first pause and the longest. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 2000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Query = Record<string, string | number | boolean | undefined | null>;

interface RequestOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  /** Accept these non-2xx statuses as answers instead of throwing (e.g. 503 from /health). */
  acceptStatus?: number[];
  /** Read the body as text instead of JSON. */
  text?: boolean;
  /** This request's timeout instead of the client's (a long poll waits longer). */
  timeoutMs?: number;
}

/** Slack on top of a long poll's wait before the request counts as timed out. */
const WAIT_SLACK_MS = 15_000;

/** `?wait=` of a long poll and the request timeout that leaves it room. */
function waitOptions(wait: number | undefined, timeoutMs: number): Pick<RequestOptions, 'query' | 'timeoutMs'> {
  if (!wait) return {};
  return { query: { wait }, timeoutMs: Math.max(timeoutMs, wait * 1000 + WAIT_SLACK_MS) };
}

export class PlayflowClient {
  readonly baseUrl: string;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: PlayflowClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.token = opts.token || undefined;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.headers = opts.headers ?? {};
    this.fetchImpl = opts.fetch ?? fetch;
  }

  // ---- health and metrics -----------------------------------------------------------------

  /** GET /health. Answers (does not throw) when the server reports itself degraded (503). */
  health(): Promise<HealthResponse> {
    return this.request('GET', '/health', { acceptStatus: [503] });
  }

  /** GET /metrics (Prometheus text). */
  metrics(): Promise<string> {
    return this.request('GET', '/metrics', { text: true });
  }

  // ---- catalog ----------------------------------------------------------------------------

  /**
   * POST /api/catalog/playbook. 422 `playbook_invalid` lists every problem in `details`; with
   * `owner`, 409 `owned_by_other` when another resource or an API client holds the path.
   */
  /** `adoptVersion` (with owner): claim an ownerless path whose latest version is that one (upgrade adoption). */
  registerPlaybook(content: string, path?: string, owner?: ResourceOwner, adoptVersion?: number): Promise<RegisterPlaybookResponse> {
    return this.request('POST', '/api/catalog/playbook', {
      body: { content, ...(path !== undefined ? { path } : {}), ...(owner ? { owner } : {}), ...(adoptVersion !== undefined ? { adopt_version: adoptVersion } : {}) },
    });
  }

  /** GET /api/catalog/versions: latest version and owner of each known path (no content). */
  playbookVersions(paths: string[]): Promise<CatalogVersionsView> {
    return this.request('GET', '/api/catalog/versions', { query: { paths: paths.join(',') } });
  }

  /** GET /api/catalog/versions/{path}: the live versions of one path, newest first (404 unknown path). */
  playbookHistory(path: string): Promise<CatalogVersions> {
    return this.request('GET', `/api/catalog/versions/${encodeCatalogPath(path)}`);
  }

  /** GET /api/catalog/playbook/{path}; latest version unless `version` is given. */
  getPlaybook(path: string, version?: number): Promise<CatalogEntryView> {
    return this.request('GET', `/api/catalog/playbook/${encodeCatalogPath(path)}`, { query: { version } });
  }

  listPlaybooks(opts: { prefix?: string; limit?: number; offset?: number } = {}): Promise<PlaybookList> {
    return this.request('GET', '/api/catalog/playbooks', { query: opts });
  }

  /** `owner` (`Kind/namespace/name`): delete only when that resource owns the path (409 otherwise). */
  deletePlaybook(path: string, owner?: string): Promise<DeletePlaybookResponse> {
    return this.request('DELETE', `/api/catalog/playbook/${encodeCatalogPath(path)}`, { query: { owner } });
  }

  // ---- executions -------------------------------------------------------------------------

  /**
   * POST /api/run/playbook; `idempotency_key` travels as the Idempotency-Key header. `wait`
   * (seconds, at most 60): when the execution ends within it, the answer has its terminal status,
   * result and error.
   */
  run(req: RunRequest, opts: { wait?: number } = {}): Promise<RunResponse> {
    return this.request('POST', '/api/run/playbook', { ...runOptions(req), ...waitOptions(opts.wait, this.timeoutMs) });
  }

  /** POST /api/v2/execute (same behaviour as run; the v2 path workers and child playbooks use). */
  execute(req: RunRequest, opts: { wait?: number } = {}): Promise<RunResponse> {
    return this.request('POST', '/api/v2/execute', { ...runOptions(req), ...waitOptions(opts.wait, this.timeoutMs) });
  }

  /** `wait` (seconds, at most 60): a long poll answering once the execution has ended or the time is up. */
  getExecution(id: IdLike, opts: { wait?: number } = {}): Promise<ExecutionView> {
    return this.request('GET', `/api/execution/${idPath(id)}`, waitOptions(opts.wait, this.timeoutMs));
  }

  /**
   * Long-polls (GET ?wait=) until the execution is completed, failed or cancelled and returns
   * it; `onChange` sees each state that differs from the last. `waitSeconds`: the wait of each
   * request (default and at most 60; less shows progress sooner). ApiError `timeout` (status 0)
   * when it has not ended within `timeoutMs` (default: no limit). `retryMs`: how long a server
   * that cannot be reached (restarting; or a gateway's 502/503/504) is retried, with a backoff of
   * 250 ms doubling to 2 s, counted from the first of consecutive failures (default 0: not at all);
   * `onRetry` sees the failure that starts such a run.
   */
  async awaitExecution(id: IdLike, opts: {
    timeoutMs?: number; waitSeconds?: number; onChange?: (ex: ExecutionView) => void; retryMs?: number; onRetry?: (err: ApiError) => void;
  } = {}): Promise<ExecutionView> {
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    const each = Math.min(MAX_WAIT_SECONDS, Math.max(0.1, opts.waitSeconds ?? MAX_WAIT_SECONDS));
    const retryMs = opts.retryMs ?? 0;
    let last = '';
    let failingSince: number | undefined;
    let backoff = RETRY_FIRST_MS;
    for (;;) {
      const t0 = Date.now();
      let ex: ExecutionView;
      try {
        ex = await this.getExecution(id, { wait: Math.max(0, Math.min(each, (deadline - t0) / 1000)) });
      } catch (err) {
        if (!retryMs || !transient(err)) throw err;
        if (failingSince === undefined) {
          failingSince = t0;
          opts.onRetry?.(err);
        }
        const left = Math.min(retryMs - (Date.now() - failingSince), deadline - Date.now());
        if (left <= 0) throw err;
        await sleep(Math.min(backoff, left));
        backoff = Math.min(backoff * 2, RETRY_MAX_MS);
        continue;
      }
      failingSince = undefined;
      backoff = RETRY_FIRST_MS;
      if (ex.status !== last) opts.onChange?.(ex);
      last = ex.status;
      if (ex.status === 'completed' || ex.status === 'failed' || ex.status === 'cancelled') return ex;
      if (Date.now() >= deadline) throw new ApiError(0, 'timeout', `execution ${String(id)} still ${ex.status} after ${opts.timeoutMs} ms`);
      // a server without long polls (or one shutting down) answers at once: do not spin on it
      const early = Math.min(each * 1000, 1000) - (Date.now() - t0);
      if (early > 0) await sleep(Math.min(early, deadline - Date.now()));
    }
  }

  /**
   * GET /api/executions, newest first. `parent`: the children of one execution. `view: 'summary'`
   * leaves out each execution's payload, result and per-step summaries (a list page of large
   * executions is then kilobytes, not megabytes); GET /api/execution/{id} has them.
   */
  listExecutions(opts: ExecutionListOptions & { view: 'summary' }): Promise<ExecutionSummaryList>;
  listExecutions(opts?: ExecutionListOptions & { view?: 'full' }): Promise<ExecutionFullList>;
  listExecutions(opts?: ExecutionListOptions & { view?: 'full' | 'summary' }): Promise<ExecutionFullList | ExecutionSummaryList>;
  listExecutions(opts: ExecutionListOptions & { view?: 'full' | 'summary' } = {}): Promise<ExecutionFullList | ExecutionSummaryList> {
    const { parent, ...rest } = opts;
    return this.request('GET', '/api/executions', { query: { ...rest, parent: parent === undefined ? undefined : String(parent) } });
  }

  cancelExecution(id: IdLike): Promise<ExecutionView> {
    return this.request('POST', `/api/execution/${idPath(id)}/cancel`, { body: {} });
  }

  // ---- schedules --------------------------------------------------------------------------

  listSchedules(opts: { path?: string; source?: ScheduleSource } = {}): Promise<ScheduleList> {
    return this.request('GET', '/api/schedules', { query: opts });
  }

  getSchedule(name: string): Promise<ScheduleView> {
    return this.request('GET', `/api/schedules/${encodeURIComponent(name)}`);
  }

  /** PUT /api/schedules/{name}: create or replace (the server answers 201 or 200). */
  putSchedule(name: string, spec: ScheduleSpec): Promise<ScheduleView> {
    return this.request('PUT', `/api/schedules/${encodeURIComponent(name)}`, { body: spec });
  }

  deleteSchedule(name: string, source?: ScheduleSource): Promise<{ name: string; deleted: boolean }> {
    return this.request('DELETE', `/api/schedules/${encodeURIComponent(name)}`, { query: { source } });
  }

  scheduleTicks(name: string, limit?: number): Promise<ScheduleTicks> {
    return this.request('GET', `/api/schedules/${encodeURIComponent(name)}/ticks`, { query: { limit } });
  }

  /** POST /api/execution/{id}/retry: resume a failed or cancelled execution in place. */
  retryExecution(id: IdLike, req: RetryRequest = {}): Promise<ExecutionView> {
    return this.request('POST', `/api/execution/${idPath(id)}/retry`, { body: req });
  }

  /** POST /api/execution/{id}/rerun: a new execution of the same version (and payload unless given). */
  rerunExecution(id: IdLike, req: RerunRequest = {}): Promise<RunResponse> {
    return this.request('POST', `/api/execution/${idPath(id)}/rerun`, { body: req });
  }

  /**
   * Polls until the execution is completed, failed or cancelled and returns it. Throws an
   * ApiError `timeout` (status 0) when it has not ended within `timeoutMs` (default 60 s).
   */
  async waitForExecution(id: IdLike, opts: { timeoutMs?: number; intervalMs?: number } = {}): Promise<ExecutionView> {
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    const interval = opts.intervalMs ?? 500;
    for (;;) {
      const ex = await this.getExecution(id);
      if (ex.status === 'completed' || ex.status === 'failed' || ex.status === 'cancelled') return ex;
      if (Date.now() + interval > deadline) {
        throw new ApiError(0, 'timeout', `execution ${String(id)} still ${ex.status} after ${opts.timeoutMs ?? 60_000} ms`);
      }
      await new Promise((r) => setTimeout(r, interval));
    }
  }

  // ---- events -----------------------------------------------------------------------------

  /** Every event of an execution from `after` on, page by page (ordered by seq). */
  async *iterateEvents(id: IdLike, opts: { after?: number; pageSize?: number } = {}): AsyncGenerator<EventsPage['events'][number]> {
    let after = opts.after;
    for (;;) {
      const page = await this.getEvents(id, { after, limit: opts.pageSize ?? EVENTS_PAGE_LIMIT.default });
      yield* page.events;
      if (page.next_after === null || page.events.length === 0) return;
      after = page.next_after;
    }
  }

  /** GET /api/events/{id}; pass the answer's `next_after` as `after` to page on. */
  getEvents(id: IdLike, opts: { after?: number; limit?: number } = {}): Promise<EventsPage> {
    return this.request('GET', `/api/events/${idPath(id)}`, { query: opts });
  }

  /**
   * POST /api/v2/events with one event or a batch. `claimNext`: lease the commands the last event
   * issues to this worker and return them in `claimed` (eager dispatch; sent as a batch).
   * `independent`: each event is handled as if sent alone (claim_next applying to each); the
   * answer's `results` holds each one's outcome, refusals included.
   */
  sendEvents(events: WorkerEvent | WorkerEvent[], opts: { claimNext?: ClaimNextRequest; independent?: boolean } = {}): Promise<EventsAck> {
    const list = (Array.isArray(events) ? events : [events]).map(normaliseEvent);
    if (opts.claimNext || opts.independent) {
      return this.request('POST', '/api/v2/events', {
        body: { events: list, ...(opts.claimNext ? { claim_next: opts.claimNext } : {}), ...(opts.independent ? { independent: true } : {}) },
      });
    }
    return this.request('POST', '/api/v2/events', { body: list.length === 1 ? list[0] : { events: list } });
  }

  // ---- commands (worker) ------------------------------------------------------------------

  /** 409 already_claimed, 410 finished, 404 unknown, 425 not_due (as ApiError). */
  claim(queueId: IdLike, req: ClaimRequest): Promise<ClaimedCommand> {
    return this.request('POST', `/api/v2/commands/${idPath(queueId)}/claim`, { body: req });
  }

  heartbeat(queueId: IdLike, req: HeartbeatRequest): Promise<HeartbeatResponse> {
    return this.request('POST', `/api/v2/commands/${idPath(queueId)}/heartbeat`, { body: req });
  }

  /** End the lease of one command if this worker holds it (its claim went unanswered). */
  releaseLease(queueId: IdLike, req: ReleaseLeaseRequest): Promise<ReleaseLeasesResponse> {
    return this.request('POST', `/api/v2/commands/${idPath(queueId)}/release`, { body: req });
  }

  /** A worker starting: end the leases its id still holds from a previous process. */
  releaseLeases(workerId: string): Promise<ReleaseLeasesResponse> {
    return this.request('POST', `/api/v2/workers/${encodeURIComponent(workerId)}/release`);
  }

  /** Queue depth of every pool, or of one. */
  queueStats(pool?: string): Promise<QueueStats> {
    return this.request('GET', pool ? `/api/queue/stats?pool=${encodeURIComponent(pool)}` : '/api/queue/stats');
  }

  // ---- runtime ----------------------------------------------------------------------------

  registerRuntime(reg: RuntimeRegisterRequest): Promise<StatusOk> {
    return this.request('POST', '/api/runtime/register', { body: reg });
  }

  runtimeHeartbeat(kind: RuntimeRegisterRequest['kind'], name: string): Promise<StatusOk> {
    return this.request('POST', '/api/runtime/heartbeat', { body: { kind, name } });
  }

  listRuntime(): Promise<RuntimeList> {
    return this.request('GET', '/api/runtime');
  }

  // ---- database ---------------------------------------------------------------------------

  /** POST /api/postgres/execute against the server's database. */
  postgresExecute(query: string, schema?: string): Promise<PostgresExecuteResponse> {
    return this.request('POST', '/api/postgres/execute', { body: schema === undefined ? { query } : { query, schema } });
  }

  // ---- plumbing ---------------------------------------------------------------------------

  /** Low-level call for endpoints without a method here (e.g. those of other modules). */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const url = this.baseUrl + path + queryString(opts.query);
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const headers: Record<string, string> = { accept: 'application/json', ...this.headers, ...opts.headers };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = stringifyBody(opts.body);
    }

    let res: Response;
    try {
      res = await this.fetchImpl(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      throw networkError(err, method, url, timeoutMs);
    }

    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw networkError(err, method, url, timeoutMs);
    }

    const accepted = res.ok || (opts.acceptStatus?.includes(res.status) ?? false);
    if (accepted) {
      if (opts.text) return text as T;
      if (text === '') return undefined as T;
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new ApiError(res.status, 'invalid_response', `${method} ${path}: the server answered ${res.status} with a body that is not JSON`);
      }
    }
    throw errorFromResponse(res.status, text, method, path);
  }
}

/**
 * A request body as JSON, bigint values as strings. Without a replacer first: a replacer function
 * is called for every value (30 MB of small objects, a worker's call.done with a query-like result:
 * ~230–360 ms instead of ~130–210 ms, measured), and only a bigint needs it — JSON.stringify throws
 * a TypeError then, and the replacer runs. A RawJson in the body (a large tool result a worker
 * forwards) goes as its text (common/raw-json.ts).
 */
function stringifyBody(body: unknown): string {
  try {
    return stringifyJson(body);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    return stringifyJson(body, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  }
}

function errorFromResponse(status: number, text: string, method: string, path: string): ApiError {
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const err = (parsed as Partial<ErrorBody> | undefined)?.error;
  if (err && typeof err === 'object' && typeof err.code === 'string') {
    return new ApiError(status, err.code, err.message ?? `HTTP ${status}`, err.details);
  }
  // Not our error envelope (a proxy, an older server): keep what we can.
  const snippet = text.length > 200 ? `${text.slice(0, 200)}…` : text;
  return new ApiError(status, `http_${status}`, `${method} ${path}: HTTP ${status}${snippet ? `: ${snippet}` : ''}`);
}

function networkError(err: unknown, method: string, url: string, timeoutMs: number): ApiError {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return new ApiError(0, 'timeout', `${method} ${redactUrl(url)}: no answer within ${timeoutMs} ms`);
  }
  const reason = e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
  return new ApiError(0, 'unreachable', `cannot reach the Playflow server at ${new URL(url).origin} (${reason})`);
}

function queryString(query?: Query): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  }
  const s = params.toString();
  return s ? `?${s}` : '';
}

/** Catalog paths keep their slashes (the route is a wildcard); each segment is encoded. */
export function encodeCatalogPath(path: string): string {
  return path.replace(/^\/+/, '').split('/').map(encodeURIComponent).join('/');
}

function idPath(id: IdLike): string {
  const s = String(id);
  return encodeURIComponent(s);
}

function idString(id: IdLike | undefined): string | undefined {
  return id === undefined || id === null ? undefined : String(id);
}

function normaliseRunRequest(req: RunRequest): RunRequest {
  const out: RunRequest = { path: req.path };
  if (req.payload !== undefined) out.payload = req.payload;
  if (req.version !== undefined) out.version = req.version;
  const parent = idString(req.parent_execution_id);
  if (parent !== undefined) out.parent_execution_id = parent;
  const parentQueue = idString(req.parent_queue_id);
  if (parentQueue !== undefined) out.parent_queue_id = parentQueue;
  if (req.worker_id !== undefined) out.worker_id = req.worker_id;
  if (req.lease_token !== undefined) out.lease_token = req.lease_token;
  return out;
}

function runOptions(req: RunRequest): RequestOptions {
  const { idempotency_key: key, ...rest } = req;
  return { body: normaliseRunRequest(rest), ...(key ? { headers: { 'idempotency-key': key } } : {}) };
}

function normaliseEvent(ev: WorkerEvent): WorkerEvent {
  const out: WorkerEvent = { ...ev, execution_id: String(ev.execution_id) };
  if (ev.queue_id !== undefined && ev.queue_id !== null) out.queue_id = String(ev.queue_id);
  return out;
}
