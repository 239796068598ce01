/**
 * The transaction of a speculative decision (service.ts `speculate`). The engine decided on this
 * process's cached state before any lock was taken; what it decided goes to PostgreSQL through
 * this stand-in for the transaction's client:
 *
 * - When the decision's first statement is the write and the execution does not end (nothing can
 *   follow it), BEGIN, the execution lock, the write and COMMIT go in ONE simple query: one round
 *   trip per step instead of three (BEGIN with the lock, the write, COMMIT), which is where a
 *   step's socket writes and PostgreSQL's per-message work went. The write carries a guard
 *   (store/decision.ts): it applies only if the log's last seq, the leases of the calls and the API
 *   vars are still what the decision saw, else it writes nothing and reports `current = false`.
 * - Anything else (vars to persist, an execution that ends, a write too large to inline) opens the
 *   transaction first, BEGIN with the lock and the guard alone; the statements then run in it as
 *   usual and `finish()` commits.
 *
 * Statements run after the lock in statements of their own, so, as in the locked path, they see
 * every transaction that held the execution's lock before. A speculation that did not hold wrote
 * nothing; the caller then decides again under the lock.
 */
import type pg from 'pg';
import { sessionStatements } from '../db.js';
import { GUARD_STATEMENT, guardedValues, guardValues, StaleDecision, WRITE_DECISION_NAME, WRITE_DECISION_STATEMENT, type DecisionGuard } from '../store/decision.js';
import { RESERVE_IDS_STATEMENT, reserveIdsSql } from '../store/queue.js';
import { idLiteral } from '../store/sql.js';
import { LOCK_STATEMENT } from './helpers.js';

/** Above this, a write's parameters are bound rather than inlined: PostgreSQL lexes a literal it parses. */
const MAX_INLINE_CHARS = 256 * 1024;

/**
 * A parameter as an SQL literal (EXECUTE's arguments: a simple query binds none). Not pg's
 * escapeLiteral, which builds the literal a character at a time: for a step's few KB of JSON
 * that cost more than the round trips this saves.
 */
