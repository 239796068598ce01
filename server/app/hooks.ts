/**
 * Webhook triggers (server/hooks):
 * - GET    /api/hooks?path=          → {hooks, count}
 * - GET    /api/hooks/{name}         → the hook (never its secret: `secret_set` says whether one is)
 * - PUT    /api/hooks/{name}         {path, version?, filter?, secret?, insecure?} → 201 created / 200 replaced;
 *   400 names the bad field (a hook without a secret needs `insecure: true`).
 * - DELETE /api/hooks/{name}         → {name, deleted: true}; 404
 * - POST   /api/hooks/{name}         a delivery: the JSON body becomes the payload. Not behind the API
 *   token — the HMAC signature (X-Hub-Signature-256) is its authentication. 202 {started: true,
 *   execution_id}; 200 {started: false, reason: filter} when the filter does not match (nothing
 *   stored); 200 {started: false, reason: replayed, execution_id} for a delivery id already seen;
 *   401 bad_signature (nothing stored); 404 unknown hook.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { HookSpec } from '../hooks/service.js';
import { AppError } from '../errors.js';
import type { AppContext, AppPlugin } from './context.js';
import { errors, jsonObject } from './schemas.js';
import { routeSchema } from './support.js';

const TAG = 'hooks';
const nameParams = { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 253 } } } as const;
const hookView = {
  type: 'object',
  properties: {
    hook_id: { type: 'string' }, name: { type: 'string' }, path: { type: 'string' }, version: { type: ['integer', 'null'] }, filter: { type: ['string', 'null'] },
    insecure: { type: 'boolean' }, secret_set: { type: 'boolean' }, url: { type: 'string' },
    created_at: { type: 'string' }, updated_at: { type: 'string' },
  },
} as const;

/** The raw bytes of a delivery, kept beside the parsed body: the signature covers exactly them. */
const rawBodies = new WeakMap<FastifyRequest, Buffer>();

export async function hookRoutes(app: FastifyInstance, { deps }: AppContext) {
  const svc = deps.webhooks;
  if (!svc) return;

  app.get<{ Querystring: { path?: string } }>('/api/hooks', {
    schema: routeSchema(TAG, 'List webhook triggers', {
      querystring: { type: 'object', properties: { path: { type: 'string' } } },
      response: { 200: { type: 'object', properties: { hooks: { type: 'array', items: hookView }, count: { type: 'integer' } } }, ...errors(400) },
    }),
  }, async (req) => svc.list(req.query.path || undefined));

  app.get<{ Params: { name: string } }>('/api/hooks/:name', {
    schema: routeSchema(TAG, 'A webhook trigger (its secret is write-only)', { params: nameParams, response: { 200: hookView, ...errors(400, 404) } }),
  }, async (req) => svc.get(req.params.name));

  app.put<{ Params: { name: string }; Body: HookSpec }>('/api/hooks/:name', {
    schema: routeSchema(TAG, 'Create or replace a webhook trigger', {
      params: nameParams,
      body: {
        type: 'object',
        required: ['path'],
        additionalProperties: false,
        properties: {
          path: { type: 'string', minLength: 1, description: 'catalog path of the playbook a delivery starts' },
          version: { type: ['integer', 'null'], minimum: 1, description: 'pinned version; null: the latest at each delivery' },
          filter: { type: ['string', 'null'], description: "condition on the delivery (`body`, `headers`), the language of `when:`; false: nothing starts" },
          secret: { type: 'string', minLength: 16, maxLength: 1024, description: 'HMAC-SHA256 key of X-Hub-Signature-256; write-only; omitted on a replace: kept' },
          insecure: { type: 'boolean', description: 'accept unsigned deliveries (no secret); refused otherwise' },
        },
      },
      response: { 200: hookView, 201: hookView, ...errors(400) },
    }),
  }, async (req, reply) => {
    const { hook, created } = await svc.put(req.params.name, req.body);
    return reply.code(created ? 201 : 200).send(hook);
  });

  app.delete<{ Params: { name: string } }>('/api/hooks/:name', {
    schema: routeSchema(TAG, 'Delete a webhook trigger', {
      params: nameParams,
      response: { 200: { type: 'object', properties: { name: { type: 'string' }, deleted: { type: 'boolean' } } }, ...errors(400, 404) },
    }),
  }, async (req) => {
    await svc.remove(req.params.name);
    return { name: req.params.name, deleted: true };
  });

  // Deliveries in a context of their own: their JSON parser keeps the raw bytes for the signature.
  await app.register(async (hooks) => {
    hooks.removeContentTypeParser('application/json');
    hooks.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
      const raw = body as Buffer;
      rawBodies.set(req, raw);
      const text = raw.toString('utf8');
      if (text.trim() === '') return done(null, {});
      try {
        done(null, JSON.parse(text));
      } catch (err) {
        done(new AppError(400, 'invalid_json', `request body is not valid JSON: ${(err as Error).message}`), undefined);
      }
    });
    hooks.post<{ Params: { name: string } }>('/api/hooks/:name', {
      // The signature authenticates a delivery, not the API token (server/app/support.ts installAuth).
      config: { publicRoute: true } as object,
      schema: routeSchema(TAG, 'Deliver an event: starts the playbook with the JSON body as payload (signed with X-Hub-Signature-256)', {
        // no bearer token: the signature authenticates a delivery
        security: [],
        params: nameParams,
        body: jsonObject,
        headers: {
          type: 'object',
          properties: {
            'x-hub-signature-256': { type: 'string', description: 'sha256=<hex HMAC-SHA256 of the raw body with the secret>' },
            'x-idempotency-key': { type: 'string', maxLength: 150, description: 'delivery id: a repeat answers the first execution' },
            'x-github-delivery': { type: 'string', maxLength: 150, description: 'delivery id (GitHub)' },
          },
        },
        response: {
          200: { type: 'object', properties: { started: { type: 'boolean' }, hook: { type: 'string' }, reason: { type: 'string' }, execution_id: { type: 'string' } } },
          202: { type: 'object', properties: { started: { type: 'boolean' }, hook: { type: 'string' }, execution_id: { type: 'string' }, path: { type: 'string' }, version: { type: 'integer' } } },
          ...errors(400, 401, 404),
        },
      }),
    }, async (req, reply) => {
      const res = await svc.deliver(req.params.name, { raw: rawBodies.get(req) ?? Buffer.alloc(0), body: req.body, headers: req.headers });
      return reply.code(res.started ? 202 : 200).send(res);
    });
  });
}

export const hooksAppPlugin: AppPlugin = { name: 'hooks', tag: { name: 'hooks', description: 'Webhook triggers: signed deliveries start playbooks' }, routes: hookRoutes };
