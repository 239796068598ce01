/**
 * The transaction of a speculative decision (group-commit.ts `speculate`). The engine decided on this
 * process's cached state before any lock was taken; what it decided goes to PostgreSQL through
 * this stand-in for the transaction's client:
 *
 * - When the decision's first statement is the write and the execution does not end (nothing can
 *   follow it), the write is ONE statement in its own transaction: the write function of migration
 *   340 takes the execution lock, checks the guard (store/decision.ts: the log's last seq, the
 *   leases of the calls and the API vars are still what the decision saw; else it writes nothing
 *   and reports `current = false`), writes and reserves the queue ids of the next eager claims,
 *   with its parameters bound. One round trip per step.
 * - A write the end's statements follow (the execution ends), when decision-write planned them
 *   (`planEnd`), goes with them in ONE pipeline of bound statements (server/pipeline.ts): the write
 *   raises when its guard does not hold, which skips the rest and rolls back. One round trip for
 *   the last step; `takeEndResults` hands the end's results to decision-write `ended`.
 * - Unplanned, such a write goes with BEGIN, its guard deciding whether it applies; the end's
 *   statements then go with COMMIT (`queryAndCommit`): two round trips.
 * - Anything else (vars to persist first, a write too large to inline) opens the transaction
 *   first, BEGIN with the lock and the guard alone; the statements then run in it as usual, the
 *   last write (or the end's statements) carrying the COMMIT, else `finish()` commits.
 *
 * - A start's (starts.ts `startAhead`): the insert of the execution goes first in the write's
 *   pipeline, and statements may follow the write (`Surround`); no guard, as the execution is new.
 *   Other statements first: BEGIN, then the insert, then they run as above.
 *
 * Statements run after the lock in statements of their own, so, as in the locked path, they see
 * every transaction that held the execution's lock before. A speculation that did not hold wrote
 * nothing; the caller then decides again under the lock.
 */
import type pg from 'pg';
import { sessionStatements, type CommitRules, type CommittingClient, type SessionSql, type SessionStatement } from '../db.js';
import {
  GUARD_STATEMENT, guardedValues, guardValues, STALE_SQLSTATE, StaleDecision, WRITE_DECISION_NAME, WRITE_DECISION_OR_STALE, WRITE_DECISION_SQL,
  writeDecisionSql, type DecisionGuard,
} from '../store/decision.js';
import { sendPipeline, type BoundStatement, type PipelineResult } from '../pipeline.js';
import { RESERVE_IDS_STATEMENT, reserveIdsSql } from '../store/queue.js';
import { idLiteral, sqlLiteral, sqlLiterals } from '../store/sql.js';
import { LOCK_STATEMENT } from './helpers.js';

/** The values of the decision's write, when `config` is that statement. */
function writeValues(config: pg.QueryConfig | string): unknown[] | undefined {
  return typeof config === 'object' && config.name === WRITE_DECISION_NAME ? config.values : undefined;
}

/** The write's $9: the execution ends, so the end's statements follow the write (decision-write.ts `ended`). */
const endsExecution = (write: readonly unknown[]): boolean => write[8] !== false;

/**
 * The decision's write when nothing follows it in its transaction, as simple-query text with its
 * parameters inlined (and `reserve` queue ids taken after it); null for any other statement, a
 * write too large to inline, or one the end's statements follow. A group commit's write is its
 * last statement otherwise, so its COMMIT can go with it (db.ts CommitRules).
 */
export function lastWrite(config: pg.QueryConfig | string, reserve = 0): SessionSql | null {
  const write = writeValues(config);
  if (!write || endsExecution(write)) return null;
  const args = sqlLiterals(guardedValues(write, null, reserve));
  return args && { sql: writeDecisionSql(args), prepare: [] };
}

/**
 * The commit rules (db.ts) of a transaction whose decision's write, or the end's statements, are
 * the last (a group commit under the lock, a start): that one carries the COMMIT.
 */
export function decisionCommitRules(beforeCommit: () => void): CommitRules {
  return { last: (config) => lastWrite(config), beforeCommit };
}

