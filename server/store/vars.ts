/**
 * SQL for the `vars` table (migration 102): primary key (execution_id, var_name); writes upsert,
 * preserve created_at and refresh accessed_at.
 */
import type { Json, JsonObject } from '../../playbook/types.js';
import { sessionStatement } from '../db.js';
import type { Queryable } from './credentials.js';

export type VarType = 'user_defined' | 'step_result' | 'computed' | 'iterator_state';

export interface VarRow {
  execution_id: string;
  var_name: string;
  var_type: VarType;
  var_value: unknown;
  source_step: string | null;
  access_count: number;
  created_at: Date;
  accessed_at: Date;
}

export interface ApiVarRow {
  var_name: string;
  var_value: Json;
}

/** Who wrote a row (migration 320): the engine's vars block or the vars API. */
export type VarWriter = 'engine' | 'api';

/**
 * The rows the engine did not write: the API variables templates see on top of the engine's own
 * (which it folds from the event log). The API's are marked `written_by = 'api'` whatever their
 * var_type (the spec allows POSTing `step_result`); a row without the mark comes from before
 * migration 320 or from a server of the previous version, and its var_type decides as it did
 * then. The loader (apiVarsSql) and the decision guard (migration 340's playflow_decision_current,
 * which repeats this text; a test holds them equal) must select exactly these rows.
 */
export const API_VAR_ROW = `(var_type <> 'step_result' OR written_by = 'api')`;

/**
 * The API variables (API_VAR_ROW) of the execution `idExpr`: a parameter (`$1`) or a checked
 * decimal literal (the statement sent with BEGIN).
 */
export function apiVarsSql(idExpr: string): string {
  return `SELECT var_name, var_value FROM vars WHERE execution_id = ${idExpr} AND ${API_VAR_ROW} ORDER BY var_name`;
}

/** apiVarsSql as a session statement (db.ts). */
export const API_VARS_STATEMENT = sessionStatement('playflow_api_vars', ['bigint'], apiVarsSql('$1'));

export function apiVarsObject(rows: ApiVarRow[]): JsonObject {
  const out: JsonObject = {};
  for (const r of rows) out[r.var_name] = r.var_value;
  return out;
}

const COLS = 'execution_id::text AS execution_id, var_name, var_type, var_value, source_step, access_count, created_at, accessed_at';

/**
 * Upserts every variable in one statement; returns the names written, in input order. The last
 * writer owns a row: `writtenBy` replaces the mark of what it overwrites.
 */
export async function upsertVars(
  db: Queryable,
  executionId: string,
  variables: Record<string, unknown>,
  varType: VarType,
  sourceStep: string | null,
  writtenBy: VarWriter,
): Promise<string[]> {
  const names = Object.keys(variables);
  if (names.length === 0) return [];
  const values = names.map((n) => JSON.stringify(variables[n] === undefined ? null : variables[n]));
  await db.query(
    `INSERT INTO vars (execution_id, var_name, var_type, var_value, source_step, written_by)
     SELECT $1, n, $2, v::jsonb, $3, $6 FROM unnest($4::text[], $5::text[]) AS t(n, v)
     ON CONFLICT (execution_id, var_name) DO UPDATE SET
       var_type = EXCLUDED.var_type, var_value = EXCLUDED.var_value, source_step = EXCLUDED.source_step,
       written_by = EXCLUDED.written_by, accessed_at = now()`,
    [executionId, varType, sourceStep, names, values, writtenBy],
  );
  return names;
}

/** All variables of an execution; does not touch access tracking. */
export async function listVars(db: Queryable, executionId: string): Promise<VarRow[]> {
  const { rows } = await db.query<VarRow>(`SELECT ${COLS} FROM vars WHERE execution_id = $1 ORDER BY var_name`, [executionId]);
  return rows;
}

/** One variable; counts the access (access_count + 1, accessed_at now). */
export async function readVar(db: Queryable, executionId: string, varName: string): Promise<VarRow | null> {
  const { rows } = await db.query<VarRow>(
    `UPDATE vars SET access_count = access_count + 1, accessed_at = now()
     WHERE execution_id = $1 AND var_name = $2 RETURNING ${COLS}`,
    [executionId, varName],
  );
  return rows[0] ?? null;
}

export async function deleteVar(db: Queryable, executionId: string, varName: string): Promise<boolean> {
  const r = await db.query('DELETE FROM vars WHERE execution_id = $1 AND var_name = $2', [executionId, varName]);
  return (r.rowCount ?? 0) > 0;
}

/** Drops an execution's variables; `id` an idLiteral (sql.ts). */
export const deleteVarsOfExecutionSql = (id: string) => `DELETE FROM vars WHERE execution_id = ${id}`;

