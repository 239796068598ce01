/** Queue statistics and the runtime registry of servers and worker pools. */
import { POOL_NAME_PATTERN } from '../../playbook/schema.js';
import { JsonObject, StringEnum, Timestamp, Type, type Static } from './common.js';

/** GET /api/queue/stats (the operator's WorkerPool controller reads it). */
export const QueueStats = Type.Object({
  queued: Type.Integer(),
  leased: Type.Integer(),
  delayed: Type.Integer(),
  oldest_age_seconds: Type.Number(),
}, { $id: 'QueueStats' });
export type QueueStats = Static<typeof QueueStats>;

export const QueueStatsQuery = Type.Object({
  pool: Type.Optional(Type.String({ pattern: POOL_NAME_PATTERN, description: 'only this worker pool (default: all pools)' })),
});

/** GET /api/queue/throughput: commands that finished (done or failed) per minute. */
export const QueueThroughput = Type.Object({
  minutes: Type.Array(Type.Object({
    minute: Timestamp({ description: 'start of the minute' }),
    done: Type.Integer({ description: 'commands finished with an outcome' }),
    failed: Type.Integer({ description: 'commands that failed for good' }),
  })),
}, { $id: 'QueueThroughput' });
export type QueueThroughput = Static<typeof QueueThroughput>;

export const QueueThroughputQuery = Type.Object({
  minutes: Type.Integer({ minimum: 1, maximum: 1440, default: 15, description: 'window, default 15' }),
});

const RuntimeKind = StringEnum(['server', 'worker']);
const RuntimeName = Type.String({ minLength: 1, maxLength: 256 });

/** POST /api/runtime/register, /api/runtime/heartbeat; GET /api/runtime. */
export const RuntimeRegisterRequest = Type.Object({ kind: RuntimeKind, name: RuntimeName, info: Type.Optional(JsonObject()) });
export type RuntimeRegisterRequest = Static<typeof RuntimeRegisterRequest>;
export const RuntimeHeartbeatRequest = Type.Object({ kind: RuntimeKind, name: RuntimeName });
export type RuntimeHeartbeatRequest = Static<typeof RuntimeHeartbeatRequest>;

export const RuntimeEntry = Type.Object({
  kind: RuntimeKind,
  name: Type.String(),
  info: Type.Optional(JsonObject()),
  registered_at: Timestamp(),
  last_heartbeat: Timestamp(),
  /** Seconds since last_heartbeat, by the database's clock (a browser's may be off). */
  heartbeat_age_seconds: Type.Number({ minimum: 0 }),
  /** Heartbeat within RUNTIME_LIVE_SECONDS: the process is running; false: it stopped or lost the server. */
  live: Type.Boolean(),
});
export type RuntimeEntry = Static<typeof RuntimeEntry>;
export const RuntimeList = Type.Object({ runtimes: Type.Array(RuntimeEntry), count: Type.Integer() }, { $id: 'RuntimeList' });
export type RuntimeList = Static<typeof RuntimeList>;

export const queueSchemas = [QueueStats, QueueThroughput, RuntimeList];
