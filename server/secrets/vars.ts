/**
 * Execution variables service (spec "Variable" and the /api/vars endpoints).
 * GET of all variables never changes access tracking; GET of one counts the access.
 */
import { badRequest, notFound } from '../errors.js';
import type { Db } from '../db.js';
import type { Json } from '../../playbook/types.js';
import * as store from '../store/vars.js';
import { iso, isPlainObject, parseId, writeUnlessCompleted } from './common.js';
import { charLength } from '../../common/char-length.js';
import { VAR_TYPES, type VarType, type VarView, type VarsList, type VarRead, type VarsSetBody, type VarsSetResponse, type VarDeleteResponse, type Unchecked } from '../../common/secrets.js';
export { VAR_TYPES, type VarType, type VarView, type VarsList, type VarRead, type VarsSetBody, type VarsSetResponse, type VarDeleteResponse };

export const MAX_VAR_NAME = 255;

const view = (r: store.VarRow): VarView => ({
  value: r.var_value as Json,
  type: r.var_type,
  source_step: r.source_step,
  created_at: iso(r.created_at)!,
  accessed_at: iso(r.accessed_at)!,
  access_count: r.access_count,
});

/** Checks names (non-empty, at most 255 characters); a bad one is a 400 naming it. */
export function checkVarNames(names: string[]): void {
  for (const n of names) {
    if (n.length === 0) throw badRequest('Variable name must not be empty', { var_name: n });
    if (charLength(n) > MAX_VAR_NAME) throw badRequest(`Variable name '${n}' exceeds ${MAX_VAR_NAME} characters`, { var_name: n });
  }
}

export class VarsService {
  constructor(private readonly db: Pick<Db, 'pool'>) {}

  async list(executionIdIn: unknown): Promise<VarsList> {
    const executionId = parseId(executionIdIn, 'execution_id');
    const rows = await store.listVars(this.db.pool, executionId);
    const variables: Record<string, VarView> = {};
    for (const r of rows) variables[r.var_name] = view(r);
    return { execution_id: executionId, variables, count: rows.length };
  }

  async get(executionIdIn: unknown, varName: string): Promise<VarRead> {
    const executionId = parseId(executionIdIn, 'execution_id');
    const r = await store.readVar(this.db.pool, executionId, varName);
    if (!r) throw notFound(`variable '${varName}' not found in execution ${executionId}`);
    return { execution_id: executionId, var_name: varName, ...view(r) };
  }

  async set(executionIdIn: unknown, body: Unchecked<VarsSetBody>): Promise<VarsSetResponse> {
    const executionId = parseId(executionIdIn, 'execution_id');
    if (!isPlainObject(body) || !isPlainObject(body.variables)) throw badRequest('variables is required (an object of name to value)', { field: 'variables' });
    const varType = body.var_type ?? 'user_defined';
    if (typeof varType !== 'string' || !(VAR_TYPES as readonly string[]).includes(varType)) {
      throw badRequest(`var_type must be one of ${VAR_TYPES.join(', ')}`, { field: 'var_type' });
    }
    const sourceStep = body.source_step ?? null;
    if (sourceStep !== null && typeof sourceStep !== 'string') throw badRequest('source_step must be a string or null');
    const variables = body.variables as Record<string, unknown>;
    checkVarNames(Object.keys(variables));
    const names = await writeUnlessCompleted(this.db, executionId, 'variables',
      (client) => store.upsertVars(client, executionId, variables, varType as VarType, sourceStep, 'api'));
    return { execution_id: executionId, variables_set: names.length, var_names: names };
  }

  async remove(executionIdIn: unknown, varName: string): Promise<VarDeleteResponse> {
    const executionId = parseId(executionIdIn, 'execution_id');
    const deleted = await store.deleteVar(this.db.pool, executionId, varName);
    return { execution_id: executionId, var_name: varName, deleted };
  }
}
