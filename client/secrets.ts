/**
 * Typed client for the credentials, keychain and variables endpoints. Composes the one HTTP
 * client (client/http.ts): `new SecretsClient(playflowClient)` — or anything with its `request`
 * method — so auth, timeouts and `ApiError` handling are shared. Shapes are those the server
 * publishes (server/secrets/*, OpenAPI at /docs).
 */
import type { Json, JsonObject } from '../playbook/types.js';
import type { ResourceOwner } from '../common/protocol.js';
import type { CredentialList, CredentialListQuery, CredentialMeta, CredentialRead, CredentialWithData } from '../common/secrets.js';
import type {
  KeychainCatalogList, KeychainDeleteResponse, KeychainGetResponse, KeychainSetBody, KeychainSetResponse, ScopeType,
} from '../common/secrets.js';
import type { VarDeleteResponse, VarRead, VarsList, VarsSetResponse, VarType } from '../common/secrets.js';

export type {
  CredentialList, CredentialMeta, CredentialRead, CredentialWithData, KeychainCatalogList, KeychainDeleteResponse,
  KeychainGetResponse, KeychainSetResponse, VarDeleteResponse, VarRead, VarsList, VarsSetResponse,
};

type IdLike = string | number | bigint;
type Query = Record<string, string | number | boolean | undefined | null>;

/** The part of PlayflowClient this client needs. */
export interface RequestClient {
  request<T>(method: string, path: string, opts?: { query?: Query; body?: unknown; headers?: Record<string, string> }): Promise<T>;
}

export interface CredentialInput {
  name: string;
  type: string;
  data: JsonObject;
  description?: string;
  schema?: JsonObject;
  meta?: JsonObject;
  tags?: string[];
  /** Playbooks allowed to use it: path globs and/or namespaces; omitted keeps the stored scope, null removes it. */
  scope?: { paths?: string[]; namespaces?: string[] } | null;
  /** Claims the name for a Kubernetes resource; 409 `owned_by_other` when someone else holds it. */
  owner?: ResourceOwner;
  /** With owner: claim it even without owner when its meta says this resource stored it (upgrade adoption). */
  adopt?: boolean;
}

/** The command a worker reads a credential for: its queue_id and the worker_id + lease_token of its claim. */
export interface CredentialLease {
  queue_id: IdLike;
  worker_id: string;
  lease_token: string;
}

export interface KeychainScope {
  scope_type?: ScopeType;
  execution_id?: IdLike | null;
}

const seg = (s: string) => encodeURIComponent(s);
const id = (v: IdLike) => String(v);

export class SecretsClient {
  constructor(private readonly http: RequestClient) {}

  // ---- credentials --------------------------------------------------------------------------

  /** POST /api/credentials: create or update by name. A failed schema check is ApiError 400 `validation_failed` (details: errors). */
  putCredential(input: CredentialInput): Promise<CredentialMeta> {
    return this.http.request('POST', '/api/credentials', { body: input });
  }

  listCredentials(q: CredentialListQuery = {}): Promise<CredentialList> {
    return this.http.request('GET', '/api/credentials', { query: { ...q } });
  }

  getCredential(identifier: string | number, opts: { include_data?: boolean; execution_id?: IdLike; parent_execution_id?: IdLike } = {}): Promise<CredentialWithData> {
    return this.http.request('GET', `/api/credentials/${seg(String(identifier))}`, {
      query: {
        include_data: opts.include_data || undefined,
        execution_id: opts.execution_id === undefined ? undefined : id(opts.execution_id),
        parent_execution_id: opts.parent_execution_id === undefined ? undefined : id(opts.parent_execution_id),
      },
    });
  }

  /** `owner` (`Kind/namespace/name`): delete only when that resource owns it (409 otherwise). */
  deleteCredential(identifier: string | number, owner?: string): Promise<{ id: number; name: string; deleted: true }> {
    return this.http.request('DELETE', `/api/credentials/${seg(String(identifier))}`, { query: { owner } });
  }

  /**
   * GET /api/credential/{key}: the worker read path (decrypted data). A worker names the command
   * it runs (`lease`): the server serves only the lease holder (409 `not_lease_holder`) and only
   * a playbook in the credential's scope (403 `credential_not_allowed`).
   */
  readCredential(key: string, lease?: CredentialLease): Promise<CredentialRead> {
    const headers = lease
      ? { 'x-playflow-queue-id': String(lease.queue_id), 'x-playflow-worker-id': lease.worker_id, 'x-playflow-lease-token': lease.lease_token }
      : undefined;
    return this.http.request('GET', `/api/credential/${seg(key)}`, headers ? { headers } : undefined);
  }

  // ---- keychain -----------------------------------------------------------------------------

  getKeychain(catalogId: IdLike, name: string, scope: KeychainScope = {}): Promise<KeychainGetResponse> {
    return this.http.request('GET', `/api/keychain/${id(catalogId)}/${seg(name)}`, { query: scopeQuery(scope) });
  }

  setKeychain(catalogId: IdLike, name: string, body: Omit<KeychainSetBody, 'execution_id' | 'parent_execution_id'> & { execution_id?: IdLike | null; parent_execution_id?: IdLike | null }): Promise<KeychainSetResponse> {
    const b: Record<string, unknown> = { ...body };
    for (const k of ['execution_id', 'parent_execution_id'] as const) if (body[k] !== undefined && body[k] !== null) b[k] = id(body[k]);
    return this.http.request('POST', `/api/keychain/${id(catalogId)}/${seg(name)}`, { body: b });
  }

  deleteKeychain(catalogId: IdLike, name: string, scope: KeychainScope = {}): Promise<KeychainDeleteResponse> {
    return this.http.request('DELETE', `/api/keychain/${id(catalogId)}/${seg(name)}`, { query: scopeQuery(scope) });
  }

  listKeychain(catalogId: IdLike): Promise<KeychainCatalogList> {
    return this.http.request('GET', `/api/keychain/catalog/${id(catalogId)}`);
  }

  // ---- variables ----------------------------------------------------------------------------

  listVars(executionId: IdLike): Promise<VarsList> {
    return this.http.request('GET', `/api/vars/${id(executionId)}`);
  }

  getVar(executionId: IdLike, name: string): Promise<VarRead> {
    return this.http.request('GET', `/api/vars/${id(executionId)}/${seg(name)}`);
  }

  setVars(executionId: IdLike, variables: Record<string, Json>, opts: { var_type?: VarType; source_step?: string } = {}): Promise<VarsSetResponse> {
    return this.http.request('POST', `/api/vars/${id(executionId)}`, { body: { variables, ...opts } });
  }

  deleteVar(executionId: IdLike, name: string): Promise<VarDeleteResponse> {
    return this.http.request('DELETE', `/api/vars/${id(executionId)}/${seg(name)}`);
  }
}

function scopeQuery(s: KeychainScope): Query {
  return { scope_type: s.scope_type, execution_id: s.execution_id === undefined || s.execution_id === null ? undefined : id(s.execution_id) };
}
