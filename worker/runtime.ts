/**
 * The worker runtime (DESIGN.md §1, §3; spec "Command notifications on the broker").
 *
 * Per notification `{execution_id, queue_id, step, server_url}` pulled from the durable consumer:
 *   1. claim the command through the server (`POST /api/v2/commands/{queue_id}/claim`): the server
 *      is the only writer of the queue, so a duplicate notification can never run a command twice —
 *      409 (someone holds it) and 410 (it is finished) are acked and dropped, as are 404 and 425
 *      (the server republishes a delayed command when it is due). A claim that got no answer, or a
 *      409 naming this worker while no slot here claims or runs the command, may mean a lease this
 *      worker holds without knowing: worker/orphan-leases.ts asks the server to end it;
 *   2. run the tool (worker/tools), calling `msg.working()` and the lease heartbeat every
 *      `heartbeatSeconds` while it runs (a lost lease — heartbeat 409/410 — aborts the call and
 *      reports nothing: someone else owns the command now, or the execution ended);
 *   3. report one `call.done` event `{response | error, meta: {duration_ms, attempt, iteration,
 *      worker_id, log?}}` and ack. A tool failure is a call.done with `error` plus an ack: the
 *      engine decides about retries (case / retry rules), the broker does not.
 *   A worker-side fault — the server unreachable or answering 5xx on claim or report, a
 *   WorkerFault from auth resolution — naks the message (with backoff) so the broker redelivers it
 *   (at most maxDeliver = 3 deliveries in total).
 *
 * `playbook` tools are not run here: the worker asks the server to start the child execution
 * (`client.run({path, payload, parent_execution_id, parent_queue_id})`) and acks without a
 * call.done — the server completes the parent step when the child ends.
 *
 * Shutdown (`stop()`, SIGTERM in main.ts): stop fetching, let calls in flight finish within
 * `graceSeconds`, then abort the rest and nak their messages (no call.done for them).
 * The runtime never touches the database, and never logs tool configs or resolved auth data.
 */
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { ApiError, type PlayflowClient } from '../client/http.js';
import type { ClaimedCommand, ClaimNextRequest, CommandNotification, WorkerEvent } from '../common/protocol.js';
import { MAX_EVENTS_PER_REQUEST } from '../common/contract/limits.js';
import { SecretsClient, type CredentialLease } from '../client/secrets.js';
import { createAuthResolver, leaseOf } from './auth.js';
import { redactUrlsIn } from '../common/redact-url.js';
import { RawJson, stringifyJson } from '../common/raw-json.js';
import { createKeychainPreparer } from './keychain.js';
import { SecretMask } from './secret-mask.js';
import { createSecretTool } from './tools/secret.js';
import { DEFAULT_POOL, type Json, type JsonObject, type Tool } from '../playbook/types.js';
import type { Broker, BrokerMessage, ConsumerHandle } from '../common/broker/types.js';
import { createWorkerMetrics, startSideServer, type SideServer, type WorkerMetrics } from './metrics.js';
import { fail, runTool, ToolConfigError, WorkerFault, type ResolveAuth, type ToolContext, type ToolRunner, type ToolOutcome } from './tools/index.js';
import { closePostgresPools } from './tools/postgres.js';
import { closePythonPool, configurePython, pythonPool } from './tools/python.js';
import { configureFile } from './tools/file.js';
import { configureHttp } from './tools/http.js';
import { isObject } from './tools/json.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { ReportBatcher } from './report-batcher.js';
import { LeaseKeeper } from './lease-keeper.js';
import { OrphanLeases } from './orphan-leases.js';

/** The part of PlayflowClient the runtime uses (tests may pass anything with these methods). */
export type WorkerClient = Pick<PlayflowClient, 'claim' | 'heartbeat' | 'sendEvents' | 'run'> &
  Partial<Pick<PlayflowClient, 'registerRuntime' | 'runtimeHeartbeat' | 'request' | 'releaseLeases' | 'releaseLease'>>;