function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  const quoted = s.replace(/'/g, "''");
  // E'…' reads backslashes as escapes whatever standard_conforming_strings says
  return s.includes('\\') ? `E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
}

function inlined(values: readonly unknown[]): string[] | null {
  let size = 0;
  const out: string[] = [];
  for (const v of values) {
    const lit = literal(v);
    size += lit.length;
    if (size > MAX_INLINE_CHARS) return null;
    out.push(lit);
  }
  return out;
}

export class LazyTransaction {
  private conn: pg.PoolClient | null = null;
  private state: 'idle' | 'open' | 'committed' = 'idle';
  private wasOpened = false;
  private sentCommit = false;
  /** What the decision code uses as its transaction's client (it only queries). */
  readonly client: pg.PoolClient;

  /** Queue ids taken right after the commit (`reserveAfter` of them), for the next speculation. */
  reserved: string[] = [];

  /** `reserveAfter`: queue ids to take with the COMMIT's round trip (see CachedState.queueIds). */
  constructor(private readonly pool: pg.Pool, private readonly executionId: string, private readonly guard: DecisionGuard, private reserveAfter = 0) {
    this.client = { query: (config: pg.QueryConfig | string, values?: unknown[]) => this.query(config, values) } as unknown as pg.PoolClient;
  }

  /** The decision reached PostgreSQL and committed (false: nothing ran, or it was rolled back). */
  get committed(): boolean {
    return this.state === 'committed';
  }

  /** A COMMIT was sent: after an error its outcome may be unknown (the connection was lost). */
  get commitSent(): boolean {
    return this.sentCommit;
  }

  /** The transaction was opened before its statements (not the write in one round trip). */
  get opened(): boolean {
    return this.wasOpened;
  }

  private async query(config: pg.QueryConfig | string, values?: unknown[]): Promise<pg.QueryResult> {
    if (this.state === 'committed') throw new Error(`speculative transaction of execution ${this.executionId}: a statement after its commit`);
    if (this.state === 'idle') {
      const write = typeof config === 'object' && config.name === WRITE_DECISION_NAME ? config.values : undefined;
      // the write's $9: the execution ends, and the end's statements follow the write
      const args = write && write[8] === false ? inlined(guardedValues(write, this.guard)) : null;
      if (args !== null) return this.writeAndCommit(args);
      await this.open();
    }
    return this.conn!.query(config as pg.QueryConfig, values);
  }

  private async writeAndCommit(args: string[]): Promise<pg.QueryResult> {
    const conn = await this.connect();
    const session = sessionStatements(conn, [LOCK_STATEMENT, WRITE_DECISION_STATEMENT, RESERVE_IDS_STATEMENT]);
    const sql = `${session.prefix}BEGIN; ${this.lock()}; ${WRITE_DECISION_STATEMENT.execute(...args)}; COMMIT${this.reserveTail()}`;
    this.sentCommit = true;
    const results = (await this.send(conn, sql)) as unknown as pg.QueryResult[];
    session.done();
    this.state = 'committed';
    this.takeReserved(results, session.missing + 4);
    return results[session.missing + 2];
  }

  private lock(): string {
    return LOCK_STATEMENT.execute(idLiteral(this.executionId));
  }

  /**
   * After COMMIT, in the same round trip: nextval is not transactional, and these ids follow every
   * row just written. (Only a lost connection fails it, which the caller answers 503 in any case.)
   */
  private reserveTail(): string {
    return this.reserveAfter > 0 ? `; ${reserveIdsSql(this.reserveAfter)}` : '';
  }

  private takeReserved(results: pg.QueryResult[], at: number): void {
    if (this.reserveAfter > 0) this.reserved = results[at].rows.map((r: { id: string }) => r.id);
  }

  private async open(): Promise<void> {
    const conn = await this.connect();
    const session = sessionStatements(conn, [LOCK_STATEMENT, GUARD_STATEMENT, RESERVE_IDS_STATEMENT]);
    const sql = `${session.prefix}BEGIN; ${this.lock()}; ${GUARD_STATEMENT.execute(...guardValues(this.executionId, this.guard).map(literal))}`;
    const results = (await this.send(conn, sql)) as unknown as pg.QueryResult[];
    session.done();
    this.state = 'open';
    this.wasOpened = true;
    if (!results[session.missing + 2].rows[0]?.current) throw new StaleDecision(this.executionId);
  }

  /**
   * One simple query. On an error the connection goes: which of its PREPAREs ran is unknown, and
   * a transaction it began is then rolled back with it. Nothing after a failed statement ran, so a
   * COMMIT in it did not either (unless the connection was lost: the caller answers 503 then, as a
   * lost COMMIT always does).
   */
  private async send(conn: pg.PoolClient, sql: string): Promise<unknown> {
    try {
      return await conn.query(sql);
    } catch (err) {
      this.release(true);
      throw err;
    }
  }

  /**
   * Commits an open transaction; releases the connection in any case. `ended`: the decision ended
   * its execution, so no ids are taken after the COMMIT: there is no next step to claim, and the
   * COMMIT's reply must come as soon as the commit's NOTIFY does, so this process hands the outcome
   * to its waiters (onEnded) before a waiter woken by the NOTIFY reads the row back.
   */
  async finish(ended = false): Promise<void> {
    if (this.state === 'open') {
      let results: unknown;
      this.sentCommit = true;
      if (ended) this.reserveAfter = 0;
      try {
        results = await this.conn!.query(`COMMIT${this.reserveTail()}`);
      } catch (err) {
        this.release(true);
        throw err;
      }
      this.state = 'committed';
      if (this.reserveAfter > 0) this.takeReserved(results as pg.QueryResult[], 1);
    }
    this.release(false);
  }

  /** Rolls back an open transaction (after an error); releases the connection. Never throws. */
  async abort(): Promise<void> {
    if (this.state === 'open' && this.conn) {
      const ok = await this.conn.query('ROLLBACK').then(() => true, () => false);
      this.state = 'idle';
      this.release(!ok);
      return;
    }
    this.release(false);
  }

  private async connect(): Promise<pg.PoolClient> {
    this.conn = await this.pool.connect();
    return this.conn;
  }

  private release(destroy: boolean): void {
    const conn = this.conn;
    this.conn = null;
    conn?.release(destroy);
  }
}
