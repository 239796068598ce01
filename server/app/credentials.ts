/**
 * Credential endpoints (spec "Credentials"):
 *   POST   /api/credentials                     create or update by name → 201 (created) / 200 (updated)
 *   GET    /api/credentials                     list: ?type ?tag ?q (name/description) ?limit ?offset → {credentials, count, total, limit, offset}
 *   GET    /api/credentials/{identifier}        id or name; metadata, + data with ?include_data=true
 *   DELETE /api/credentials/{identifier}        → {id, name, deleted: true}; 404 when unknown
 *   GET    /api/credential/{credential_key}     worker read: {credential_id, credential_key, credential_type, data, created_at, updated_at}
 * Validation failure of data against the credential's schema: 400
 * `{message: 'Credential validation failed', errors: [...], error: {code: 'validation_failed', ...}}`.
 * Request and response bodies are never logged by these routes.
 */
import type { FastifyInstance } from 'fastify';
import type {} from '@fastify/swagger'; // route schema fields tags/summary for the OpenAPI document
import { errors } from './schemas.js';
import type { AppPlugin } from './context.js';
import { CREDENTIAL_TYPES, CredentialValidationError, type CredentialService } from '../secrets/credentials.js';

const idSchema = { anyOf: [{ type: 'string', pattern: '^[0-9]+$' }, { type: 'integer', minimum: 0 }] };
const jsonObject = { type: 'object', additionalProperties: true };
const schemaDef = {
  type: 'object',
  description: 'Validation schema for data: fields (allowed), required, types (field → string|integer|boolean|number|array|object), description',
  additionalProperties: true,
  properties: {
    fields: { type: 'array', items: { type: 'string' } },
    required: { type: 'array', items: { type: 'string' } },
    types: { type: 'object', additionalProperties: { type: 'string' } },
    description: { type: 'string' },
  },
};
const meta = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    type: { type: 'string' },
    description: { type: ['string', 'null'] },
    tags: { type: 'array', items: { type: 'string' } },
    meta: jsonObject,
    schema: { ...jsonObject, nullable: true },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
};
const validationFailed = {
  type: 'object',
  description: 'Bad input; schema validation failures carry message "Credential validation failed" and errors[]',
  properties: {
    error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' }, details: {} } },
    message: { type: 'string' },
    errors: { type: 'array', items: { type: 'string' } },
  },
};

export interface CredentialsPluginOptions {
  credentials?: CredentialService;
}

export async function credentialsPlugin(app: FastifyInstance, opts: CredentialsPluginOptions): Promise<void> {
  const svc = opts.credentials;
  if (!svc) return;
  const tags = ['credentials'];

  app.post<{ Body: Record<string, unknown> }>('/api/credentials', {
    schema: {
      tags,
      summary: 'Create or update a credential by name (data is encrypted at rest)',
      body: {
        type: 'object',
        required: ['name', 'type', 'data'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 255 },
          type: { type: 'string', enum: [...CREDENTIAL_TYPES] },
          description: { type: 'string' },
          data: jsonObject,
          schema: schemaDef,
          meta: jsonObject,
          tags: { type: 'array', items: { type: 'string' } },
        },
      },
      response: { 200: meta, 201: meta, 400: validationFailed },
    },
  }, async (req, reply) => {
    try {
      const { credential, created } = await svc.upsert(req.body);
      return reply.code(created ? 201 : 200).send(credential);
    } catch (err) {
      if (err instanceof CredentialValidationError) return reply.code(400).send(err.body());
      throw err;
    }
  });

  app.get<{ Querystring: { type?: string; tag?: string; q?: string; limit?: number; offset?: number } }>('/api/credentials', {
    schema: {
      tags,
      summary: 'List credentials (metadata only, never data)',
      querystring: {
        type: 'object',
        properties: {
          type: { type: 'string' },
          tag: { type: 'string' },
          q: { type: 'string', description: 'text search on name and description' },
          limit: { type: 'integer', minimum: 1, maximum: 1000, default: 50 },
          offset: { type: 'integer', minimum: 0, default: 0 },
        },
      },
      response: {
        200: { type: 'object', properties: { credentials: { type: 'array', items: meta }, count: { type: 'integer' }, total: { type: 'integer' }, limit: { type: 'integer' }, offset: { type: 'integer' } } },
      },
    },
  }, async (req) => svc.list(req.query));

  app.get<{ Params: { identifier: string }; Querystring: { include_data?: boolean; execution_id?: string; parent_execution_id?: string } }>(
    '/api/credentials/:identifier',
    {
      schema: {
        tags,
        summary: 'One credential by id or name; decrypted data only with include_data=true',
        params: { type: 'object', properties: { identifier: { type: 'string' } } },
        querystring: {
          type: 'object',
          properties: {
            include_data: { type: 'boolean', default: false },
            execution_id: idSchema,
            parent_execution_id: idSchema,
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              ...meta.properties,
              data: jsonObject,
              cache: {
                type: 'object',
                properties: {
                  cache_key: { type: 'string' }, cache_type: { type: 'string' }, scope_type: { type: 'string' },
                  execution_id: { type: ['string', 'null'] }, access_count: { type: 'integer' },
                  expires_at: { type: 'string' }, accessed_at: { type: 'string' },
                },
              },
            },
          },
          ...errors(400, 404),
        },
      },
    },
    async (req) => svc.get(req.params.identifier, req.query),
  );

  app.delete<{ Params: { identifier: string } }>('/api/credentials/:identifier', {
    schema: {
      tags,
      summary: 'Delete a credential by id or name',
      params: { type: 'object', properties: { identifier: { type: 'string' } } },
      response: { 200: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' }, deleted: { type: 'boolean' } } } , ...errors(400, 404) },
    },
  }, async (req) => svc.remove(req.params.identifier));

  app.get<{ Params: { credential_key: string } }>('/api/credential/:credential_key', {
    schema: {
      tags,
      summary: 'Decrypted credential data for workers',
      params: { type: 'object', properties: { credential_key: { type: 'string' } } },
      response: {
        200: {
          type: 'object',
          properties: {
            credential_id: { type: 'integer' },
            credential_key: { type: 'string' },
            credential_type: { type: 'string' },
            data: jsonObject,
            created_at: { type: 'string' },
            updated_at: { type: 'string' },
          },
        },
        ...errors(400, 404),
      },
    },
  }, async (req) => svc.read(req.params.credential_key));
}

export const credentialsAppPlugin: AppPlugin = {
  name: 'credentials',
  tag: { name: 'credentials', description: 'Encrypted credentials: create/update by name, list, read (workers: /api/credential/{key}), delete' },
  routes: (app, ctx) => credentialsPlugin(app, ctx.deps),
};

export default credentialsPlugin;
