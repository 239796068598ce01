/**
 * Schedules: one implementation for the three ways of declaring one — the API (`source: api`), a
 * playbook's `schedules:` section (`playbook`, synced at registration, named `<path>:<name>`) and a
 * Schedule custom resource (`kubernetes`, synced by the operator through the API). A schedule is
 * changed or deleted only by the source that declared it (409 otherwise), so the operator never
 * overwrites an API schedule of the same name and vice versa.
 */
import type { JsonObject } from '../../playbook/types.js';
import type { ScheduleList, ScheduleSource, ScheduleSpec, ScheduleTicks, ScheduleView } from '../../common/protocol.js';
import { badRequest, conflict, notFound } from '../errors.js';
import type pg from 'pg';
import type { Db } from '../db.js';
import * as store from '../store/schedules.js';
import { nextTick, parseCron } from './cron.js';
import { CONCURRENCY_POLICIES, MISSED_RUN_POLICIES, SCHEDULE_NAME_PATTERN, SCHEDULE_SOURCES, SCHEDULE_TICKS_LIMIT } from '../../common/contract/schedule.js';

// One definition with the request schema (common/contract/schedule.ts): a playbook's declared
// schedules are checked here too, without passing the HTTP edge.
export const SCHEDULE_NAME = new RegExp(SCHEDULE_NAME_PATTERN);
const POLICIES = CONCURRENCY_POLICIES;
const MISSED = MISSED_RUN_POLICIES;
const SOURCES = SCHEDULE_SOURCES;

const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Checks a declaration field by field; errors name the field (prefixed, e.g. `schedules[0].`). */
export function validateSpec(spec: unknown, prefix = ''): Required<Omit<ScheduleSpec, 'source'>> {
  if (!isObject(spec)) throw badRequest(`${prefix || 'the schedule'} must be an object`);
  const s = spec as unknown as ScheduleSpec;
  const f = (name: string) => `${prefix}${name}`;
  if (typeof s.cron !== 'string' || s.cron.trim() === '') throw badRequest(`${f('cron')} is required (e.g. "0 */5 * * * *")`, { field: f('cron') });
  const timezone = s.timezone ?? 'UTC';
  if (typeof timezone !== 'string') throw badRequest(`${f('timezone')} must be a string`, { field: f('timezone') });
  parseCron(s.cron, timezone, prefix);
  if (typeof s.path !== 'string' || s.path.trim() === '') throw badRequest(`${f('path')} is required: the catalog path of the playbook`, { field: f('path') });
  const version = s.version ?? null;
  if (version !== null && (!Number.isInteger(version) || version < 1)) throw badRequest(`${f('version')} must be a positive integer or null`, { field: f('version') });
  const payload = s.payload ?? {};
  if (!isObject(payload)) throw badRequest(`${f('payload')} must be a JSON object`, { field: f('payload') });
  const policy = s.concurrency_policy ?? 'Allow';
  if (!POLICIES.includes(policy)) throw badRequest(`${f('concurrency_policy')} must be one of ${POLICIES.join(', ')}`, { field: f('concurrency_policy') });
  const missed = s.missed_runs ?? 'RunOnce';
  if (!MISSED.includes(missed)) throw badRequest(`${f('missed_runs')} must be one of ${MISSED.join(', ')}`, { field: f('missed_runs') });
  const deadline = s.starting_deadline_seconds ?? null;
  if (deadline !== null && (!Number.isInteger(deadline) || deadline < 1)) {
    throw badRequest(`${f('starting_deadline_seconds')} must be a positive integer or null`, { field: f('starting_deadline_seconds') });
  }
  const suspend = s.suspend ?? false;
  if (typeof suspend !== 'boolean') throw badRequest(`${f('suspend')} must be true or false`, { field: f('suspend') });
  return {
    cron: s.cron.trim(), timezone, path: s.path.trim().replace(/^\/+|\/+$/g, ''), version, payload, concurrency_policy: policy,
    missed_runs: missed, starting_deadline_seconds: deadline, suspend,
  };
}

export class ScheduleService {
  constructor(
    private readonly db: Db,
    private readonly now: () => number = Date.now,
  ) {}

