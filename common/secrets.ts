/**
 * The wire shapes of credentials, keychain entries and execution variables: what the server's
 * routes answer and the typed clients (client/secrets.ts, the CLI) read. Credential data and
 * keychain tokens appear only in the read shapes the worker and an include_data read get.
 */
import type { JsonObject, Json } from '../playbook/types.js';
import type { ResourceOwner } from './protocol.js';

// Credentials

export const CREDENTIAL_TYPES = ['postgres', 'oauth2', 'bearer', 'basic', 'api_key', 'service_account', 'warehouse', 'custom'] as const;

export type CredentialType = (typeof CREDENTIAL_TYPES)[number];

/** Playbooks allowed to use a credential: path globs and/or owning resources' namespaces. */
export interface CredentialScope {
  paths?: string[];
  namespaces?: string[];
}

export interface CredentialMeta {
  id: number;
  name: string;
  type: string;
  description: string | null;
  tags: string[];
  meta: JsonObject;
  schema: JsonObject | null;
  created_at: string;
  updated_at: string;
  /** The resource that claimed the name; absent when written through the API. */
  owner?: ResourceOwner;
  /** Playbooks allowed to use it; null = every playbook. */
  scope: CredentialScope | null;
}

export interface CredentialWithData extends CredentialMeta {
  data?: JsonObject;
  /** Present when include_data stored a copy in the authentication cache. */
  cache?: { cache_key: string; cache_type: string; scope_type: string; execution_id: string | null; access_count: number; expires_at: string; accessed_at: string };
}

export interface CredentialRead {
  credential_id: number;
  credential_key: string;
  credential_type: string;
  data: JsonObject;
  created_at: string;
  updated_at: string;
}

export interface CredentialList {
  credentials: CredentialMeta[];
  /** Rows in this page. */
  count: number;
  /** Rows matching the filters. */
  total: number;
  limit: number;
  offset: number;
}

export interface CredentialListQuery {
  type?: string;
  tag?: string;
  q?: string;
  limit?: number;
  offset?: number;
}

// Keychain

export const SCOPE_TYPES = ['local', 'global', 'shared'] as const;

export type ScopeType = (typeof SCOPE_TYPES)[number];

export interface RenewConfig {
  endpoint: string;
  method: string;
  headers: JsonObject;
  data?: JsonObject | null;
  token_field: string;
  ttl_field: string;
  [k: string]: unknown;
}

export interface KeychainSuccess {
  status: 'success';
  keychain_name: string;
  catalog_id: string;
  cache_key: string;
  token_data: JsonObject;
  credential_type: string;
  cache_type: string;
  scope_type: ScopeType;
  expires_at: string;
  ttl_seconds: number;
  accessed_at: string;
  access_count: number;
  auto_renew: boolean;
  expired: false;
}

export interface KeychainExpired {
  status: 'expired';
  keychain_name: string;
  catalog_id: string;
  cache_key: string;
  auto_renew: boolean;
  renew_config?: RenewConfig;
  expired: true;
}

export interface KeychainNotFound {
  status: 'not_found';
  keychain_name: string;
  catalog_id: string;
  cache_key: string;
}

export type KeychainGetResponse = KeychainSuccess | KeychainExpired | KeychainNotFound;

export interface KeychainSetBody {
  token_data?: unknown;
  credential_type?: unknown;
  cache_type?: unknown;
  scope_type?: unknown;
  execution_id?: unknown;
  parent_execution_id?: unknown;
  ttl_seconds?: unknown;
  expires_at?: unknown;
  auto_renew?: unknown;
  renew_config?: unknown;
  schema?: unknown;
}

export interface KeychainSetResponse {
  status: 'success';
  message: string;
  keychain_name: string;
  catalog_id: string;
  cache_key: string;
  expires_at: string;
  ttl_seconds: number;
  auto_renew: boolean;
}

export interface KeychainDeleteResponse {
  status: 'success' | 'not_found';
  message: string;
  keychain_name: string;
  catalog_id: string;
}

export interface KeychainCatalogList {
  status: 'success';
  catalog_id: string;
  entries: Array<{ keychain_name: string; cache_key: string; scope_type: string; credential_type: string; expires_at: string; auto_renew: boolean; access_count: number }>;
  count: number;
}

// Execution variables

export const VAR_TYPES = ['user_defined', 'step_result', 'computed', 'iterator_state'] as const;

export type VarType = (typeof VAR_TYPES)[number];

export interface VarView {
  value: Json;
  type: VarType;
  source_step: string | null;
  created_at: string;
  accessed_at: string;
  access_count: number;
}

export interface VarsList {
  execution_id: string;
  variables: Record<string, VarView>;
  count: number;
}

export interface VarRead extends VarView {
  execution_id: string;
  var_name: string;
}

export interface VarsSetBody {
  variables?: unknown;
  var_type?: unknown;
  source_step?: unknown;
}

export interface VarsSetResponse {
  execution_id: string;
  variables_set: number;
  var_names: string[];
}

export interface VarDeleteResponse {
  execution_id: string;
  var_name: string;
  deleted: boolean;
}
