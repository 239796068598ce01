/** Schedules: cron triggers of playbooks (PUT/GET/DELETE /api/schedules/{name}, ticks). */
import { JsonObject, LimitQuery, NullableId, NullableInteger, NullableString, StringEnum, Type, type Static } from './common.js';
import { SCHEDULE_TICKS_LIMIT } from './limits.js';

export { SCHEDULE_TICKS_LIMIT };

export const CONCURRENCY_POLICIES = ['Allow', 'Forbid', 'Replace'] as const;
export const MISSED_RUN_POLICIES = ['RunOnce', 'Skip'] as const;
export const SCHEDULE_SOURCES = ['api', 'playbook', 'kubernetes'] as const;
/** A schedule's name: also the key a playbook's declared schedule gets (`<path>:<name>`). */
export const SCHEDULE_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,252}$';

export const ConcurrencyPolicy = StringEnum(CONCURRENCY_POLICIES);
export type ConcurrencyPolicy = Static<typeof ConcurrencyPolicy>;
export const MissedRunPolicy = StringEnum(MISSED_RUN_POLICIES);
export type MissedRunPolicy = Static<typeof MissedRunPolicy>;
export const ScheduleSource = StringEnum(SCHEDULE_SOURCES);
export type ScheduleSource = Static<typeof ScheduleSource>;

export const ScheduleParams = Type.Object({
  name: Type.String({
    minLength: 1,
    maxLength: 253,
    pattern: SCHEDULE_NAME_PATTERN,
    'x-message': 'must be letters, digits and _ . : @ + -, starting with a letter or digit, at most 253',
  }),
});

/** PUT /api/schedules/{name} — create or replace. */
export const ScheduleSpec = Type.Object({
  /** Cron with optional seconds: 5 fields (minute…) or 6 (second minute hour day month weekday). */
  cron: Type.String({ description: '5 fields (minute hour day month weekday) or 6 (with seconds first)' }),
  /** IANA time zone of the cron (default UTC). */
  timezone: Type.Optional(Type.String({ description: 'IANA time zone, default UTC' })),
  /** Catalog path of the playbook to start. */
  path: Type.String({ description: 'catalog path of the playbook' }),
  /** Pinned catalog version; absent or null: the latest at each tick. */
  version: Type.Optional(NullableInteger({ minimum: 1, description: 'pinned version; null: the latest at each tick' })),
  payload: Type.Optional(JsonObject()),
  /** Allow (default): start regardless; Forbid: skip the tick while one runs; Replace: cancel the running ones, then start. */
  concurrency_policy: Type.Optional(StringEnum(CONCURRENCY_POLICIES, { default: 'Allow' })),
  /** Ticks missed (server down, or later than starting_deadline_seconds): RunOnce (default) starts one execution for the latest; Skip starts none. */
  missed_runs: Type.Optional(StringEnum(MISSED_RUN_POLICIES, { default: 'RunOnce' })),
  /** A tick not started within this many seconds of its time counts as missed (default: no limit). */
  starting_deadline_seconds: Type.Optional(NullableInteger({ minimum: 1 })),
  suspend: Type.Optional(Type.Boolean({ default: false })),
  /** Who declares it (default api); the operator sends kubernetes. A schedule is changed only by its source. */
  source: Type.Optional(Type.Unsafe<ScheduleSource>({ type: 'string', enum: ['api', 'kubernetes'], default: 'api' })),
});
export type ScheduleSpec = Static<typeof ScheduleSpec>;

/**
 * A schedule as served. Its response schema lists no `required` (it is the one of the routes
 * before the contract; the service always fills every field).
 */
export const ScheduleView = Type.Object({
  name: Type.String(),
  source: ScheduleSource,
  cron: Type.String(),
  timezone: Type.String(),
  path: Type.String(),
  version: NullableInteger(),
  payload: JsonObject(),
  concurrency_policy: ConcurrencyPolicy,
  missed_runs: MissedRunPolicy,
  starting_deadline_seconds: NullableInteger(),
  suspend: Type.Boolean(),
  next_run: NullableString(),
  last_run: NullableString(),
  last_execution_id: NullableId(),
  created_at: Type.String(),
  updated_at: Type.String(),
});
export type ScheduleView = Static<typeof ScheduleView>;

export const ScheduleList = Type.Object({ schedules: Type.Array(ScheduleView), count: Type.Integer() });
export type ScheduleList = Static<typeof ScheduleList>;

export const ScheduleListQuery = Type.Object({ path: Type.Optional(Type.String()), source: Type.Optional(ScheduleSource) });
export const ScheduleSourceQuery = Type.Object({ source: Type.Optional(ScheduleSource) });

export const ScheduleTickView = Type.Object({
  tick: Type.String(),
  outcome: StringEnum(['started', 'skipped', 'missed', 'failed']),
  reason: NullableString(),
  execution_id: NullableId(),
  created_at: Type.String(),
});
export type ScheduleTickView = Static<typeof ScheduleTickView>;
/** GET /api/schedules/{name}/ticks — newest first. */
export const ScheduleTicks = Type.Object({ name: Type.String(), ticks: Type.Array(ScheduleTickView) });
export type ScheduleTicks = Static<typeof ScheduleTicks>;
export const ScheduleTicksQuery = Type.Object({ limit: LimitQuery(SCHEDULE_TICKS_LIMIT) });

export const ScheduleDeleted = Type.Object({ name: Type.String(), deleted: Type.Boolean() });