/**
 * A start's statements around the decision's write: `lead` (the execution's insert) before it,
 * `tail` after it (and after the end's statements), all in the same pipeline and transaction.
 */
export interface Surround {
  lead: BoundStatement;
  tail: BoundStatement[];
}

/** A client that can send an execution's end with its write (LazyTransaction; decision-write.ts `planEnd`). */
export interface EndPipelining {
  /** The end's statements, to go with the decision's write if that is the transaction's first statement. */
  planEnd(statements: BoundStatement[]): void;
  /** The planned end's results once they went with the write (and committed), else null. */
  takeEndResults(): PipelineResult[] | null;
}

export class LazyTransaction implements CommittingClient, EndPipelining {
  private conn: pg.PoolClient | null = null;
  private endPlan: BoundStatement[] | null = null;
  private endResults: PipelineResult[] | null = null;
  private state: 'idle' | 'open' | 'committed' = 'idle';
  private wasOpened = false;
  private sentCommit = false;
  /** What the decision code uses as its transaction's client (it only queries; see canCommitWith). */
  readonly client: pg.PoolClient & CommittingClient;

  /** Queue ids taken right after the commit (`reserveAfter` of them), for the next speculation. */
  reserved: string[] = [];

  /** The rows of the surround's lead and of its tail's statements, once they ran. */
  leadRows: Record<string, unknown>[] | null = null;
  tailResults: PipelineResult[] = [];

  /**
   * `reserveAfter`: queue ids to take with the COMMIT's round trip (see CachedState.queueIds).
   * `beforeCommit`: called right before a COMMIT goes out (service.ts `ending`).
   */
  constructor(private readonly pool: pg.Pool, private readonly executionId: string, private readonly guard: DecisionGuard | null,
    private readonly reserveAfter = 0, private readonly beforeCommit: () => void = () => {}, private readonly surround: Surround | null = null) {
    this.client = {
      query: (config: pg.QueryConfig | string, values?: unknown[]) => this.query(config, values),
      queryAndCommit: (sql: string, prepare?: readonly SessionStatement[]) => this.queryAndCommit(sql, prepare),
      planEnd: (statements: BoundStatement[]) => this.planEnd(statements),
      takeEndResults: () => this.takeEndResults(),
    } as unknown as pg.PoolClient & CommittingClient;
  }

  /** The decision reached PostgreSQL and committed (false: nothing ran, or it was rolled back). */
  get committed(): boolean {
    return this.state === 'committed';
  }

  /** A COMMIT was sent: after an error its outcome may be unknown (the connection was lost). */
  get commitSent(): boolean {
    return this.sentCommit;
  }

  /** The transaction was opened before its last statement (not the write in one round trip). */
  get opened(): boolean {
    return this.wasOpened;
  }

  private async query(config: pg.QueryConfig | string, values?: unknown[]): Promise<pg.QueryResult> {
    if (this.state === 'committed') throw new Error(`speculative transaction of execution ${this.executionId}: a statement after its commit`);
    if (this.state === 'open') {
      // the guard already held (open, or the write's own): a write that is last takes the COMMIT along
      const last = lastWrite(config, this.reserveAfter);
      if (last) {
        const written = (await this.sendWithCommit(last.sql, last.prepare, 0))[0];
        this.keepReserved(written);
        return written;
      }
      return this.conn!.query(config as pg.QueryConfig, values);
    }
    // the decision's first statement: the write, guarded: alone in its transaction when it is last,
    // else (the end's statements follow it) with BEGIN, the transaction staying open
    const write = writeValues(config);
    if (write && !endsExecution(write)) return this.writeAndCommit(guardedValues(write, this.guard, this.reserveAfter));
    if (write && this.endPlan) return this.writeAndEnd(guardedValues(write, this.guard), this.endPlan);
    const args = write && !this.surround ? sqlLiterals(guardedValues(write, this.guard)) : null;
    if (args) return this.openWithWrite(writeDecisionSql(args));
    // anything else (vars side effects, a write too large to inline): BEGIN, lock and the guard first
    await this.open();
    return this.conn!.query(config as pg.QueryConfig, values);
  }

