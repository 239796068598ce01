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
import { errors } from './schemas.js';
import { notFound } from '../errors.js';
import type { ExecutionService } from '../services.js';
import type { AppPlugin } from './context.js';
import { VAR_TYPES, type VarsService } from '../secrets/vars.js';

const execParams = { type: 'object', required: ['execution_id'], properties: { execution_id: { type: 'string', pattern: '^[0-9]{1,19}$' } } };
const varParams = {
  type: 'object',
  required: ['execution_id', 'var_name'],
  properties: { execution_id: { type: 'string', pattern: '^[0-9]{1,19}$' }, var_name: { type: 'string' } },
};
const varView = {
  type: 'object',
  properties: {
    value: {}, type: { type: 'string' }, source_step: { type: ['string', 'null'] },
    created_at: { type: 'string' }, accessed_at: { type: 'string' }, access_count: { type: 'integer' },
  },
};

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
      params: execParams,
      response: {
        200: { type: 'object', properties: { execution_id: { type: 'string' }, variables: { type: 'object', additionalProperties: varView }, count: { type: 'integer' } } },
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
      params: varParams,
      response: {
        200: { type: 'object', properties: { execution_id: { type: 'string' }, var_name: { type: 'string' }, ...varView.properties } },
        ...errors(400, 404),
      },
    },
  }, async (req) => svc.get(req.params.execution_id, req.params.var_name));

  app.post<{ Params: { execution_id: string }; Body: Record<string, unknown> }>('/api/vars/:execution_id', {
    schema: {
      tags,
      summary: 'Set variables (upsert on execution_id + var_name; created_at kept, accessed_at refreshed)',
      params: execParams,
      body: {
        type: 'object',
        required: ['variables'],
        properties: {
          variables: { type: 'object', additionalProperties: true, description: 'name (≤ 255 characters) → any JSON value' },
          var_type: { type: 'string', enum: [...VAR_TYPES], default: 'user_defined' },
          source_step: { type: ['string', 'null'] },
        },
      },
      response: {
        200: { type: 'object', properties: { execution_id: { type: 'string' }, variables_set: { type: 'integer' }, var_names: { type: 'array', items: { type: 'string' } } } },
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
      params: varParams,
      response: { 200: { type: 'object', properties: { execution_id: { type: 'string' }, var_name: { type: 'string' }, deleted: { type: 'boolean' } } } },
    },
  }, async (req) => svc.remove(req.params.execution_id, req.params.var_name));
}

export const varsAppPlugin: AppPlugin = {
  name: 'vars',
  tag: { name: 'vars', description: 'Execution variables: the vars block results and values set through the API' },
  routes: (app, ctx) => varsPlugin(app, ctx.deps),
};

export default varsPlugin;
