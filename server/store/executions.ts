/** SQL of the execution table. */
import type { Json, JsonObject } from '../../playbook/types.js';
import type { ExecutionStatus, StepSummary } from '../engine/contract.js';
import type { ExecutionRecord } from '../services.js';
import { iso, type Queryable } from './sql.js';

export interface ExecutionRow {
  execution_id: string;
  catalog_id: string;
  path: string;
  version: number;
  parent_execution_id: string | null;
  parent_command_id: number | null;
  parent_queue_id: string | null;
  root_execution_id: string;
  status: ExecutionStatus;
  payload: JsonObject;
  result: Json | null;
  error: Json | null;
  steps: Record<string, StepSummary>;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

export function toRecord(r: ExecutionRow): ExecutionRecord {
  return {
    execution_id: r.execution_id,
    path: r.path,
    version: r.version,
    catalog_id: r.catalog_id,
    parent_execution_id: r.parent_execution_id,
    root_execution_id: r.root_execution_id,
    status: r.status,
    payload: r.payload,
    result: r.result,
    error: r.error,
    steps: r.steps ?? {},
    created_at: iso(r.created_at)!,
    updated_at: iso(r.updated_at)!,
    finished_at: iso(r.finished_at),
  };
}

export async function get(q: Queryable, executionId: string): Promise<ExecutionRow | null> {
  const { rows } = await q.query<ExecutionRow>('SELECT * FROM execution WHERE execution_id = $1', [executionId]);
  return rows[0] ?? null;
}

export async function insert(q: Queryable, e: {
  catalog_id: string; path: string; version: number; payload: JsonObject;
  parent_execution_id: string | null; parent_command_id: number | null; parent_queue_id: string | null; root_execution_id: string | null;
}): Promise<ExecutionRow> {
  const { rows } = await q.query<ExecutionRow>(
    `WITH id AS (SELECT nextval(pg_get_serial_sequence('execution', 'execution_id')) AS v)
     INSERT INTO execution (execution_id, catalog_id, path, version, payload, parent_execution_id, parent_command_id, parent_queue_id, root_execution_id)
     SELECT id.v, $1, $2, $3, $4, $5, $6, $7, COALESCE($8::bigint, id.v) FROM id
     RETURNING *`,
    [e.catalog_id, e.path, e.version, JSON.stringify(e.payload), e.parent_execution_id, e.parent_command_id, e.parent_queue_id, e.root_execution_id]);
  return rows[0];
}

export async function findChild(q: Queryable, parentExecutionId: string, parentCommandId: number): Promise<ExecutionRow | null> {
  const { rows } = await q.query<ExecutionRow>(
    'SELECT * FROM execution WHERE parent_execution_id = $1 AND parent_command_id = $2', [parentExecutionId, parentCommandId]);
  return rows[0] ?? null;
}

export async function list(q: Queryable, opts: { status?: ExecutionStatus; path?: string; limit: number; offset: number }): Promise<ExecutionRow[]> {
  const params: unknown[] = [opts.limit, opts.offset];
  const where: string[] = [];
  if (opts.status) {
    params.push(opts.status);
    where.push(`status = $${params.length}`);
  }
  if (opts.path) {
    params.push(opts.path);
    where.push(`path = $${params.length}`);
  }
  const { rows } = await q.query<ExecutionRow>(
    `SELECT * FROM execution ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY execution_id DESC LIMIT $1 OFFSET $2`, params);
  return rows;
}

/** Non-terminal children of terminal parents (a parent's end cancels what it no longer waits for). */
export async function orphanedChildren(q: Queryable, limit: number): Promise<string[]> {
  const { rows } = await q.query<{ execution_id: string }>(
    `SELECT c.execution_id FROM execution c JOIN execution p ON p.execution_id = c.parent_execution_id
      WHERE c.status IN ('started', 'running') AND p.status IN ('completed', 'failed', 'cancelled')
      ORDER BY c.execution_id LIMIT $1`, [limit]);
  return rows.map((r) => r.execution_id);
}

export async function openChildren(q: Queryable, parentExecutionId: string): Promise<string[]> {
  const { rows } = await q.query<{ execution_id: string }>(
    `SELECT execution_id FROM execution WHERE parent_execution_id = $1 AND status IN ('started', 'running') ORDER BY execution_id`, [parentExecutionId]);
  return rows.map((r) => r.execution_id);
}
