/**
 * Execution variable endpoints (spec "Variables"):
 *   GET    /api/vars/{execution_id}             → {execution_id, variables: {name: {value, type, source_step, created_at, accessed_at, access_count}}, count}; no access tracking
 *   GET    /api/vars/{execution_id}/{var_name}  → {execution_id, var_name, value, type, ...}; access_count + 1; 404 when unknown
 *   POST   /api/vars/{execution_id}             {variables, var_type?, source_step?} → {execution_id, variables_set, var_names};
 *                                                404 for an unknown execution, 409 `execution_completed` for a completed one
 *                                                (its variables went when it completed; failed and cancelled ones stay writable)
 *   DELETE /api/vars/{execution_id}/{var_name}  → {execution_id, var_name, deleted} (200; deleted false when there was none)
 */
import type { FastifyInstance } from 'fastify';
import type {} from '@fastify/swagger'; // route schema fields tags/summary for the OpenAPI document
import { Ref, VarDeleteResponse, VarParams, VarRead, VarsExecutionParams, VarsList, VarsSetBody, VarsSetResponse } from '../../common/contract/index.js';
import { errors } from './schemas.js';
import { notFound } from '../errors.js';
import type { ExecutionService } from '../services.js';
import type { AppPlugin } from './context.js';
import type { VarsService } from '../secrets/vars.js';

export interface VarsPluginOptions {
  vars?: VarsService;
}

export async function varsPlugin(app: FastifyInstance, opts: VarsPluginOptions & { executions?: Pick<ExecutionService, 'get'> }): Promise<void> {
  const svc = opts.vars;
  if (!svc) return;
  // Variables belong to an execution: setting them on one that does not exist is a 404, not an
  // orphan row. (Suites that mount vars without the execution service skip the check.)
  const requireExecution = async (id: string) => {
    if (opts.executions && !(await opts.executions.get(id))) throw notFound(`execution ${id} not found`);
  };
  const tags = ['vars'];

  app.get<{ Params: { execution_id: string } }>('/api/vars/:execution_id', {
    schema: {
      tags,
      summary: 'All variables of an execution (does not change access tracking)',
      params: VarsExecutionParams,
      response: {
        200: Ref(VarsList),
        ...errors(400, 404),
      },
    },
  }, async (req) => {
    const page = await svc.list(req.params.execution_id);
    // none: an execution without variables, or none at all (a mistyped id is a 404, not an empty list)
    if (page.count === 0) await requireExecution(req.params.execution_id);
    return page;
  });

  app.get<{ Params: { execution_id: string; var_name: string } }>('/api/vars/:execution_id/:var_name', {
    schema: {
      tags,
      summary: 'One variable (increments access_count, updates accessed_at)',
      params: VarParams,
      response: {
        200: Ref(VarRead),
        ...errors(400, 404),
      },
    },
  }, async (req) => svc.get(req.params.execution_id, req.params.var_name));

  app.post<{ Params: { execution_id: string }; Body: VarsSetBody }>('/api/vars/:execution_id', {
    schema: {
      tags,
      summary: 'Set variables (upsert on execution_id + var_name; created_at kept, accessed_at refreshed)',
      params: VarsExecutionParams,
      body: VarsSetBody,
      response: {
        200: Ref(VarsSetResponse),
        ...errors(400, 404, 409),
      },
    },
  }, async (req) => {
    await requireExecution(req.params.execution_id);
    return svc.set(req.params.execution_id, req.body);
  });

  app.delete<{ Params: { execution_id: string; var_name: string } }>('/api/vars/:execution_id/:var_name', {
    schema: {
      tags,
      summary: 'Delete one variable',
      params: VarParams,
      response: { 200: Ref(VarDeleteResponse), ...errors(400) },
    },
  }, async (req) => svc.remove(req.params.execution_id, req.params.var_name));
}

export const varsAppPlugin: AppPlugin = {
  name: 'vars',
  tag: { name: 'vars', description: 'Execution variables: the vars block results and values set through the API' },
  routes: (app, ctx) => varsPlugin(app, ctx.deps),
};

export default varsPlugin;