export interface WorkerRuntimeOptions {
  broker: Broker;
  client: WorkerClient;
  workerId?: string;
  /** Commands handled at once. Default 8. */
  concurrency?: number;
  /** Lease asked for on claim and heartbeat. Default 20 s: a dead worker's command is reclaimed within about that. */
  leaseSeconds?: number;
  /** Interval of `msg.working()` + lease heartbeat while a call runs (and while its result waits to be reported). Default 5 s. */
  heartbeatSeconds?: number;
  /** Shutdown grace for calls in flight. Default 30 s. */
  graceSeconds?: number;
  /** Runtime registration heartbeat interval. Default 15 s. */
  runtimeHeartbeatSeconds?: number;
  /** Side port for /healthz and /metrics; undefined = no side server (0 = random port). */
  metricsPort?: number;
  metricsHost?: string;
  /** Python pool: size and recycling; `false` = do not pre-spawn. */
  python?: { size?: number; maxCallsPerProcess?: number; user?: { uid: number; gid: number } | null } | false;
  /** The server's URL: the http tool refuses it as a target (with link-local / metadata addresses) unless in httpAllow. */
  serverUrl?: string;
  httpAllow?: string[];
  /** Largest python answer and http response body (WORKER_MAX_RESULT_BYTES); beyond it the call fails `too_large`. Default 64 MiB. */
  maxResultBytes?: number;
  fileRoot?: string;
  /** Builds the auth resolver for one command. Default: worker/auth.ts through the client (GET /api/credential/{name}). */
  resolveAuthFor?: (cmd: ClaimedCommand) => ResolveAuth;
  /** Finishes a tool config before it runs (secret references such as `{{ keychain.x.y }}`).
   *  Default: the keychain module (worker/keychain.ts) through the client; `null` = leave as is.
   *  The secret values it renders go into `secrets`, masked in what is reported of the call. */
  prepareTool?: ((cmd: ClaimedCommand, tool: Tool, secrets?: SecretMask) => Promise<Tool>) | null;
  logger?: Logger;
  metrics?: WorkerMetrics;
  /** Largest `meta.log` sent with call.done (characters). Default 65536. */
  maxLogChars?: number;
  /**
   * Eager dispatch (default true): call.done asks for the next command it issues (claim_next) and
   * the worker runs it in the slot it just freed, with no notification and no claim round trip.
   */
  eagerDispatch?: boolean;
}

interface InFlight {
  /** The notification; for an eagerly dispatched command a stand-in whose settling does nothing. */
  msg: BrokerMessage;
  cmd?: ClaimedCommand;
  ac: AbortController;
  /** Why the call was aborted, when it was. */
  reason?: 'shutdown' | 'lease_lost';
  /** The secret values the command's tool was given, masked in its report and log lines. */
  secrets: SecretMask;
}

const NAK_BASE_MS = 1000;
const NAK_MAX_MS = 10_000;
const SHUTDOWN_NAK_DELAY_MS = 2000;
/** A notification this worker cannot claim because its server is unreachable: left to other workers for this long. */
const UNREACHABLE_NAK_DELAY_MS = 5000;
/**
 * Report requests out at once; the call.done reports that come meanwhile wait and go together in
 * the next (worker/report-batcher.ts).
 */
const REPORTS_IN_FLIGHT = 2;
/** Reporting a finished call: retry backoff from 0.25 s, doubling, at most this. */
const REPORT_RETRY_MAX_MS = 2000;
/** Probing an unreachable server: backoff from 0.5 s, doubling, at most this. */
const PROBE_MAX_MS = 5000;

/**
 * The stand-in message of a command received with a call.done answer (eager dispatch): there is no
 * broker message to ack or nak. Should such a command fail on the worker's side, its lease lapses
 * and the server queues and publishes it again, as after a crash.
 */
function eagerMessage(cmd: ClaimedCommand): BrokerMessage {
  const msg: BrokerMessage = {
    data: { execution_id: String(cmd.execution_id), queue_id: String(cmd.queue_id), step: cmd.step, server_url: '' },
    info: { deliveryCount: 1, redeliveryCount: 0, redelivered: false },
    ack() {},
    nak() {},
    working() {},
    term() {},
  };
  standIns.add(msg);
  return msg;
}
const standIns = new WeakSet<BrokerMessage>();

/**
 * Auth resolution for one command: the credentials module's resolver (worker/auth.ts, GET
 * /api/credential/{name}, cached for the command) behind a guard that turns a server fault
 * (unreachable, 5xx) into a WorkerFault — the message is redelivered — and a 404 into a plain
 * "not found" error (the call fails).
 */
export function serverResolveAuth(client: WorkerClient, lease?: CredentialLease): ResolveAuth {
  if (!client.request) return async () => { throw new Error('this worker has no credential access'); };
  return guardResolveAuth(createAuthResolver(new SecretsClient(client as Required<Pick<PlayflowClient, 'request'>>), lease));
}

/** Answers of the credential read path that fail the call (a redelivery would be refused the same way). */
const CREDENTIAL_REFUSALS = new Set(['credential_not_allowed', 'credential_scoped', 'not_lease_holder']);

/** A resolver made on its first use: most commands (python, plain http) resolve no credential. */
function lazyAuth(make: () => ResolveAuth): ResolveAuth {
  let made: ResolveAuth | undefined;
  return (auth: Json) => (made ??= make())(auth);
}

/** The resolver, with every credential it resolves added to the command's secrets. */
function maskingAuth(inner: ResolveAuth, secrets: SecretMask): ResolveAuth {
  return async (auth: Json) => {
    const resolved = await inner(auth);
    secrets.add(resolved);
    return resolved;
  };
}

