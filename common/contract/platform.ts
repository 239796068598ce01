/** Probes (/health, /readyz, /healthz) and the direct SQL endpoint. */
import { JsonObject, StringEnum, Type, type Static } from './common.js';

export const HealthCheck = Type.Object({
  status: StringEnum(['ok', 'error', 'skipped']),
  latency_ms: Type.Optional(Type.Number()),
  error: Type.Optional(Type.String()),
});
export type HealthCheck = Static<typeof HealthCheck>;

/**
 * GET /health (also /readyz; /healthz is liveness only, with no checks). `status` is `degraded`
 * when a check fails; the HTTP status is 503 only when the database is unreachable.
 */
export const HealthResponse = Type.Object({
  status: StringEnum(['ok', 'degraded']),
  version: Type.String(),
  uptime_seconds: Type.Number(),
  /** `database` and `broker` (broker `skipped` when the server has no broker probe). */
  checks: Type.Unsafe<Record<string, HealthCheck>>({ type: 'object', additionalProperties: HealthCheck }),
}, { $id: 'HealthResponse' });
export type HealthResponse = Static<typeof HealthResponse>;

/** POST /api/postgres/execute: runs in one transaction with `SET LOCAL search_path` to schema. */
export const PostgresExecuteRequest = Type.Object({
  query: Type.String({ minLength: 1, maxLength: 1_000_000, description: 'one SQL statement, run read-only' }),
  schema: Type.Optional(Type.String({ minLength: 1, maxLength: 63, description: 'search_path for the transaction' })),
});
export type PostgresExecuteRequest = Static<typeof PostgresExecuteRequest>;
export const PostgresExecuteResponse = Type.Object({ status: StringEnum(['ok']), result: Type.Array(JsonObject()) });
export type PostgresExecuteResponse = Static<typeof PostgresExecuteResponse>;

export const platformSchemas = [HealthResponse];
