/**
 * The schedule ticker, on every server replica. Nothing about a tick is held in memory: each pass
 * reads the due schedules (next_run <= now), and for each one takes its row FOR UPDATE SKIP LOCKED
 * *with the tick it expects* (next_run unchanged), so exactly one replica decides a tick. In that
 * transaction it records every due tick in schedule_tick (primary key (schedule, tick)) and moves
 * next_run past now. After the commit it starts the execution of the tick it fired, recorded with
 * its schedule and tick (unique: a tick never starts two executions). A replica that dies between
 * the commit and the start leaves a `started` tick without execution; any replica's recovery pass
 * starts it later (the unique index makes a race harmless).
 *
 * Due ticks, when the ticker sees them:
 *  - one tick, not later than starting_deadline_seconds: it fires (subject to the concurrency policy);
 *  - otherwise ticks were missed (the servers were down, or the tick is too late): RunOnce fires one
 *    execution for the latest of them, Skip fires none; the others are recorded `missed`.
 * Concurrency: Allow starts regardless; Forbid records the tick `skipped` while an execution of the
 * schedule is started or running; Replace cancels those, then starts.
 */
import type { RunRequest, ScheduleTickView } from '../../common/protocol.js';
import type { Db, ExecutionService } from '../services.js';
import * as store from '../store/schedules.js';
import { dueTicks, nextTick, parseCron } from './cron.js';
import { type Logger } from '../../common/logger.js';

export interface TickerOptions {
  db: Db;
  executions: Pick<ExecutionService, 'start' | 'cancel'>;
  logger: Logger;
  /** Pass period (default 500 ms): a tick fires at most this late. */
  intervalMs?: number;
  now?: () => number;
}

export class ScheduleTicker {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly intervalMs: number;
  private readonly now: () => number;
  /** Counters (tests, diagnostics). */
  readonly stats = { started: 0, skipped: 0, missed: 0, failed: 0, recovered: 0 };

  constructor(private readonly o: TickerOptions) {
    this.intervalMs = o.intervalMs ?? 500;
    this.now = o.now ?? Date.now;
  }

