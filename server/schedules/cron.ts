/**
 * Cron expressions through croner (seconds, IANA time zones, DST): parsing with errors that name
 * the field, and the ticks between two instants. No timers: the ticker asks, the database decides.
 */
import { Cron } from 'croner';
import { badRequest } from '../errors.js';

/** A parsed cron in its time zone; throws 400 naming `cron` or `timezone`. */
export function parseCron(expr: string, timezone: string, field = ''): Cron {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw badRequest(`${field}timezone: '${timezone}' is not an IANA time zone (e.g. UTC, Europe/Berlin)`, { field: `${field}timezone` });
  }
  try {
    const cron = new Cron(expr, { timezone, paused: true });
    if (!cron.nextRun()) throw new Error('it never fires');
    return cron;
  } catch (e) {
    throw badRequest(`${field}cron: '${expr}' is not a valid cron expression: ${(e as Error).message}`, { field: `${field}cron` });
  }
}

/** First tick strictly after `after` (null: none left). */
export function nextTick(cron: Cron, after: Date): Date | null {
  return cron.nextRun(after);
}

/**
 * The ticks from `first` (itself a tick) up to `now`, oldest first, at most `max` (the oldest are
 * dropped beyond that: only how many were missed and the latest matter).
 */
export function dueTicks(cron: Cron, first: Date, now: Date, max = 1000): { ticks: Date[]; dropped: number } {
  const ticks: Date[] = [];
  let dropped = 0;
  // after a long outage only the last day of ticks is walked (an every-second cron would be 86,400)
  const DAY = 86_400_000;
  if (now.getTime() - first.getTime() > DAY) {
    const from = cron.nextRun(new Date(now.getTime() - DAY));
    if (!from) return { ticks, dropped };
    first = from;
    dropped = -1; // unknown, many
  }
  for (let t: Date | null = first; t && t.getTime() <= now.getTime(); t = cron.nextRun(t)) {
    ticks.push(t);
    if (ticks.length > max) {
      ticks.shift();
      if (dropped >= 0) dropped++;
    }
  }
  return { ticks, dropped };
}
