/**
 * Waiting for an execution to end without polling (the `wait` of GET /api/execution/{id} and of
 * the run routes).
 *
 * The transaction that makes an execution terminal sends `NOTIFY playflow_execution_ended, '<id>'`
 * (store/executions.ts `notifyEndedSql`, sent where the service ends an execution). PostgreSQL
 * delivers it at commit to every session that LISTENs, whichever replica wrote it. Each server
 * process holds ONE such session (a dedicated connection outside the pool) and fans the
 * notifications out to the requests waiting in memory, keyed by execution id.
 *
 * Correctness does not depend on the connection being up: a waiter subscribes BEFORE it reads the
 * execution, so a commit after the read wakes it, and a commit before the read is seen by the
 * read. While the session is down notifications are lost, so when it is (re)established every
 * waiter is woken to read its execution again (the safety net); waiting ends at the deadline in
 * any case, answering the state as it then is.
 */
import pg from 'pg';
import { Gauge } from 'prom-client';
import type { Json } from '../../playbook/types.js';
import { TERMINAL_STATUSES, type ExecutionStatus } from '../engine/contract.js';
import { registry } from '../metrics.js';
import { EXECUTION_ENDED_CHANNEL } from '../store/executions.js';
import { silentLogger, type Logger } from '../../common/logger.js';

/** Requests waiting in this process (every waiter of every ExecutionWaiters instance). */
const waitersGauge = new Gauge({
  name: 'playflow_execution_waiters',
  help: 'Requests waiting for an execution to end (long polls of GET /api/execution/{id}?wait= and run ?wait=)',
  registers: [registry],
});

/**
 * How an execution ended, handed to this process's waiters by the commit that ended it (the
 * service's `onEnded`): a waiter in the same process answers with it instead of reading the row
 * back, which for a large result costs PostgreSQL its jsonb output and this process its parse.
 */
export interface Ended {
  status: ExecutionStatus;
  result: Json | null;
  error: Json | null;
  finished_at: string | null;
}

export interface WaitSubscription {
  /**
   * Resolves when the execution may have ended (its notification, or a reconnect), at `deadline`
   * (epoch ms), or when `signal` aborts, whichever comes first. A wake-up that arrived since the
   * last call resolves at once. Never rejects. Resolves false once no wake-up can come any more
   * (the waiters stopped: the server is shutting down).
   */
  next(deadline: number, signal?: AbortSignal): Promise<boolean>;
  /** Idempotent; must be called (finally) or the waiter stays counted. */
  close(): void;
  /** The outcome, when the commit that ended the execution ran in this process. */
  readonly ended?: Ended;
}

/** What the HTTP layer needs (ServerDeps.waiters). */
export interface ExecutionWaiter {
  /** Interest in the end of one execution; subscribe before reading the execution. */
  subscribe(executionId: string): WaitSubscription;
  /** Subscriptions open now (tests, diagnostics). */
  readonly size: number;
}

class Subscription implements WaitSubscription {
  private pending = false;
  private release: (() => void) | null = null;
  private closed = false;
  /** No wake-up will come any more (the waiters stopped). */
  private final = false;
  ended?: Ended;

  constructor(readonly id: string, private readonly onClose: (s: Subscription) => void) {}

  wake(final = false, ended?: Ended): void {
    if (final) this.final = true;
    if (ended) this.ended = ended;
    if (this.release) this.release();
    else this.pending = true;
  }

  next(deadline: number, signal?: AbortSignal): Promise<boolean> {
    if (this.final || this.closed) return Promise.resolve(false);
    if (this.pending || signal?.aborted) {
      this.pending = false;
      return Promise.resolve(true);
    }
    const ms = deadline - Date.now();
    if (ms <= 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.release = null;
        resolve(!this.final);
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.release = done;
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.release?.();
    this.onClose(this);
  }
}

export interface ExecutionWaitersOptions {
  connectionString: string;
  applicationName?: string;
  logger?: Logger;
  /** First reconnect delay, doubled up to `maxReconnectMs` (defaults 250 ms and 5 s). */
  reconnectMs?: number;
  maxReconnectMs?: number;
}

/** The process's LISTEN session and its in-memory waiters. */
export class ExecutionWaiters implements ExecutionWaiter {
  private readonly byId = new Map<string, Set<Subscription>>();
  /** Executions whose ending transaction this process is committing (see ending). */
  private readonly endingHere = new Set<string>();
  private readonly log: Logger;
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs: number;
  private count = 0;
  private started = false;
  private stopped = false;
  /** Diagnostics and tests: notifications received, sessions established. */
  readonly stats = { notifications: 0, connects: 0 };

  constructor(private readonly opts: ExecutionWaitersOptions) {
    this.log = opts.logger ?? silentLogger;
    this.retryMs = opts.reconnectMs ?? 250;
  }

  get size(): number {
    return this.count;
  }

  /** True while the LISTEN session is up. */
  get listening(): boolean {
    return this.client !== null;
  }

  /** Opens the LISTEN session (a failure is logged and retried in the background). Idempotent. */
  async start(): Promise<void> {
    if (this.started || this.stopped) return;
    this.started = true;
    await this.connect();
  }

  subscribe(executionId: string): WaitSubscription {
    const sub = new Subscription(executionId, (s) => this.remove(s));
    let set = this.byId.get(executionId);
    if (!set) this.byId.set(executionId, (set = new Set()));
    set.add(sub);
    this.count++;
    waitersGauge.inc();
    if (this.stopped) sub.wake(true); // a stopping server answers at once
    else if (!this.started) void this.start(); // a core used without start() (tests) still listens
    return sub;
  }