  start(): void {
    if (this.timer) return;
    const loop = () => {
      this.running = this.pass().catch((err) => this.o.logger.warn({ err: String(err) }, 'schedule pass failed')).finally(() => {
        this.running = null;
        if (this.timer) this.timer = setTimeout(loop, this.intervalMs);
      });
    };
    this.timer = setTimeout(loop, 0);
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One pass: due schedules, then ticks whose start was lost. */
  async pass(): Promise<void> {
    // one schedule that cannot be decided must not hold back the others due after it
    for (const d of await store.due(this.o.db.pool, 100)) {
      await this.fire(d.schedule_id, d.next_run).catch((err) => this.failed(err, 'a due schedule could not be decided', { schedule_id: d.schedule_id }));
    }
    for (const u of await store.unstarted(this.o.db.pool, 30, 20)) {
      await this.recover(u.schedule_id, u.tick).catch((err) => this.failed(err, 'a lost tick could not be started', { schedule_id: u.schedule_id, tick: u.tick.toISOString() }));
    }
  }

  private failed(err: unknown, msg: string, fields: object): void {
    this.stats.failed++;
    this.o.logger.warn({ ...fields, err: String(err) }, msg);
  }

  private async fire(scheduleId: string, expected: Date): Promise<void> {
    const decided = await this.o.db.tx(async (client) => {
      const s = await store.lockDue(client, scheduleId, expected);
      if (!s) return null; // another replica has it, or it moved on
      const now = new Date(this.now());
      let cron;
      try {
        cron = parseCron(s.cron, s.timezone);
      } catch (err) {
        this.o.logger.warn({ schedule: s.name, err: String(err) }, 'schedule has an invalid cron; suspended');
        await client.query('UPDATE schedule SET suspend = true WHERE schedule_id = $1', [scheduleId]);
        return null;
      }
      const { ticks, dropped } = dueTicks(cron, expected, now);
      const latest = ticks[ticks.length - 1] ?? expected;
      const late = s.starting_deadline_seconds !== null && now.getTime() - latest.getTime() > s.starting_deadline_seconds * 1000;
      const missed = ticks.length > 1 || late;
      const fire = missed ? (s.missed_runs === 'RunOnce' && !late ? latest : null) : latest;
      let rows: Array<{ tick: Date; outcome: ScheduleTickView['outcome']; reason?: string }> = [];
      let open: string[] = [];
      for (const t of ticks) {
        if (t !== fire) {
          rows.push({ tick: t, outcome: 'missed', reason: late && t === latest ? 'later than starting_deadline_seconds' : `missed (${s.missed_runs})` });
          continue;
        }
        if (s.concurrency_policy !== 'Allow') open = await store.openExecutions(client, scheduleId);
        if (s.concurrency_policy === 'Forbid' && open.length) rows.push({ tick: t, outcome: 'skipped', reason: `Forbid: execution ${open.join(', ')} still running` });
        else rows.push({ tick: t, outcome: 'started', reason: missed ? `RunOnce for ${ticks.length - 1 + Math.max(0, dropped)} missed tick(s)` : undefined });
      }
      const recorded = await store.recordTicks(client, scheduleId, rows);
      const already = rows.filter((r) => !recorded.has(r.tick.getTime()));
      if (already.length) this.o.logger.info({ schedule: s.name, ticks: already.map((r) => r.tick.toISOString()) }, 'schedule ticks already decided; left as they are');
      rows = rows.filter((r) => recorded.has(r.tick.getTime()));
      await store.advance(client, scheduleId, nextTick(cron, now), fire);
      const started = rows.find((r) => r.outcome === 'started');
      for (const r of rows) this.stats[r.outcome === 'started' ? 'started' : r.outcome === 'skipped' ? 'skipped' : 'missed']++;
      if (rows.some((r) => r.outcome !== 'started')) this.o.logger.info({ schedule: s.name, ticks: rows.map((r) => `${r.tick.toISOString()} ${r.outcome}`) }, 'schedule ticks not run');
      return started ? { s, tick: started.tick, replace: s.concurrency_policy === 'Replace' ? open : [] } : null;
    });
    if (!decided) return;
    for (const id of decided.replace) {
      await this.o.executions.cancel(id).catch((err) => this.o.logger.warn({ execution_id: id, err: String(err) }, 'Replace: cancelling failed'));
    }
    await this.startTick(decided.s, decided.tick);
  }

  private async startTick(s: store.ScheduleRow, tick: Date): Promise<void> {
    try {
      const req: RunRequest = { path: s.path, payload: s.payload };
      if (s.version !== null) req.version = s.version;
      const res = await this.o.executions.start(req, { schedule_id: s.schedule_id, schedule_tick: tick });
      await store.tickStarted(this.o.db.pool, s.schedule_id, tick, res.execution_id);
      this.o.logger.info({ schedule: s.name, tick: tick.toISOString(), execution_id: res.execution_id }, 'schedule started an execution');
    } catch (err) {
      const code = (err as { code?: string; constraint?: string }).constraint === 'execution_schedule_tick' ? 'duplicate' : null;
      if (code) {
        const id = await store.executionOfTick(this.o.db.pool, s.schedule_id, tick);
        if (id) await store.tickStarted(this.o.db.pool, s.schedule_id, tick, id);
        return;
      }
      this.stats.failed++;
      const reason = (err as Error).message ?? String(err);
      this.o.logger.warn({ schedule: s.name, tick: tick.toISOString(), err: reason }, 'schedule could not start its playbook');
      await store.tickFailed(this.o.db.pool, s.schedule_id, tick, reason).catch(() => {});
    }
  }

  /** A started tick without execution (its replica died after the claim): start it now, once. */
  private async recover(scheduleId: string, tick: Date): Promise<void> {
    const existing = await store.executionOfTick(this.o.db.pool, scheduleId, tick);
    if (existing) return void await store.tickStarted(this.o.db.pool, scheduleId, tick, existing);
    const s = await store.getById(this.o.db.pool, scheduleId);
    if (!s) return;
    this.stats.recovered++;
    await this.startTick(s, tick);
  }
}