  async put(name: string, spec: ScheduleSpec): Promise<{ schedule: ScheduleView; created: boolean }> {
    checkName(name);
    const source = spec?.source ?? 'api';
    if (!SOURCES.includes(source)) throw badRequest(`source must be one of ${SOURCES.join(', ')}`, { field: 'source' });
    if (source === 'playbook') throw badRequest('source playbook is set by registering a playbook with a schedules: section', { field: 'source' });
    const v = validateSpec(spec);
    return this.db.tx(async (client) => {
      const existing = await store.get(client, name);
      if (existing && existing.source !== source) {
        throw conflict('owned_elsewhere', `schedule '${name}' is declared by ${existing.source}; change it there`, { source: existing.source });
      }
      const { row, created } = await store.upsert(client, { name, source, ...v, next_run: this.firstRun(v) });
      return { schedule: store.toView(row), created };
    });
  }

  async get(name: string): Promise<ScheduleView> {
    const row = await store.get(this.db.pool, name);
    if (!row) throw notFound(`schedule '${name}' not found`);
    return store.toView(row);
  }

  async list(opts: { path?: string; source?: ScheduleSource } = {}): Promise<ScheduleList> {
    const rows = await store.list(this.db.pool, opts);
    return { schedules: rows.map(store.toView), count: rows.length };
  }

  async remove(name: string, source: ScheduleSource = 'api'): Promise<void> {
    await this.db.tx(async (client) => {
      const row = await store.get(client, name);
      if (!row) throw notFound(`schedule '${name}' not found`);
      if (row.source !== source) throw conflict('owned_elsewhere', `schedule '${name}' is declared by ${row.source}; remove it there`, { source: row.source });
      await store.remove(client, name);
    });
  }

  async ticks(name: string, limit = SCHEDULE_TICKS_LIMIT.default): Promise<ScheduleTicks> {
    const row = await store.get(this.db.pool, name);
    if (!row) throw notFound(`schedule '${name}' not found`);
    return { name, ticks: await store.ticks(this.db.pool, row.schedule_id, Math.min(Math.max(1, limit), SCHEDULE_TICKS_LIMIT.max)) };
  }

  /**
   * A playbook version was registered: its `schedules:` entries become schedules named
   * `<path>:<name>` (the version not pinned unless given), those it no longer declares are removed.
   * `client`: the registration's transaction (CatalogService.register's `alongside`), so a 400 or
   * 409 here leaves the version unstored too; without it, a transaction of its own.
   * Errors name the declaration (`schedules[i].name`): the name is the playbook's to change.
   */
  async syncPlaybook(path: string, declared: Array<ScheduleSpec & { name: string }>, client?: pg.PoolClient): Promise<string[]> {
    const specs = declared.map((d, i) => ({ name: `${path.replace(/\//g, '.')}:${d.name}`, field: `schedules[${i}].name`, v: validateSpec({ ...d, path: d.path ?? path }, `schedules[${i}].`) }));
    for (const s of specs) checkName(s.name, s.field);
    const sync = async (c: pg.PoolClient) => {
      for (const s of specs) {
        const existing = await store.get(c, s.name);
        if (existing && existing.source !== 'playbook') {
          throw conflict('owned_elsewhere', `${s.field}: schedule '${s.name}' is declared by ${existing.source}; rename the playbook's schedule or remove that one there`, {
            source: existing.source, field: s.field,
          });
        }
        await store.upsert(c, { name: s.name, source: 'playbook', ...s.v, next_run: this.firstRun(s.v) });
      }
      await store.removePlaybookSchedules(c, path, specs.map((s) => s.name));
      return specs.map((s) => s.name);
    };
    return client ? sync(client) : this.db.tx(sync);
  }

  /** The first tick after now (suspended schedules keep one too; the ticker ignores them). */
  private firstRun(v: { cron: string; timezone: string }): Date | null {
    return nextTick(parseCron(v.cron, v.timezone), new Date(this.now()));
  }
}

/**
 * `field`: where the name came from — `name` of a PUT, or `schedules[i].name` of a playbook, whose
 * schedule is named `<path>:<name>`: a path of up to 512 characters can make that too long.
 */
function checkName(name: string, field = 'name'): void {
  if (typeof name === 'string' && SCHEDULE_NAME.test(name)) return;
  const declared = field === 'name' ? '' : `${field}: `;
  const length = typeof name === 'string' && name.length > 253 ? ` (it is ${name.length}${declared ? ', <path>:<name> with / as .' : ''})` : '';
  throw badRequest(`${declared}schedule name '${name}' is invalid: letters, digits and _ . : @ + -, starting with a letter or digit, at most 253${length}`, { field });
}
