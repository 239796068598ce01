/**
 * Per-playbook concurrency limits (`concurrency: {limit: N}` in a playbook). A root execution of a
 * limited path is stored waiting (status `started`, no events); the admitter starts waiting ones,
 * oldest first, while fewer than N executions of the path run. Admission of a path happens under a
 * PostgreSQL advisory lock of that path (try-lock: a replica already admitting it does the work),
 * the count is read under that lock, and each admission commits before the lock is released, so
 * several server replicas never run more than N. Children (`playbook` tool, holding their parent's
 * command: parent_queue_id) are never held: a parent waiting for a child that waits for a slot its
 * parent holds would deadlock. A start naming only parent_execution_id is held like a root one.
 */
import type { Playbook } from '../../playbook/types.js';
import type { Db } from '../services.js';
import type { Queryable } from '../store/sql.js';
import type { ExecutionRow } from '../store/executions.js';

/** What the admitter logs with (any of the server's loggers). */
export interface AdmitterLogger {
  warn(obj: object, msg: string): void;
}

/** The advisory-lock class of path admissions (two-int4 key space, apart from the execution locks). */
const LOCK_CLASS = 0x706c6663; // 'plfc'

export function limitOf(playbook: Playbook | undefined): number | null {
  const limit = playbook?.concurrency?.limit;
  return typeof limit === 'number' && Number.isInteger(limit) && limit >= 1 ? limit : null;
}

export async function hold(q: Queryable, executionId: string): Promise<void> {
  await q.query('UPDATE execution SET waiting = true WHERE execution_id = $1', [executionId]);
}

/** The waiting execution, no longer waiting (caller holds its execution lock); null when it was not waiting. */
export async function release(q: Queryable, executionId: string): Promise<ExecutionRow | null> {
  const { rows } = await q.query<ExecutionRow>(
    `UPDATE execution SET waiting = false, updated_at = now() WHERE execution_id = $1 AND waiting AND status = 'started' RETURNING *`, [executionId]);
  return rows[0] ?? null;
}

/** Cancels a waiting execution (it never started: no events); null when it was not waiting. */
export async function cancelWaiting(q: Queryable, executionId: string): Promise<ExecutionRow | null> {
  const { rows } = await q.query<ExecutionRow>(
    `UPDATE execution SET waiting = false, status = 'cancelled', error = $2::jsonb, finished_at = now(), updated_at = now()
      WHERE execution_id = $1 AND waiting RETURNING *`, [executionId, JSON.stringify({ message: 'cancelled while waiting for a concurrency slot' })]);
  return rows[0] ?? null;
}

export interface AdmitterOptions {
  db: Db;
  /** Starts one waiting execution in its own transaction; false when it was no longer waiting. */
  admit(executionId: string): Promise<boolean>;
  /** The limit of the playbook version an execution runs. */
  limitOfCatalog(catalogId: string): Promise<number | null>;
  /** Between passes while executions wait (default 250 ms): a slot freed anywhere is taken this late. */
  intervalMs?: number;
  /**
   * Between passes while none waits (default 5 s). A start held here kicks a pass at once, and the
   * server holding executions passes every `intervalMs`; this pace only finds executions another
   * replica held and could no longer admit (it stopped).
   */
  idleIntervalMs?: number;
  logger?: AdmitterLogger;
}

export class Admitter {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly log: AdmitterLogger;
  /** The pace while executions wait, and while none does (AdmitterOptions). */
  private readonly waitingMs: number;
  private readonly idleMs: number;

  constructor(private readonly o: AdmitterOptions) {
    this.log = o.logger ?? { warn() {} };
    this.waitingMs = o.intervalMs ?? 250;
    this.idleMs = o.idleIntervalMs ?? 5_000;
  }

  start(): void {
    this.stopped = false;
    if (this.timer) return;
    this.schedule(this.waitingMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /** The next pass: soon while executions wait, seldom while none does (an idle server's queries). */
  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.kick();
    }, ms);
    this.timer.unref();
  }

  /** Runs a pass now (or right after the one in flight). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    let waited = true; // a failed pass is retried at the short pace
    this.running = (async () => {
      do {
        this.again = false;
        try {
          waited = (await this.pass()).waited;
        } catch (err) {
          waited = true;
          this.log.warn({ err: String((err as Error)?.message ?? err) }, 'admitting waiting executions failed; the next pass retries');
        }
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.running = null;
      this.schedule(waited ? this.waitingMs : this.idleMs);
    });
  }

  /** One admission round over every path with waiting executions: how many started, and whether any waited. */
  async pass(): Promise<{ started: number; waited: boolean }> {
    // named: planned once per connection, not at every pass of every server
    const { rows } = await this.o.db.pool.query<{ path: string }>({ name: 'playflow.waiting_paths', text: 'SELECT DISTINCT path FROM execution WHERE waiting' });
    let started = 0;
    for (const { path } of rows) started += await this.admitPath(path);
    return { started, waited: rows.length > 0 };
  }

  private async admitPath(path: string): Promise<number> {
    return this.o.db.tx(async (client) => {
      const { rows: [lock] } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1, hashtext($2)) AS ok', [LOCK_CLASS, path]);
      if (!lock.ok) return 0; // another replica admits this path now
      const { rows: [c] } = await client.query<{ running: string }>(
        `SELECT count(*) AS running FROM execution WHERE path = $1 AND status IN ('started', 'running') AND NOT waiting`, [path]);
      const { rows: waiting } = await client.query<{ execution_id: string; catalog_id: string }>(
        'SELECT execution_id, catalog_id FROM execution WHERE path = $1 AND waiting ORDER BY execution_id LIMIT 1000', [path]);
      let running = Number(c.running);
      let started = 0;
      for (const w of waiting) {
        // the limit of the version it runs (a new version may change the limit)
        const limit = (await this.o.limitOfCatalog(w.catalog_id)) ?? Number.POSITIVE_INFINITY;
        if (running >= limit) break; // FIFO: nobody overtakes the oldest waiting execution
        if (await this.o.admit(w.execution_id)) {
          running++;
          started++;
        }
      }
      return started;
    });
  }
}
