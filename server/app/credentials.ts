/**
 * Credential endpoints (spec "Credentials"):
 *   POST   /api/credentials                     create or update by name → 201 (created) / 200 (updated)
 *   GET    /api/credentials                     list: ?type ?tag ?q (name/description) ?limit ?offset → {credentials, count, total, limit, offset}
 *   GET    /api/credentials/{identifier}        name, or id when no credential has that name; metadata, + data with ?include_data=true
 *   DELETE /api/credentials/{identifier}        → {id, name, deleted: true}; 404 when unknown;
 *                                                ?owner=Kind/ns/name: only when that resource owns it (409)
 * Ownership (issue 14): `owner` in the POST body claims the name for a Kubernetes resource; a
 * different owner, or an API client writing a resource's credential (or the reverse), gets 409
 * `owned_by_other` naming the holder (server/ownership.ts). `adopt: true` (with `owner`) claims a
 * credential without owner that the same resource stored before ownership existed (its meta
 * says `source: kubernetes`, `namespace`, `resource`).
 *   GET    /api/credential/{credential_key}     worker read, by name only: {credential_id, credential_key, credential_type, data, created_at, updated_at}
 *                                                headers x-playflow-queue-id/-worker-id/-lease-token: the command's lease (issue 20)
 * Scope (issue 20): `scope: {paths: [glob], namespaces: [name]}` restricts the playbooks that may
 * use a credential (server/secrets/scope.ts); scoped data is served only on the lease-checked read.
 * Validation failure of data against the credential's schema: 400
 * `{message: 'Credential validation failed', errors: [...], error: {code: 'validation_failed', ...}}`.
 * Request and response bodies are never logged by these routes.
 */
import type { FastifyInstance } from 'fastify';
import type {} from '@fastify/swagger'; // route schema fields tags/summary for the OpenAPI document
import {
  CredentialDeleted, CredentialGetQuery, CredentialList, CredentialListQuery, CredentialMeta, CredentialRead, CredentialUpsertBody,
  CredentialValidationFailed, CredentialWithData, Ref, Type,
} from '../../common/contract/index.js';
import { errors } from './schemas.js';
import { parseOwnerRef } from '../ownership.js';
import type { AppPlugin } from './context.js';
import { badRequest } from '../errors.js';
import { CredentialValidationError, type CredentialService, type LeaseProof } from '../secrets/credentials.js';

const identifierParams = Type.Object({ identifier: Type.String() });

/** Headers of the credential read path naming the command a worker runs (client/secrets.ts sends them). */
export const LEASE_HEADERS = { queue_id: 'x-playflow-queue-id', worker_id: 'x-playflow-worker-id', lease_token: 'x-playflow-lease-token' } as const;

function leaseProof(h: Record<string, string | string[] | undefined>): LeaseProof | undefined {
  const v = (k: keyof typeof LEASE_HEADERS) => {
    const x = h[LEASE_HEADERS[k]];
    return Array.isArray(x) ? x[0] : x;
  };
  const queue_id = v('queue_id'), worker_id = v('worker_id'), lease_token = v('lease_token');
  if (queue_id === undefined && worker_id === undefined && lease_token === undefined) return undefined;
  const missing = (Object.keys(LEASE_HEADERS) as Array<keyof typeof LEASE_HEADERS>).filter((k) => !v(k)).map((k) => LEASE_HEADERS[k]);
  if (missing.length) throw badRequest(`header(s) ${missing.join(', ')} missing: a lease is named by queue id, worker id and lease token together`, { field: missing[0] });
  return { queue_id: queue_id!, worker_id: worker_id!, lease_token: lease_token! };
}

export interface CredentialsPluginOptions {
  credentials?: CredentialService;
}

export async function credentialsPlugin(app: FastifyInstance, opts: CredentialsPluginOptions): Promise<void> {
  const svc = opts.credentials;
  if (!svc) return;
  const tags = ['credentials'];

  app.post<{ Body: CredentialUpsertBody }>('/api/credentials', {
    schema: {
      tags,
      summary: 'Create or update a credential by name (data is encrypted at rest)',
      body: CredentialUpsertBody,
      response: { 200: Ref(CredentialMeta), 201: Ref(CredentialMeta), 400: Ref(CredentialValidationFailed), ...errors(409) },
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

  app.get<{ Querystring: CredentialListQuery }>('/api/credentials', {
    schema: {
      tags,
      summary: 'List credentials (metadata only, never data)',
      querystring: CredentialListQuery,
      response: { 200: Ref(CredentialList) },
    },
  }, async (req) => svc.list(req.query));

  app.get<{ Params: { identifier: string }; Querystring: CredentialGetQuery }>(
    '/api/credentials/:identifier',
    {
      schema: {
        tags,
        summary: 'One credential by name (or by id when no credential has that name); decrypted data only with include_data=true',
        params: identifierParams,
        querystring: CredentialGetQuery,
        response: { 200: Ref(CredentialWithData), ...errors(400, 403, 404) },
      },
    },
    async (req) => svc.get(req.params.identifier, req.query),
  );

  app.delete<{ Params: { identifier: string }; Querystring: { owner?: string } }>('/api/credentials/:identifier', {
    schema: {
      tags,
      summary: 'Delete a credential by name (or by id when no credential has that name)',
      params: identifierParams,
      querystring: {
        type: 'object',
        properties: { owner: { type: 'string', description: 'Kind/namespace/name: delete only when this resource owns it (409 otherwise)' } },
      },
      response: { 200: Ref(CredentialDeleted), ...errors(400, 404, 409) },
    },
  }, async (req) => svc.remove(req.params.identifier, parseOwnerRef(req.query.owner)));

  app.get<{ Params: { credential_key: string }; Headers: Record<string, string | undefined> }>('/api/credential/:credential_key', {
    schema: {
      tags,
      summary: 'Decrypted credential data for workers, by credential name',
      description: 'A worker sends the command it runs: x-playflow-queue-id, x-playflow-worker-id and x-playflow-lease-token '
        + '(409 not_lease_holder unless it holds that lease; 403 credential_not_allowed when the playbook is outside the credential\'s scope). '
        + 'A scoped credential is served only with them (403 credential_scoped).',
      params: Type.Object({ credential_key: Type.String() }),
      headers: {
        type: 'object',
        properties: {
          [LEASE_HEADERS.queue_id]: { type: 'string', pattern: '^[0-9]{1,19}$' },
          [LEASE_HEADERS.worker_id]: { type: 'string', minLength: 1, maxLength: 200 },
          [LEASE_HEADERS.lease_token]: { type: 'string', minLength: 1, maxLength: 200 },
        },
      },
      response: { 200: Ref(CredentialRead), ...errors(400, 403, 404, 409) },
    },
  }, async (req) => svc.read(req.params.credential_key, leaseProof(req.headers)));
}

export const credentialsAppPlugin: AppPlugin = {
  name: 'credentials',
  tag: { name: 'credentials', description: 'Encrypted credentials: create/update by name, list, read (workers: /api/credential/{key}), delete' },
  routes: (app, ctx) => credentialsPlugin(app, ctx.deps),
};

export default credentialsPlugin;