  /** Wakes every waiter (they answer their current state) and closes the session. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.wakeAll(true);
    await this.connecting?.catch(() => {});
    const c = this.client;
    this.client = null;
    await c?.end().catch(() => {});
  }

  private remove(sub: Subscription): void {
    const set = this.byId.get(sub.id);
    if (!set?.delete(sub)) return;
    if (set.size === 0) this.byId.delete(sub.id);
    this.count--;
    waitersGauge.dec();
  }

  private wake(executionId: string): void {
    for (const s of this.byId.get(executionId) ?? []) s.wake();
  }

  /**
   * A transaction that ends `executionId` is about to commit in this process: until `ended` or
   * `notEnded`, its NOTIFY does not wake the waiters here. The NOTIFY is delivered at the commit and
   * can be read before the committing connection's reply; a waiter woken by it would read the row
   * back although the outcome is about to be handed over (a large result read and parsed for
   * nothing).
   */
  ending(executionId: string): void {
    this.endingHere.add(executionId);
  }

  /**
   * The commit that ended `executionId` ran in this process: its waiters here answer with `ended`
   * (the NOTIFY still wakes those of other replicas, and these again, harmlessly).
   */
  ended(executionId: string, ended: Ended): void {
    this.endingHere.delete(executionId);
    for (const s of this.byId.get(executionId) ?? []) s.wake(false, ended);
  }

  /** The transaction announced by `ending` did not commit, or its outcome is unknown: waiters read. */
  notEnded(executionId: string): void {
    if (this.endingHere.delete(executionId)) this.wake(executionId);
  }

  private wakeAll(final = false): void {
    for (const set of this.byId.values()) for (const s of set) s.wake(final);
  }

  private connect(): Promise<void> {
    this.connecting ??= this.open().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async open(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.opts.connectionString,
      application_name: (this.opts.applicationName ?? 'playflow-listen').slice(0, 63),
      // a peer that vanished without a FIN is noticed by TCP keepalive, then reconnected
      keepAlive: true,
    });
    client.on('notification', (n) => {
      if (n.channel !== EXECUTION_ENDED_CHANNEL || !n.payload) return;
      this.stats.notifications++;
      if (!this.endingHere.has(n.payload)) this.wake(n.payload);
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${EXECUTION_ENDED_CHANNEL}`);
    } catch (err) {
      client.removeAllListeners('end');
      client.on('error', () => {});
      await client.end().catch(() => {});
      if (!this.stopped) {
        this.log.warn({ err: (err as Error).message }, 'execution waiters: LISTEN failed; waits end at their deadline until it is back');
        this.retry();
      }
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.stats.connects++;
    this.retryMs = this.opts.reconnectMs ?? 250;
    // ends committed while no session listened were not heard: every waiter reads again
    this.wakeAll();
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.client !== client) return;
    this.client = null;
    client.end().catch(() => {});
    if (this.stopped) return;
    this.log.warn({ err: err?.message ?? 'connection ended' }, 'execution waiters: LISTEN session lost; reconnecting');
    this.retry();
  }

  private retry(): void {
    if (this.stopped || this.retryTimer) return;
    const ms = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, this.opts.maxReconnectMs ?? 5000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, ms);
    this.retryTimer.unref();
  }

  /** Tests: drop the session as a failover would (the next one re-LISTENs and wakes everyone). */
  async dropSessionForTest(): Promise<void> {
    const c = this.client;
    if (!c) return;
    // terminate from another session, like a DBA or a failover would
    const pid = (c as unknown as { processID?: number }).processID;
    const admin = new pg.Client({ connectionString: this.opts.connectionString });
    await admin.connect();
    try {
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    } finally {
      await admin.end();
    }
  }
}

/** Re-read period when the deps carry no waiter (an app built on bare services, in tests). */
const FALLBACK_RECHECK_MS = 500;

/** A subscription that wakes on a timer: only for deps without an ExecutionWaiter. */
function timerSubscription(): WaitSubscription {
  const sub = new Subscription('', () => {});
  return {
    next: (deadline, signal) => sub.next(Math.min(deadline, Date.now() + FALLBACK_RECHECK_MS), signal),
    close: () => sub.close(),
  };
}

const isTerminal = (s: string) => (TERMINAL_STATUSES as readonly string[]).includes(s as ExecutionStatus);

/**
 * Reads the execution until it is terminal, `waitMs` have passed or `signal` aborted (the client
 * went away, the server is closing); answers the last state read (null: not found). With
 * `fromEnded`, an outcome handed over in this process (`Ended`) is answered without a read.
 */
export async function awaitEnd<T extends { status: string }>(
  waiter: ExecutionWaiter | undefined, executionId: string, read: () => Promise<T | null>, waitMs: number, signal?: AbortSignal,
  fromEnded?: (ended: Ended) => T,
): Promise<T | null> {
  const deadline = Date.now() + waitMs;
  const sub = waiter ? waiter.subscribe(executionId) : timerSubscription();
  try {
    let x = await read();
    while (x && !isTerminal(x.status) && Date.now() < deadline && !signal?.aborted) {
      const more = await sub.next(deadline, signal);
      if (signal?.aborted) break;
      x = sub.ended && fromEnded ? fromEnded(sub.ended) : await read();
      if (!more) break;
    }
    return x;
  } finally {
    sub.close();
  }
}
