/**
 * The one typed HTTP client of the Playflow server API (used by the CLI, the worker and the
 * operator). Every method maps to one endpoint; shapes are those of client/protocol.ts.
 *
 * Errors: every non-2xx answer becomes an `ApiError` carrying the HTTP status and the server's
 * `{error: {code, message, details}}`. A server that cannot be reached (connection refused, DNS,
 * timeout) becomes an `ApiError` with status 0 and code `unreachable` (or `timeout`), so callers
 * handle one error type.
 *
 * IDs are accepted as string, number or bigint and always sent as decimal strings.
 */
import type {
  CatalogEntryView, ClaimNextRequest, ClaimRequest, ClaimedCommand, DeletePlaybookResponse, ErrorBody, EventsAck, EventsPage,
  ExecutionList, ExecutionStatusName, ExecutionView, HealthResponse, HeartbeatRequest, HeartbeatResponse,
  PlaybookList, PostgresExecuteResponse, QueueStats, RegisterPlaybookResponse, RunRequest, RunResponse,
  RuntimeList, RuntimeRegisterRequest, StatusOk, WorkerEvent,
} from './protocol.js';

export type IdLike = string | number | bigint;

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

type Query = Record<string, string | number | boolean | undefined | null>;

interface RequestOptions {
  query?: Query;
  body?: unknown;
  /** Accept these non-2xx statuses as answers instead of throwing (e.g. 503 from /health). */
  acceptStatus?: number[];
  /** Read the body as text instead of JSON. */
  text?: boolean;
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

  /** POST /api/catalog/playbook. 422 `playbook_invalid` lists every problem in `details`. */
  registerPlaybook(content: string, path?: string): Promise<RegisterPlaybookResponse> {
    return this.request('POST', '/api/catalog/playbook', { body: path === undefined ? { content } : { content, path } });
  }

  /** GET /api/catalog/playbook/{path}; latest version unless `version` is given. */
  getPlaybook(path: string, version?: number): Promise<CatalogEntryView> {
    return this.request('GET', `/api/catalog/playbook/${encodeCatalogPath(path)}`, { query: { version } });
  }

  listPlaybooks(opts: { prefix?: string; limit?: number; offset?: number } = {}): Promise<PlaybookList> {
    return this.request('GET', '/api/catalog/playbooks', { query: opts });
  }

  deletePlaybook(path: string): Promise<DeletePlaybookResponse> {
    return this.request('DELETE', `/api/catalog/playbook/${encodeCatalogPath(path)}`);
  }

  // ---- executions -------------------------------------------------------------------------

  /** POST /api/run/playbook. */
  run(req: RunRequest): Promise<RunResponse> {
    return this.request('POST', '/api/run/playbook', { body: normaliseRunRequest(req) });
  }

  /** POST /api/v2/execute (same behaviour as run; the v2 path workers and child playbooks use). */
  execute(req: RunRequest): Promise<RunResponse> {
    return this.request('POST', '/api/v2/execute', { body: normaliseRunRequest(req) });
  }

  getExecution(id: IdLike): Promise<ExecutionView> {
    return this.request('GET', `/api/execution/${idPath(id)}`);
  }

  listExecutions(
    opts: { status?: ExecutionStatusName; path?: string; limit?: number; offset?: number } = {},
  ): Promise<ExecutionList> {
    return this.request('GET', '/api/executions', { query: opts });
  }

  cancelExecution(id: IdLike): Promise<ExecutionView> {
    return this.request('POST', `/api/execution/${idPath(id)}/cancel`, { body: {} });
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
      const page = await this.getEvents(id, { after, limit: opts.pageSize ?? 500 });
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
   */
  sendEvents(events: WorkerEvent | WorkerEvent[], opts: { claimNext?: ClaimNextRequest } = {}): Promise<EventsAck> {
    const list = (Array.isArray(events) ? events : [events]).map(normaliseEvent);
    if (opts.claimNext) return this.request('POST', '/api/v2/events', { body: { events: list, claim_next: opts.claimNext } });
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

  queueStats(): Promise<QueueStats> {
    return this.request('GET', '/api/queue/stats');
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
    const headers: Record<string, string> = { accept: 'application/json', ...this.headers };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.body, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    }

    let res: Response;
    try {
      res = await this.fetchImpl(url, { method, headers, body, signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (err) {
      throw networkError(err, method, url, this.timeoutMs);
    }

    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw networkError(err, method, url, this.timeoutMs);
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
    return new ApiError(0, 'timeout', `${method} ${url}: no answer within ${timeoutMs} ms`);
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
  return out;
}

function normaliseEvent(ev: WorkerEvent): WorkerEvent {
  const out: WorkerEvent = { ...ev, execution_id: String(ev.execution_id) };
  if (ev.queue_id !== undefined && ev.queue_id !== null) out.queue_id = String(ev.queue_id);
  return out;
}