  planEnd(statements: BoundStatement[]): void {
    this.endPlan = statements;
  }

  takeEndResults(): PipelineResult[] | null {
    const results = this.endResults;
    this.endResults = null;
    return results;
  }

  /** The last statements of the open transaction and its COMMIT in one round trip (the end's: decision-write.ts `ended`). */
  async queryAndCommit(sql: string, prepare: readonly SessionStatement[] = []): Promise<pg.QueryResult[]> {
    if (this.state !== 'open') throw new Error(`speculative transaction of execution ${this.executionId}: queryAndCommit while ${this.state}`);
    return this.sendWithCommit(sql, prepare, 0);
  }

  /** The guarded write alone, its own transaction (the write function locks, checks and writes); a start's with its surround. */
  private async writeAndCommit(values: unknown[]): Promise<pg.QueryResult> {
    if (this.surround) return this.pipelined({ name: WRITE_DECISION_NAME, text: WRITE_DECISION_SQL, values }, []);
    const conn = await this.connect();
    this.beforeCommit();
    this.sentCommit = true;
    const written = (await this.send(conn, { name: WRITE_DECISION_NAME, text: WRITE_DECISION_SQL, values })) as pg.QueryResult;
    this.state = 'committed';
    this.keepReserved(written);
    return written;
  }

  /**
   * The guarded write and the end's statements, one pipeline and one implicit transaction. A stale
   * guard raises (migration 360): nothing after the write ran and the transaction rolled back.
   */
  private async writeAndEnd(values: unknown[], end: BoundStatement[]): Promise<pg.QueryResult> {
    return this.pipelined({ ...WRITE_DECISION_OR_STALE, values }, end);
  }

  /** The write, the statements after it and the surround's, one pipeline; the write's result. */
  private async pipelined(write: BoundStatement, end: BoundStatement[]): Promise<pg.QueryResult> {
    const conn = await this.connect();
    const lead = this.surround ? [this.surround.lead] : [];
    const tail = this.surround?.tail ?? [];
    this.beforeCommit();
    this.sentCommit = true;
    let results: PipelineResult[];
    try {
      results = await sendPipeline(conn, [...lead, write, ...end, ...tail]);
    } catch (err) {
      this.release(true);
      if ((err as { code?: string }).code === STALE_SQLSTATE) throw new StaleDecision(this.executionId);
      throw err;
    }
    this.state = 'committed';
    if (this.surround) {
      this.leadRows = results[0].rows;
      // no execution inserted (the guessed catalog row is no longer live): the write wrote nothing either
      if (this.leadRows.length === 0) throw new StaleDecision(this.executionId);
    }
    const written = results[lead.length];
    if (end.length > 0) this.endResults = results.slice(lead.length + 1, lead.length + 1 + end.length);
    this.tailResults = results.slice(results.length - tail.length);
    return written as unknown as pg.QueryResult;
  }

  /**
   * A write the end's statements follow: it goes with BEGIN and the lock, its own guard deciding
   * whether it applies (store/decision.ts); a stale one wrote nothing and is rolled back by abort().
   */
  private async openWithWrite(write: string): Promise<pg.QueryResult> {
    const conn = await this.connect();
    const results = (await this.send(conn, `BEGIN; ${write}`)) as unknown as pg.QueryResult[];
    this.state = 'open';
    this.wasOpened = true;
    const written = results[1];
    if (!written.rows[0]?.current) throw new StaleDecision(this.executionId);
    return written;
  }

