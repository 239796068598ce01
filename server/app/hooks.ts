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
import {
  HookDeleted, HookDeliveryBody, HookDeliveryHeaders, HookList, HookListQuery, HookNotStarted, HookParams, HookSpec, HookStarted, HookView, Ref,
} from '../../common/contract/index.js';
import { AppError } from '../errors.js';
import type { AppContext, AppPlugin } from './context.js';
import { errors } from './schemas.js';
import { routeSchema } from './support.js';

const TAG = 'hooks';

/** The raw bytes of a delivery, kept beside the parsed body: the signature covers exactly them. */
const rawBodies = new WeakMap<FastifyRequest, Buffer>();

export async function hookRoutes(app: FastifyInstance, { deps }: AppContext) {
  const svc = deps.webhooks;
  if (!svc) return;

  app.get<{ Querystring: { path?: string } }>('/api/hooks', {
    schema: routeSchema(TAG, 'List webhook triggers', {
      querystring: HookListQuery,
      response: { 200: Ref(HookList), ...errors(400) },
    }),
  }, async (req) => svc.list(req.query.path || undefined));

  app.get<{ Params: { name: string } }>('/api/hooks/:name', {
    schema: routeSchema(TAG, 'A webhook trigger (its secret is write-only)', { params: HookParams, response: { 200: Ref(HookView), ...errors(400, 404) } }),
  }, async (req) => svc.get(req.params.name));

  app.put<{ Params: { name: string }; Body: HookSpec }>('/api/hooks/:name', {
    schema: routeSchema(TAG, 'Create or replace a webhook trigger', {
      params: HookParams,
      body: HookSpec,
      response: { 200: Ref(HookView), 201: Ref(HookView), ...errors(400) },
    }),
  }, async (req, reply) => {
    const { hook, created } = await svc.put(req.params.name, req.body);
    return reply.code(created ? 201 : 200).send(hook);
  });

  app.delete<{ Params: { name: string } }>('/api/hooks/:name', {
    schema: routeSchema(TAG, 'Delete a webhook trigger', {
      params: HookParams,
      response: { 200: Ref(HookDeleted), ...errors(400, 404) },
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
        params: HookParams,
        body: HookDeliveryBody,
        headers: HookDeliveryHeaders,
        response: {
          200: Ref(HookNotStarted),
          202: Ref(HookStarted),
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
