/**
 * The ExecutionHooks implementation (server/services.ts): called by the execution service inside
 * an execution's transaction, so variables and keychain cleanup commit with the event log.
 */
import type pg from 'pg';
import type { ExecutionHooks, TerminalExecution } from '../services.js';
import type { BoundStatement } from '../pipeline.js';
import type { Id } from '../../common/protocol.js';
import type { JsonObject } from '../../playbook/types.js';
import { idLiteral } from '../store/sql.js';
import * as vars from '../store/vars.js';
import * as keychain from '../store/keychain.js';
import * as credentials from '../store/credentials.js';
import { checkVarNames } from './vars.js';
import { type Logger, stderrLogger } from '../../common/logger.js';

/**
 * Terminal status: drop the execution's variables, its local keychain entries, its
 * execution-scoped authentication cache, and — when it is the root — the tree's shared entries.
 * Each statement by its name (a bound one is prepared under it) and its SQL for an id literal.
 */
function terminalCleanup(execution: TerminalExecution): Array<[name: string, sql: (id: string) => string]> {
  const out: Array<[string, (id: string) => string]> = [
    ['playflow.keychain_local_drop', keychain.deleteLocalEntriesSql],
    ['playflow.auth_cache_drop', credentials.deleteAuthCacheForExecutionSql],
  ];
  // A failed or cancelled execution may be retried in place: its variables stay for the retry
  // (they go when it completes, or with the execution when retention deletes it).
  if (execution.status !== 'failed' && execution.status !== 'cancelled') out.push(['playflow.vars_drop', vars.deleteVarsOfExecutionSql]);
  if (String(execution.root_execution_id) === String(execution.execution_id)) out.push(['playflow.keychain_shared_drop', keychain.deleteSharedEntriesSql]);
  return out;
}

/** The cleanup with the id inlined, `;`-separated (one simple query). */
function terminalSql(execution: TerminalExecution): string {
  const lit = idLiteral(String(execution.execution_id));
  return terminalCleanup(execution).map(([, sql]) => sql(lit)).join('; ');
}

/** The cleanup as bound statements, for an end pipelined with its write. */
function terminalStatements(execution: TerminalExecution): BoundStatement[] {
  const id = String(execution.execution_id);
  return terminalCleanup(execution).map(([name, sql]) => ({ name, text: sql('$1::bigint'), values: [id] }));
}

export function createSecretsHooks(opts: { logger?: Logger } = {}): ExecutionHooks {
  const log = opts.logger ?? stderrLogger;
  return {
    /** vars block results: var_type `step_result`, source_step = the step. Over-long names are skipped and logged. */
    async onVarsSet(client: pg.PoolClient, executionId: Id, variables: JsonObject, sourceStep: string) {
      const ok: JsonObject = {};
      for (const [name, value] of Object.entries(variables)) {
        try {
          checkVarNames([name]);
          ok[name] = value;
        } catch {
          log.warn({ execution_id: String(executionId), step: sourceStep, var_name: name.slice(0, 64) }, `Failed to render var '${name.slice(0, 64)}': name is empty or longer than 255 characters`);
        }
      }
      await vars.upsertVars(client, String(executionId), ok, 'step_result', sourceStep, 'engine');
    },

    /** Variables set through the API, of any var_type (the engine folds its own from the log; vars.API_VAR_ROW). */
    async loadVars(client: pg.PoolClient, executionId: Id): Promise<JsonObject> {
      const { rows } = await client.query<vars.ApiVarRow>(vars.apiVarsSql('$1'), [String(executionId)]);
      return vars.apiVarsObject(rows);
    },

    loadVarsSql(executionId: string) {
      return { sql: vars.API_VARS_STATEMENT.execute(idLiteral(executionId)), prepare: [vars.API_VARS_STATEMENT] };
    },

    /** The cleanup of terminalSql, in one round trip. */
    async onExecutionTerminal(client: pg.PoolClient, execution: TerminalExecution) {
      await client.query(terminalSql(execution));
    },

    onExecutionTerminalSql: terminalSql,
    onExecutionTerminalStatements: terminalStatements,
  };
}

/** Default instance for ServerDeps wiring. */
export const secretsHooks: ExecutionHooks = createSecretsHooks();