export function guardResolveAuth(inner: ResolveAuth): ResolveAuth {
  return async (auth: Json) => {
    try {
      return await inner(auth);
    } catch (err) {
      const name = typeof auth === 'string' ? auth : isObject(auth) ? String(auth.credential ?? auth.key ?? auth.name ?? '') : '';
      // Refused by the credential's scope or for the lease: the server's message names the credential and the playbook.
      if (err instanceof ApiError && CREDENTIAL_REFUSALS.has(err.code)) throw new Error(err.message, { cause: err });
      if (err instanceof ApiError && isTransient(err)) throw new WorkerFault(`cannot read credential '${name}': ${err.message}`, { cause: err });
      if (err instanceof ApiError && err.status === 404) throw new Error(`credential '${name}' not found`, { cause: err });
      throw err;
    }
  };
}

/** A 409 `already_claimed` whose holder is this worker id (claimed.ts puts the holder in its details). */
function heldBy(err: unknown, workerId: string): boolean {
  return err instanceof ApiError && err.code === 'already_claimed' && isObject(err.details) && err.details.worker_id === workerId;
}

function isTransient(err: unknown): boolean {
  return !(err instanceof ApiError) || err.status === 0 || err.status >= 500 || err.status === 401 || err.status === 403 || err.status === 429;
}

export class WorkerRuntime {
  readonly workerId: string;
  readonly metrics: WorkerMetrics;
  private readonly o: WorkerRuntimeOptions;
  private readonly log: Logger;
  private readonly concurrency: number;
  private readonly leaseSeconds: number;
  private readonly heartbeatMs: number;
  private readonly graceMs: number;
  private readonly eagerDispatch: boolean;
  private readonly reports: ReportBatcher;
  /** The leases of the commands in flight (`msg.working()` and the lease heartbeat every `heartbeatMs`). */
  private readonly leases: LeaseKeeper<InFlight>;
  private consumer: ConsumerHandle | null = null;
  private side: SideServer | null = null;
  private runtimeTimer: NodeJS.Timeout | null = null;
  private inFlight = new Set<InFlight>();
  /** Claims under way, by queue id (a duplicate notification may claim the same one twice). */
  private readonly claiming = new Map<string, number>();
  /** Leases this worker may hold without knowing it (a claim went unanswered); null when the client cannot end one. */
  private readonly orphans: OrphanLeases | null;
  /** Set while the server is unreachable: no pulls until a probe answers (see awaitServer). */
  private serverDown: { promise: Promise<void>; open: () => void } | null = null;
  private started = false;
  private stopping: Promise<void> | null = null;
  private readonly prepareTool?: (cmd: ClaimedCommand, tool: Tool, secrets?: SecretMask) => Promise<Tool>;
  /** Tools bound to this worker's client (the `secret` tool writes the keychain through it). */
  private readonly runners: Record<string, ToolRunner> = {};

  constructor(opts: WorkerRuntimeOptions) {
    this.o = opts;
    // Keychain references: the option, else the keychain module through the server (when the client can reach it).
    this.prepareTool = opts.prepareTool === null
      ? undefined
      : opts.prepareTool ?? (opts.client.request
        ? createKeychainPreparer({
          client: new SecretsClient(opts.client as Required<Pick<PlayflowClient, 'request'>>),
          logger: opts.logger ?? silentLogger,
        })
        : undefined);
    if (opts.client.request) this.runners.secret = createSecretTool({ client: new SecretsClient(opts.client as Required<Pick<PlayflowClient, 'request'>>) });
    this.workerId = opts.workerId ?? `${hostname()}-${process.pid}`;
    this.metrics = opts.metrics ?? createWorkerMetrics();
    this.log = opts.logger ?? silentLogger;
    this.concurrency = Math.max(1, opts.concurrency ?? 8);
    this.leaseSeconds = opts.leaseSeconds ?? 20;
    // at least three heartbeats per lease, so one lost request does not lose the lease
    this.heartbeatMs = Math.min((opts.heartbeatSeconds ?? 5) * 1000, (this.leaseSeconds * 1000) / 3);
    this.graceMs = (opts.graceSeconds ?? 30) * 1000;
    this.eagerDispatch = opts.eagerDispatch ?? true;
    this.leases = new LeaseKeeper(this.heartbeatMs, (f) => {
      if (f.cmd) void this.beat(f, f.cmd);
    });
    const client = opts.client;
    this.orphans = client.releaseLease
      ? new OrphanLeases({
        release: async (queueId) => (await client.releaseLease!(queueId, { worker_id: this.workerId })).released,
        busy: (queueId) => this.claiming.has(queueId) || [...this.inFlight].some((f) => f.cmd?.queue_id === queueId),
        transient: isTransient,
        maxAgeMs: this.leaseSeconds * 1000,
        log: this.log,
        onOutcome: (outcome) => this.metrics.leaseReleases.inc({ outcome }),
      })
      : null;
    this.reports = new ReportBatcher(opts.client, {
      maxInFlight: REPORTS_IN_FLIGHT,
      maxBatch: Math.min(this.concurrency, MAX_EVENTS_PER_REQUEST),
      // a result a tool handed over as JSON text is large (RAW_RESULT_MIN_CHARS and up)
      alone: (e) => e.payload?.response instanceof RawJson,
      onRequest: (n) => {
        this.metrics.reportRequests.inc({ reports: n === 1 ? 'one' : 'several' });
        this.metrics.reports.inc(n);
      },
    });
  }