  /** `sql` and COMMIT (then `reserve` queue ids) in one round trip; the results of `sql`'s statements. */
  private async sendWithCommit(sql: string, prepare: readonly SessionStatement[], reserve: number): Promise<pg.QueryResult[]> {
    const conn = this.conn!;
    const session = sessionStatements(conn, [...prepare, ...(reserve > 0 ? [RESERVE_IDS_STATEMENT] : [])]);
    this.beforeCommit();
    this.sentCommit = true;
    const results = (await this.send(conn, `${session.prefix}${sql}; COMMIT${this.reserveTail(reserve)}`)) as unknown as pg.QueryResult[];
    session.done();
    this.state = 'committed';
    const mine = results.slice(session.missing);
    const commitAt = mine.length - (reserve > 0 ? 2 : 1);
    if (reserve > 0) this.keepReserved(mine[commitAt + 1]);
    return mine.slice(0, commitAt);
  }

  private lock(): string {
    return LOCK_STATEMENT.execute(idLiteral(this.executionId));
  }

  /**
   * After COMMIT, in the same round trip: nextval is not transactional, and these ids follow every
   * row just written. (Only a lost connection fails it, which the caller answers 503 in any case.)
   */
  private reserveTail(count: number): string {
    return count > 0 ? `; ${reserveIdsSql(count)}` : '';
  }

  /** The ids a write took after its rows (its `reserved`), or those of RESERVE_IDS_STATEMENT. */
  private keepReserved(taken: pg.QueryResult): void {
    const row = taken.rows[0] as { reserved?: string[] } | undefined;
    this.reserved = row && 'reserved' in row ? row.reserved ?? [] : taken.rows.map((r: { id: string }) => r.id);
  }

  private async open(): Promise<void> {
    if (this.surround) return this.openWithLead(this.surround.lead);
    const guard = this.guard;
    if (!guard) throw new Error(`speculative transaction of execution ${this.executionId}: neither a guard nor a start's insert`);
    const conn = await this.connect();
    const session = sessionStatements(conn, [LOCK_STATEMENT, GUARD_STATEMENT, RESERVE_IDS_STATEMENT]);
    const sql = `${session.prefix}BEGIN; ${this.lock()}; ${GUARD_STATEMENT.execute(...guardValues(this.executionId, guard).map(sqlLiteral))}`;
    const results = (await this.send(conn, sql)) as unknown as pg.QueryResult[];
    session.done();
    this.state = 'open';
    this.wasOpened = true;
    if (!results[session.missing + 2].rows[0]?.current) throw new StaleDecision(this.executionId);
  }

  /** A start's transaction opened before its write: BEGIN, then the insert (which takes the lock). */
  private async openWithLead(lead: BoundStatement): Promise<void> {
    const conn = await this.connect();
    await this.send(conn, 'BEGIN');
    this.state = 'open';
    this.wasOpened = true;
    try {
      this.leadRows = (await sendPipeline(conn, [lead]))[0].rows;
    } catch (err) {
      this.release(true);
      throw err;
    }
    // nothing inserted (the guessed catalog row is no longer live): abort() rolls back
    if (this.leadRows.length === 0) throw new StaleDecision(this.executionId);
  }

  /**
   * One simple query. On an error the connection goes: which of its PREPAREs ran is unknown, and
   * a transaction it began is then rolled back with it. Nothing after a failed statement ran, so a
   * COMMIT in it did not either (unless the connection was lost: the caller answers 503 then, as a
   * lost COMMIT always does).
   */
  private async send(conn: pg.PoolClient, sql: string | pg.QueryConfig): Promise<unknown> {
    try {
      return await conn.query(sql as pg.QueryConfig);
    } catch (err) {
      this.release(true);
      throw err;
    }
  }

  /**
   * Commits a transaction still open; releases the connection in any case. `ended`: the decision
   * ended its execution, so no ids are taken after the COMMIT: there is no next step to claim.
   */
  async finish(ended = false): Promise<void> {
    if (this.state === 'open') {
      let results: unknown;
      const reserve = ended ? 0 : this.reserveAfter;
      this.beforeCommit();
      this.sentCommit = true;
      try {
        results = await this.conn!.query(`COMMIT${this.reserveTail(reserve)}`);
      } catch (err) {
        this.release(true);
        throw err;
      }
      this.state = 'committed';
      if (reserve > 0) this.keepReserved((results as pg.QueryResult[])[1]);
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