  get metricsPort(): number | undefined {
    return this.side?.port;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.o.fileRoot !== undefined) configureFile({ root: this.o.fileRoot });
    configureHttp({ maxResponseBytes: this.o.maxResultBytes, serverUrl: this.o.serverUrl ?? null, allow: this.o.httpAllow ?? [] });
    if (this.o.python !== false) {
      configurePython({
        size: this.o.python?.size ?? Math.min(this.concurrency, 4), maxCallsPerProcess: this.o.python?.maxCallsPerProcess,
        user: this.o.python?.user ?? null, maxResultBytes: this.o.maxResultBytes,
      });
      await pythonPool().start().catch((err: Error) => this.log.warn({ err: err.message }, 'python interpreters could not start; python tools will fail'));
    }
    if (this.o.metricsPort !== undefined) {
      this.side = await startSideServer(this.o.metricsPort, this.metrics.registry, () => this.health(), this.o.metricsHost);
    }
    await this.o.broker.ensure();
    await this.registerRuntime();
    await this.releasePreviousLeases();
    this.consumer = this.o.broker.consume((msg) => this.handle(msg), {
      concurrency: this.concurrency,
      ready: () => this.serverDown?.promise ?? Promise.resolve(),
      onError: (err) => this.log.error({ err: (err as Error)?.message }, 'notification handler failed; message nak\'ed'),
    });
    this.log.info({ worker_id: this.workerId, concurrency: this.concurrency, broker: this.o.broker.kind, metrics_port: this.side?.port }, 'worker started');
  }

  health(): { ok: boolean; body: object } {
    const ok = this.started && !this.stopping;
    return {
      ok,
      body: {
        status: ok ? 'ok' : this.stopping ? 'stopping' : 'starting',
        worker_id: this.workerId,
        in_flight: this.inFlight.size,
        concurrency: this.concurrency,
      },
    };
  }

  private async registerRuntime(): Promise<void> {
    const c = this.o.client;
    if (!c.registerRuntime) return;
    const info: JsonObject = { hostname: hostname(), pid: process.pid, concurrency: this.concurrency, broker: this.o.broker.kind, pool: this.o.broker.settings.pool ?? DEFAULT_POOL };
    let registered = false;
    const register = async () => {
      try {
        await c.registerRuntime!({ kind: 'worker', name: this.workerId, info });
        registered = true;
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'runtime registration failed; retrying with the heartbeat');
      }
    };
    await register();
    const every = (this.o.runtimeHeartbeatSeconds ?? 15) * 1000;
    this.runtimeTimer = setInterval(() => {
      if (!registered || !c.runtimeHeartbeat) {
        if (!registered) void register();
        return;
      }
      c.runtimeHeartbeat('worker', this.workerId).catch((err: unknown) => {
        // An unknown registration (server restarted on a fresh database…): register again.
        if (err instanceof ApiError && err.status === 404) {
          registered = false;
          void register();
        } else this.log.debug({ err: (err as Error).message }, 'runtime heartbeat failed');
      });
    }, every);
    this.runtimeTimer.unref();
  }

  /**
   * Whatever a previous process with this worker id held will never be reported: the server
   * queues those commands again now instead of when their leases run out.
   */
  private async releasePreviousLeases(): Promise<void> {
    if (!this.o.client.releaseLeases) return;
    try {
      const r = await this.o.client.releaseLeases(this.workerId);
      if (r?.released) this.log.warn({ worker_id: this.workerId, released: r.released }, 'leases of a previous process with this worker id released');
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'could not release the leases of a previous process with this worker id; they run out by themselves');
    }
  }

  /**
   * The server did not answer: stop pulling notifications (the consumer awaits the gate before
   * each pull) until a probe gets through, so this worker does not spend the broker's few
   * deliveries of commands that healthy workers could run.
   */
  private markServerDown(): void {
    if (this.serverDown || this.stopping) return;
    let open!: () => void;
    const promise = new Promise<void>((r) => { open = r; });
    this.serverDown = { promise, open };
    this.metrics.serverDown.set(1);
    this.log.warn({}, 'server unreachable: not taking notifications until it answers');
    void (async () => {
      for (let wait = 500; !this.stopping; wait = Math.min(PROBE_MAX_MS, wait * 2)) {
        await new Promise((r) => setTimeout(r, wait).unref());
        if (this.stopping || await this.probe()) break;
      }
      this.serverDown = null;
      this.metrics.serverDown.set(0);
      if (!this.stopping) this.log.info({}, 'server reachable again: taking notifications');
      open();
    })();
  }

  private async probe(): Promise<boolean> {
    const c = this.o.client;
    try {
      if (c.request) await c.request('GET', '/healthz');
      else if (c.runtimeHeartbeat) await c.runtimeHeartbeat('worker', this.workerId);
      return true;
    } catch (err) {
      return err instanceof ApiError && !isTransient(err);
    }
  }

  /** Stops fetching, waits for calls in flight up to the grace period, then aborts and naks the rest. */
  stop(): Promise<void> {
    if (this.stopping) return this.stopping;
    this.stopping = (async () => {
      this.log.info({ in_flight: this.inFlight.size, grace_ms: this.graceMs }, 'worker stopping');
      if (this.runtimeTimer) clearInterval(this.runtimeTimer);
      this.orphans?.stop();
      this.serverDown?.open();
      const abortAll = () => {
        for (const f of this.inFlight) {
          f.reason ??= 'shutdown';
          f.ac.abort(new Error('worker shutting down'));
        }
      };
      const grace = setTimeout(abortAll, this.graceMs);
      const stopped = this.consumer?.stop() ?? Promise.resolve();
      // A tool that ignores its abort signal must not hold the process: nak after a short extra wait.
      let hard: NodeJS.Timeout | undefined;
      await Promise.race([stopped, new Promise<void>((r) => { hard = setTimeout(r, this.graceMs + 5000); })]);
      clearTimeout(grace);
      if (hard) clearTimeout(hard);
      for (const f of this.inFlight) this.settle(f.msg, 'nak', SHUTDOWN_NAK_DELAY_MS);
      this.leases.close();
      await Promise.allSettled([closePythonPool(), closePostgresPools()]);
      await this.side?.close();
      this.log.info({}, 'worker stopped');
    })();
    return this.stopping;
  }

  private settle(msg: BrokerMessage, how: 'ack' | 'nak' | 'term', delayMs?: number): void {
    if (standIns.has(msg)) return;
    this.metrics.messages.inc({ result: how });
    if (how === 'ack') msg.ack();
    else if (how === 'term') msg.term();
    else msg.nak(delayMs);
  }

  private nakDelay(msg: BrokerMessage): number {
    return Math.min(NAK_MAX_MS, NAK_BASE_MS * 2 ** Math.max(0, msg.info.deliveryCount - 1));
  }

  /** Handles one notification; settles the message itself. Exposed for tests. */
  async handle(msg: BrokerMessage): Promise<void> {
    const n = msg.data as Partial<CommandNotification> | undefined;
    if (!n || (typeof n.queue_id !== 'string' && typeof n.queue_id !== 'number')) {
      this.log.error({ data: n ? Object.keys(n) : null }, 'malformed notification dropped');
      this.settle(msg, 'term');
      return;
    }
    const f: InFlight = { msg, ac: new AbortController(), secrets: new SecretMask() };
    this.inFlight.add(f);
    this.metrics.inFlight.set(this.inFlight.size);
    try {
      await this.process(f, n as CommandNotification);
    } finally {
      this.leases.release(f);
      this.inFlight.delete(f);
      this.metrics.inFlight.set(this.inFlight.size);
    }
  }

  private async process(f: InFlight, n: CommandNotification): Promise<void> {
    const { msg } = f;
    const where = { execution_id: n.execution_id, queue_id: n.queue_id, step: n.step, delivery: msg.info.deliveryCount };
    let cmd: ClaimedCommand;
    const queueId = String(n.queue_id);
    this.orphans?.forget(queueId);
    this.claiming.set(queueId, (this.claiming.get(queueId) ?? 0) + 1);
    try {
      cmd = await this.o.client.claim(n.queue_id, { worker_id: this.workerId, lease_seconds: this.leaseSeconds });
    } catch (err) {
      const status = err instanceof ApiError ? err.status : -1;
      const result = status === 409 ? 'already_claimed' : status === 410 ? 'finished' : status === 404 ? 'not_found' : status === 425 ? 'not_due' : isTransient(err) ? 'unreachable' : 'error';
      this.metrics.claims.inc({ result });
      // no answer: the server may have leased it to us all the same. 409 naming this worker while no
      // slot here claims or runs it: an earlier claim's answer was lost. Either way, end that lease.
      if (result === 'unreachable' || (result === 'already_claimed' && heldBy(err, this.workerId))) this.orphans?.add(queueId);
      if (result === 'unreachable') {
        this.log.warn({ ...where, err: (err as Error).message }, 'claim failed (server-side fault); nak for redelivery');
        if (!(err instanceof ApiError) || err.status === 0) this.markServerDown();
        this.settle(msg, 'nak', Math.max(UNREACHABLE_NAK_DELAY_MS, this.nakDelay(msg)));
      } else {
        // 409/410: a duplicate or stale notification — never run twice. 404/425/other 4xx: nothing to run now.
        (result === 'error' ? this.log.error : this.log.debug).call(this.log, { ...where, status, err: (err as Error).message }, `claim answered ${result}; ack`);
        this.settle(msg, 'ack');
      }
      return;
    } finally {
      const left = (this.claiming.get(queueId) ?? 1) - 1;
      if (left > 0) this.claiming.set(queueId, left);
      else this.claiming.delete(queueId);
    }
    this.metrics.claims.inc({ result: 'claimed' });
    // Each command the server hands back with a call.done runs in this same slot.
    for (let next: ClaimedCommand | undefined = cmd; next;) {
      next = await this.execute(f, next);
      if (next) {
        this.metrics.claims.inc({ result: 'eager' });
        f.msg = eagerMessage(next);
        f.ac = new AbortController();
        f.reason = undefined;
      }
    }
  }

  /** Runs a claimed command and reports it; returns the next command when the server handed one over. */
  private async execute(f: InFlight, cmd: ClaimedCommand): Promise<ClaimedCommand | undefined> {
    const { msg } = f;
    const where = { execution_id: cmd.execution_id, queue_id: cmd.queue_id, step: cmd.step, delivery: msg.info.deliveryCount };
    f.cmd = cmd;
    const secrets = new SecretMask();
    f.secrets = secrets;
    if (cmd.tool?.kind === 'playbook') {
      // the child holds the command once started: no lease of this worker's to keep
      this.leases.release(f);
      return this.startChild(f, cmd);
    }

    // kept from here until the result is reported (report) or the slot lets the command go
    this.leases.hold(f);
    const started = performance.now();
    let outcome: ToolOutcome;
    try {
      outcome = await this.runCommand(cmd, f.ac.signal, secrets);
    } catch (err) {
      // WorkerFault (or an unexpected throw outside the tool): redeliver.
      this.log.warn({ ...where, err: secrets.text(String((err as Error)?.message ?? err)) }, 'worker-side fault while running the command; nak for redelivery');
      this.settle(msg, 'nak', this.nakDelay(msg));
      return undefined;
    }
    const durationMs = Math.round(performance.now() - started);
    const kind = cmd.tool.kind;
    if (f.reason === 'lease_lost') {
      this.log.warn({ ...where, kind }, 'lease lost while the call ran; result dropped');
      this.settle(msg, 'ack');
      return undefined;
    }
    if (f.reason === 'shutdown') {
      // Delayed past the consume loop's last pull, so another worker (not this stopping one) gets it.
      this.log.warn({ ...where, kind }, 'call aborted by shutdown; nak for redelivery');
      this.settle(msg, 'nak', SHUTDOWN_NAK_DELAY_MS);
      return undefined;
    }
    this.metrics.calls.inc({ kind, outcome: outcome.error ? 'error' : 'ok' });
    this.metrics.callDuration.observe({ kind }, durationMs / 1000);
    return this.report(f, cmd, outcome, durationMs);
  }

  /**
   * Secret references first (keychain), then the tool. A keychain failure (KeychainError, or any
   * other refusal) is the call's error outcome; a server fault (unreachable, 5xx) is a WorkerFault.
   */
  private async prepare(cmd: ClaimedCommand, tool: Tool, secrets: SecretMask): Promise<Tool | ToolOutcome> {
    if (!this.prepareTool) return tool;
    try {
      return await this.prepareTool(cmd, tool, secrets);
    } catch (err) {
      if (err instanceof WorkerFault) throw err;
      if (err instanceof ApiError && isTransient(err)) throw new WorkerFault(`secret resolution failed: ${err.message}`, { cause: err });
      const code = typeof (err as { code?: unknown }).code === 'string' ? (err as { code: string }).code : 'bad_config';
      return fail((err as Error)?.message ?? String(err), { code });
    }
  }

  private async runCommand(cmd: ClaimedCommand, signal: AbortSignal, secrets: SecretMask): Promise<ToolOutcome> {
    const prepared = await this.prepare(cmd, cmd.tool, secrets);
    if (!('kind' in prepared)) return prepared;
    const tool = prepared as Tool;
    const ctx: ToolContext = {
      args: cmd.args ?? {},
      execution_id: String(cmd.execution_id),
      step: cmd.step,
      resolveAuth: maskingAuth(lazyAuth(() => (this.o.resolveAuthFor ? guardResolveAuth(this.o.resolveAuthFor(cmd)) : serverResolveAuth(this.o.client, leaseOf(cmd)))), secrets),
      workbook: cmd.workbook,
      template: {
        ...(cmd.context ?? {}),
        execution_id: cmd.execution_id,
        catalog_id: cmd.catalog_id,
        root_execution_id: cmd.root_execution_id,
        parent_execution_id: cmd.parent_execution_id,
      } as unknown as JsonObject,
      runners: this.runners,
      signal,
      logger: this.toolLogger(cmd, secrets),
      prepareTool: this.prepareTool
        ? async (t) => {
          const p = await this.prepare(cmd, t, secrets);
          if (!('kind' in p)) throw new ToolConfigError((p as { error: { message: string } }).error.message);
          return p as Tool;
        }
        : undefined,
    };
    return runTool(tool, ctx);
  }

  private toolLogger(cmd: ClaimedCommand, secrets: SecretMask): Logger {
    const base = { execution_id: cmd.execution_id, step: cmd.step, queue_id: cmd.queue_id };
    const line = (x: object, m?: string): [object, string | undefined] =>
      [{ ...base, ...secrets.deep(x) }, m === undefined ? m : secrets.text(m)];
    return {
      debug: (x, m) => this.log.debug(...line(x, m)),
      info: (x, m) => this.log.info(...line(x, m)),
      warn: (x, m) => this.log.warn(...line(x, m)),
      error: (x, m) => this.log.error(...line(x, m)),
    };
  }

  private async beat(f: InFlight, cmd: ClaimedCommand): Promise<void> {
    f.msg.working();
    try {
      await this.o.client.heartbeat(cmd.queue_id, { worker_id: this.workerId, lease_token: cmd.lease_token, lease_seconds: this.leaseSeconds });
      if (f.cmd === cmd) this.leases.beaten(f);
    } catch (err) {
      const lost = err instanceof ApiError && (err.status === 409 || err.status === 410);
      if (!lost) {
        if (!(err instanceof ApiError) || err.status === 0) this.markServerDown();
        this.log.debug({ queue_id: cmd.queue_id, err: (err as Error).message }, 'lease heartbeat failed; will retry');
      }
      // An answer about a command this slot has finished with (its call.done went through while
      // the beat was out, and the server handed over the next) says nothing about the command it
      // runs now: aborting that one dropped its result, and the command ran again once its lease
      // ran out.
      if (f.cmd !== cmd) return;
      if (lost) {
        f.reason ??= 'lease_lost';
        f.ac.abort(new Error(`lease lost: ${(err as ApiError).code}`));
      } else this.leases.failed(f); // soon: the lease runs out after a few intervals
    }
  }

  /** Eager dispatch asks only for commands of this worker's pool (the in-process broker's `*`: any default-pool one). */
  private claimNext(resent = false): ClaimNextRequest {
    const pool = this.o.broker.settings.pool;
    const req: ClaimNextRequest = { worker_id: this.workerId, lease_seconds: this.leaseSeconds };
    if (pool && pool !== '*' && pool !== DEFAULT_POOL) req.pool = pool;
    if (resent) req.resent = true;
    return req;
  }

  /** Reports call.done (with claim_next when eager dispatch is on); returns the command handed back, if any. */
  private async report(f: InFlight, cmd: ClaimedCommand, outcome: ToolOutcome, durationMs: number): Promise<ClaimedCommand | undefined> {
    const maxLog = this.o.maxLogChars ?? 65_536;
    // Error messages and the call's log become events: URLs in them lose userinfo and query values,
    // and the secret values the tool was given are masked wherever they appear.
    const { secrets } = f;
    let log = outcome.log === undefined ? undefined : secrets.text(redactUrlsIn(outcome.log));
    if (outcome.error) {
      const message = typeof outcome.error.message === 'string' ? redactUrlsIn(outcome.error.message) : outcome.error.message;
      outcome = { ...outcome, error: secrets.deep({ ...outcome.error, message }) };
    }
    if (log !== undefined && log.length > maxLog) log = `${log.slice(0, maxLog)}\n[log truncated: ${log.length} characters]`;
    const meta: JsonObject = {
      duration_ms: durationMs,
      attempt: cmd.attempt,
      iteration: cmd.iteration ?? null,
      worker_id: this.workerId,
      ...(log ? { log } : {}),
    };
    // a response still in JSON text is sent as it is (common/raw-json.ts), never parsed here
    const response = outcome.responseJson !== undefined ? new RawJson(outcome.responseJson) as unknown as Json : outcome.response as Json;
    const payload: JsonObject = outcome.error ? { error: outcome.error as unknown as JsonObject, meta } : { response, meta };
    const event = {
      execution_id: cmd.execution_id, step: cmd.step, name: 'call.done', queue_id: cmd.queue_id, worker_id: this.workerId, lease_token: cmd.lease_token, payload,
    } satisfies WorkerEvent;
    const where = { execution_id: cmd.execution_id, queue_id: cmd.queue_id, step: cmd.step, kind: cmd.tool.kind };
    // The call already ran: its result is kept and reported until the server takes it or says the
    // lease is gone, however long the server is away — the lease heartbeat goes on meanwhile (the
    // slot holds the lease from execute on), so the command is not handed to another worker and
    // its side effects do not happen twice.
    for (let attempt = 1; ; attempt++) {
      try {
        const eager = this.eagerDispatch && !this.stopping;
        // a report sent again may have been taken before: the answer it got then was lost (resent)
        const answer = await this.reports.send(event, eager ? this.claimNext(attempt > 1) : undefined);
        this.log.info({ ...where, duration_ms: durationMs, outcome: outcome.error ? 'error' : 'ok', ...(outcome.error ? { error: outcome.error.message } : {}), ...(attempt > 1 ? { report_attempts: attempt } : {}) }, 'call.done reported');
        this.settle(f.msg, 'ack');
        return eager ? answer.claimed[0] : undefined;
      } catch (err) {
        const refusedBefore = event.payload.error && ['too_large', 'result_refused'].includes(String((event.payload.error as JsonObject).code));
        if (err instanceof ApiError && (err.status === 409 || err.status === 410)) {
          this.log.warn({ ...where, status: err.status, err: err.message }, 'call.done refused: this worker no longer holds the lease; result dropped');
          this.settle(f.msg, 'ack');
          return undefined;
        }
        if (err instanceof ApiError && !isTransient(err) && !refusedBefore) {
          // The server will not take this result (too large, invalid…): the call fails with that
          // reason rather than the command staying leased until it expires and runs again.
          const size = Buffer.byteLength(stringifyJson(event.payload));
          const tooLarge = err.status === 413;
          this.log.warn({ ...where, status: err.status, bytes: size, err: err.message }, 'call.done refused by the server; reporting it as the call\'s error');
          event.payload = {
            error: tooLarge
              ? { message: `the call's result is too large to report (${size} bytes of JSON; the server takes request bodies up to its PLAYFLOW_MAX_BODY_BYTES)`, code: 'too_large' }
              : { message: `the server refused the call's result (${err.status}): ${err.message}`, code: 'result_refused', status: err.status },
            meta,
          };
          attempt = 0;
          continue;
        }
        if (err instanceof ApiError && !isTransient(err)) {
          this.log.error({ ...where, status: err.status, err: err.message }, 'call.done refused even as an error; dropping it (the lease runs out and the server re-issues the command)');
          this.settle(f.msg, 'ack');
          return undefined;
        }
        if (f.reason === 'lease_lost') {
          this.log.warn({ ...where, err: (err as Error).message }, 'lease lost while the result waited to be reported; result dropped');
          this.settle(f.msg, 'ack');
          return undefined;
        }
        if (f.reason === 'shutdown') {
          this.log.error({ ...where, err: (err as Error).message }, 'cannot report call.done before shutdown; nak (the lease runs out and the server re-issues the command)');
          this.settle(f.msg, 'nak', this.nakDelay(f.msg));
          return undefined;
        }
        if (err instanceof ApiError && err.status > 0 && err.status < 500 && attempt >= 10) {
          this.log.error({ ...where, status: err.status, err: err.message }, 'call.done keeps being refused (authorization?); nak (the lease runs out and the server re-issues the command)');
          this.settle(f.msg, 'nak', this.nakDelay(f.msg));
          return undefined;
        }
        if (!(err instanceof ApiError) || err.status === 0) this.markServerDown();
        if (attempt === 1 || attempt % 20 === 0) this.log.warn({ ...where, attempt, err: (err as Error).message }, 'cannot report call.done yet; keeping the result and retrying');
        f.msg.working();
        await new Promise((r) => setTimeout(r, Math.min(REPORT_RETRY_MAX_MS, 250 * 2 ** Math.min(attempt - 1, 8))));
      }
    }
  }

  private async startChild(f: InFlight, cmd: ClaimedCommand): Promise<ClaimedCommand | undefined> {
    const where = { execution_id: cmd.execution_id, queue_id: cmd.queue_id, step: cmd.step };
    const tool = cmd.tool;
    const path = cmd.child?.path ?? (typeof tool.path === 'string' ? tool.path : undefined);
    const payload = cmd.child?.payload ?? (isObject(tool.args) ? tool.args : isObject(tool.with) ? tool.with : {});
    if (!path) {
      this.leases.hold(f); // the command stays this worker's until its error is reported
      return this.report(f, cmd, { error: { message: 'playbook tool needs path', code: 'bad_config' } }, 0);
    }
    try {
      const r = await this.o.client.run({ path, payload, parent_execution_id: cmd.execution_id, parent_queue_id: cmd.queue_id, worker_id: this.workerId, lease_token: cmd.lease_token });
      this.metrics.children.inc();
      this.log.info({ ...where, child_execution_id: r.execution_id, path }, 'child playbook started');
      this.settle(f.msg, 'ack');
      return undefined; // the parent step's call.done comes from the child's end
    } catch (err) {
      if (isTransient(err)) {
        this.log.warn({ ...where, err: (err as Error).message }, 'cannot start the child playbook (server-side fault); nak');
        this.settle(f.msg, 'nak', this.nakDelay(f.msg));
        return undefined;
      }
      // The server refused (unknown path, invalid payload): the parent step fails with that error.
      const e = err as ApiError;
      this.leases.hold(f);
      return this.report(f, cmd, { error: { message: `cannot start playbook ${path}: ${e.message}`, status: e.status, code: e.code, ...(e.details !== undefined ? { data: e.details as Json } : {}) } }, 0);
    }
  }
}
