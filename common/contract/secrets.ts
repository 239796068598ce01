/**
 * The wire shapes of credentials, keychain entries and execution variables (spec, second
 * document): the schemas the server's routes validate and answer with, the OpenAPI document
 * publishes and, through `Static`, the types of the typed clients (client/secrets.ts, the CLI).
 * Credential data and keychain tokens appear only in the read shapes a worker and an
 * include_data read get.
 */
import type { SchemaOptions } from '@sinclair/typebox';
import { Dict, IdInput, IdParam, Json, JsonObject, NullableString, Ref, StringEnum, Type, type Static, type TSchema } from './common.js';
import { ResourceOwner } from './catalog.js';
import { CACHE_TYPES, CREDENTIAL_TYPES, SCOPE_TYPES, VAR_TYPES } from './secret-kinds.js';

export { CACHE_TYPES, CREDENTIAL_TYPES, SCOPE_TYPES, VAR_TYPES };

/**
 * A name stored as a key (credentials, keychain entries): no path separators, no `.`/`..`, no
 * control characters. Each rule has its own wording: an empty or a 256-character name is told so,
 * not that it has a forbidden character. (The pattern takes the empty string so that an empty
 * name gets only the minLength problem.)
 */
export const SafeName = (o: SchemaOptions = {}) => Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^(?!\\.{1,2}$)(?!\\s)(?!.*\\s$)[^/\\\\\\u0000-\\u001f\\u007f]*$',
  'x-message': {
    minLength: 'must not be empty',
    maxLength: 'must be at most 255 characters',
    pattern: "must be a name without '/', '\\', control characters or surrounding spaces, and not '.' or '..'",
  },
  ...o,
});

/** `T | null` where T is an object the document shows with `nullable` (OpenAPI 3.0). */
const nullableObject = (o: SchemaOptions = {}) => Type.Unsafe<Static<ReturnType<typeof JsonObject>> | null>({ type: 'object', additionalProperties: true, nullable: true, ...o });

/** An optional member of a response: the answer leaves it out rather than sending null. */
const opt = <T extends TSchema>(s: T) => Type.Optional(s);

// ---- credentials --------------------------------------------------------------------------

export type CredentialType = (typeof CREDENTIAL_TYPES)[number];

/** Playbooks allowed to use a credential: path globs and/or owning resources' namespaces. */
export const CredentialScope = Type.Unsafe<{ paths?: string[]; namespaces?: string[] } | null>({
  type: ['object', 'null'],
  description: 'Playbooks allowed to use the credential: paths (globs: ** any, * within a segment, ? one character) and/or namespaces of the owning resource; null = every playbook',
  additionalProperties: false,
  properties: {
    paths: { type: 'array', items: { type: 'string' } },
    namespaces: { type: 'array', items: { type: 'string' } },
  },
});
export type CredentialScope = NonNullable<Static<typeof CredentialScope>>;

/** The validation schema a credential's data is checked against. */
const CredentialSchemaDef = Type.Unsafe<Static<ReturnType<typeof JsonObject>>>({
  type: 'object',
  description: 'Validation schema for data: fields (allowed), required, types (field → string|integer|boolean|number|array|object), description',
  additionalProperties: true,
  properties: {
    fields: { type: 'array', items: { type: 'string' } },
    required: { type: 'array', items: { type: 'string' } },
    types: { type: 'object', additionalProperties: { type: 'string' } },
    description: { type: 'string' },
  },
});

/** The resource that claimed a name (by reference: one ResourceOwner in the document). */
const OwnerRef = () => Ref(ResourceOwner);

const credentialMetaProperties = {
  id: Type.Integer(),
  name: Type.String(),
  type: Type.String(),
  description: NullableString(),
  tags: Type.Array(Type.String()),
  meta: JsonObject(),
  schema: nullableObject(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  /** The resource that claimed the name; absent when written through the API. */
  owner: opt(OwnerRef()),
  /** Playbooks allowed to use it; null = every playbook. */
  scope: CredentialScope,
};

/** A credential's metadata: what every answer but the data reads gives. */
export const CredentialMeta = Type.Object(credentialMetaProperties, { $id: 'CredentialMeta', additionalProperties: false });
export type CredentialMeta = Static<typeof CredentialMeta>;

/** GET /api/credentials/{identifier}: the metadata, and the data with include_data=true. */
export const CredentialWithData = Type.Object({
  ...credentialMetaProperties,
  data: opt(JsonObject()),
  /** Present when include_data stored a copy in the authentication cache. */
  cache: opt(Type.Object({
    cache_key: Type.String(), cache_type: Type.String(), scope_type: Type.String(),
    execution_id: NullableString(), access_count: Type.Integer(),
    expires_at: Type.String(), accessed_at: Type.String(),
  })),
}, { $id: 'CredentialWithData' });
export type CredentialWithData = Static<typeof CredentialWithData>;

/** GET /api/credential/{credential_key}: a worker's read. */
export const CredentialRead = Type.Object({
  credential_id: Type.Integer(),
  credential_key: Type.String(),
  credential_type: Type.String(),
  data: JsonObject(),
  created_at: Type.String(),
  updated_at: Type.String(),
}, { $id: 'CredentialRead' });
export type CredentialRead = Static<typeof CredentialRead>;

export const CredentialList = Type.Object({
  credentials: Type.Array(Ref(CredentialMeta)),
  /** Rows in this page. */
  count: Type.Integer(),
  /** Rows matching the filters. */
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
}, { $id: 'CredentialList' });
export type CredentialList = Static<typeof CredentialList>;

/** POST /api/credentials: create or update by name. */
export const CredentialUpsertBody = Type.Object({
  name: SafeName(),
  type: StringEnum(CREDENTIAL_TYPES),
  description: opt(Type.String()),
  data: JsonObject(),
  schema: opt(CredentialSchemaDef),
  meta: opt(JsonObject()),
  tags: opt(Type.Array(Type.String())),
  /** Claims the name for a Kubernetes resource (issue 14); see server/ownership.ts. */
  owner: opt(OwnerRef()),
  /** Omitted keeps the stored scope; null removes it. */
  scope: opt(CredentialScope),
  /**
   * With owner: also claim a credential without owner whose meta says this resource stored it
   * (`source: kubernetes`, `namespace`, `resource`): an operator from before ownership did.
   */
  adopt: opt(Type.Boolean({
    description: 'with owner: also claim a credential without owner whose meta says this resource stored it (source kubernetes, namespace, resource): upgrade adoption',
  })),
}, { additionalProperties: true });
export type CredentialUpsertBody = Static<typeof CredentialUpsertBody>;

export const CredentialListQuery = Type.Object({
  type: opt(Type.String()),
  tag: opt(Type.String()),
  q: opt(Type.String({ description: 'text search on name and description' })),
  limit: opt(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
  offset: opt(Type.Integer({ minimum: 0, maximum: 2147483647, default: 0 })),
}, { additionalProperties: true });
export type CredentialListQuery = Static<typeof CredentialListQuery>;

export const CredentialGetQuery = Type.Object({
  include_data: opt(Type.Boolean({ default: false })),
  execution_id: opt(IdParam()),
  parent_execution_id: opt(IdParam()),
}, { additionalProperties: true });
export type CredentialGetQuery = Static<typeof CredentialGetQuery>;

export const CredentialDeleted = Type.Object({ id: Type.Integer(), name: Type.String(), deleted: Type.Boolean() }, { $id: 'CredentialDeleted' });
export type CredentialDeleted = Static<typeof CredentialDeleted>;

/** The 400 of a credential whose data fails its schema (and any other bad input to that route). */
export const CredentialValidationFailed = Type.Object({
  error: opt(Type.Object({ code: opt(Type.String()), message: opt(Type.String()), details: opt(Json()) })),
  message: opt(Type.String()),
  errors: opt(Type.Array(Type.String())),
}, { $id: 'CredentialValidationFailed', description: 'Bad input; schema validation failures carry message "Credential validation failed" and errors[]' });

// ---- keychain -----------------------------------------------------------------------------

export type ScopeType = (typeof SCOPE_TYPES)[number];

export const KeychainParams = Type.Object({ catalog_id: Type.String({ pattern: '^[0-9]{1,19}$' }), keychain_name: SafeName() });
export const KeychainScopeQuery = Type.Object({
  execution_id: opt(IdParam()),
  scope_type: opt(StringEnum(SCOPE_TYPES, { default: 'global' })),
}, { additionalProperties: true });
export type KeychainScopeQuery = Static<typeof KeychainScopeQuery>;

/** How an expired token is renewed (stored sealed, answered to a worker that renews it). */
export const RenewConfig = Type.Unsafe<{ endpoint: string; method: string; headers: Static<ReturnType<typeof JsonObject>>; data?: Static<ReturnType<typeof JsonObject>> | null; token_field: string; ttl_field: string; [k: string]: unknown }>({
  type: 'object',
  additionalProperties: true,
  properties: {
    endpoint: { type: 'string' }, method: { type: 'string' }, headers: { type: 'object', additionalProperties: true }, data: {},
    token_field: { type: 'string' }, ttl_field: { type: 'string' },
  },
});
export type RenewConfig = Static<typeof RenewConfig>;

/** renew_config as a client sends it: the server fills method POST, headers {}, token_field access_token, ttl_field expires_in. */
export const RenewConfigInput = Type.Object({
  endpoint: opt(Type.String()), method: opt(Type.String()), headers: opt(JsonObject()), data: opt(Json()),
  token_field: opt(Type.String()), ttl_field: opt(Type.String()),
}, { additionalProperties: true });

export const KeychainSuccess = Type.Object({
  status: Type.Literal('success'),
  keychain_name: Type.String(), catalog_id: Type.String(), cache_key: Type.String(),
  token_data: JsonObject(), credential_type: Type.String(), cache_type: Type.String(), scope_type: StringEnum(SCOPE_TYPES),
  expires_at: Type.String(), ttl_seconds: Type.Number(), accessed_at: Type.String(), access_count: Type.Integer(),
  auto_renew: Type.Boolean(), expired: Type.Literal(false),
});
export type KeychainSuccess = Static<typeof KeychainSuccess>;
export const KeychainExpired = Type.Object({
  status: Type.Literal('expired'),
  keychain_name: Type.String(), catalog_id: Type.String(), cache_key: Type.String(),
  auto_renew: Type.Boolean(), renew_config: opt(RenewConfig), expired: Type.Literal(true),
});
export type KeychainExpired = Static<typeof KeychainExpired>;
export const KeychainNotFound = Type.Object({
  status: Type.Literal('not_found'),
  keychain_name: Type.String(), catalog_id: Type.String(), cache_key: Type.String(),
});
export type KeychainNotFound = Static<typeof KeychainNotFound>;
export type KeychainGetResponse = KeychainSuccess | KeychainExpired | KeychainNotFound;

/** GET /api/keychain/{catalog_id}/{keychain_name}: one object whose `status` says which of the three it is. */
export const KeychainGet = Type.Unsafe<KeychainGetResponse>({
  type: 'object',
  $id: 'KeychainGet',
  description: 'success: keychain_name, catalog_id, cache_key, token_data, credential_type, cache_type, scope_type, expires_at, ttl_seconds, accessed_at, access_count, auto_renew, expired=false; expired: keychain_name, catalog_id, cache_key, auto_renew, renew_config?, expired=true; not_found: keychain_name, catalog_id, cache_key',
  properties: {
    status: { type: 'string', enum: ['success', 'expired', 'not_found'] },
    keychain_name: { type: 'string' }, catalog_id: { type: 'string' }, cache_key: { type: 'string' },
    token_data: { type: 'object', additionalProperties: true }, credential_type: { type: 'string' }, cache_type: { type: 'string' },
    scope_type: { type: 'string' }, expires_at: { type: 'string' }, ttl_seconds: { type: 'number' },
    accessed_at: { type: 'string' }, access_count: { type: 'integer' }, auto_renew: { type: 'boolean' },
    renew_config: RenewConfig, expired: { type: 'boolean' },
  },
});

/** An execution id in the body: the shared IdInput (its wording in a 400), or null. */
const NullableIdInput = () => {
  const id = IdInput();
  return Type.Unsafe<string | number | null>({ anyOf: [...id.anyOf, { type: 'null' }], description: `${id.description}, or null`, 'x-message': `${id['x-message']}, or null` });
};

/** POST /api/keychain/{catalog_id}/{keychain_name}. */
export const KeychainSetBody = Type.Object({
  token_data: JsonObject(),
  credential_type: opt(Type.String()),
  cache_type: opt(StringEnum(CACHE_TYPES)),
  scope_type: opt(StringEnum(SCOPE_TYPES)),
  execution_id: opt(NullableIdInput()),
  parent_execution_id: opt(NullableIdInput()),
  ttl_seconds: opt(Type.Integer({ minimum: 0, maximum: 315_360_000, description: 'at most 10 years' })),
  expires_at: opt(NullableString({ description: 'ISO 8601 timestamp, e.g. 2030-01-01T00:00:00Z; UTC when it names no zone' })),
  auto_renew: opt(Type.Boolean()),
  renew_config: opt(RenewConfigInput),
  schema: opt(JsonObject()),
}, { additionalProperties: true });
export type KeychainSetBody = Static<typeof KeychainSetBody>;

export const KeychainSetResponse = Type.Object({
  status: StringEnum(['success']), message: Type.String(), keychain_name: Type.String(),
  catalog_id: Type.String(), cache_key: Type.String(), expires_at: Type.String(),
  ttl_seconds: Type.Number(), auto_renew: Type.Boolean(),
}, { $id: 'KeychainSetResponse' });
export type KeychainSetResponse = Static<typeof KeychainSetResponse>;

export const KeychainDeleteResponse = Type.Object({
  status: StringEnum(['success', 'not_found']), message: Type.String(), keychain_name: Type.String(), catalog_id: Type.String(),
}, { $id: 'KeychainDeleteResponse' });
export type KeychainDeleteResponse = Static<typeof KeychainDeleteResponse>;

export const KeychainCatalogList = Type.Object({
  status: StringEnum(['success']),
  catalog_id: Type.String(),
  entries: Type.Array(Type.Object({
    keychain_name: Type.String(), cache_key: Type.String(), scope_type: Type.String(),
    credential_type: Type.String(), expires_at: Type.String(), auto_renew: Type.Boolean(),
    access_count: Type.Integer(),
  })),
  count: Type.Integer(),
}, { $id: 'KeychainCatalogList' });
export type KeychainCatalogList = Static<typeof KeychainCatalogList>;

// ---- execution variables ------------------------------------------------------------------

export type VarType = (typeof VAR_TYPES)[number];

export const VarsExecutionParams = Type.Object({ execution_id: Type.String({ pattern: '^[0-9]{1,19}$' }) });
export const VarParams = Type.Object({ execution_id: Type.String({ pattern: '^[0-9]{1,19}$' }), var_name: Type.String() });

const varViewProperties = {
  value: Json(),
  type: StringEnum(VAR_TYPES),
  source_step: NullableString(),
  created_at: Type.String(),
  accessed_at: Type.String(),
  access_count: Type.Integer(),
};
export const VarView = Type.Object(varViewProperties);
export type VarView = Static<typeof VarView>;

export const VarsList = Type.Object({ execution_id: Type.String(), variables: Dict(VarView), count: Type.Integer() }, { $id: 'VarsList' });
export type VarsList = Static<typeof VarsList>;

export const VarRead = Type.Object({ execution_id: Type.String(), var_name: Type.String(), ...varViewProperties }, { $id: 'VarRead' });
export type VarRead = Static<typeof VarRead>;

/** POST /api/vars/{execution_id}. */
export const VarsSetBody = Type.Object({
  variables: Type.Unsafe<Static<ReturnType<typeof JsonObject>>>({ type: 'object', additionalProperties: true, description: 'name (≤ 255 characters) → any JSON value' }),
  var_type: opt(StringEnum(VAR_TYPES, { default: 'user_defined' })),
  source_step: opt(NullableString()),
}, { additionalProperties: true });
export type VarsSetBody = Static<typeof VarsSetBody>;

export const VarsSetResponse = Type.Object({ execution_id: Type.String(), variables_set: Type.Integer(), var_names: Type.Array(Type.String()) }, { $id: 'VarsSetResponse' });
export type VarsSetResponse = Static<typeof VarsSetResponse>;

export const VarDeleteResponse = Type.Object({ execution_id: Type.String(), var_name: Type.String(), deleted: Type.Boolean() }, { $id: 'VarDeleteResponse' });
export type VarDeleteResponse = Static<typeof VarDeleteResponse>;

/**
 * A body as it reaches a service before the service's own checks (the service is also called in
 * process, and refuses what the route schema would have): each member of T, of any type.
 */
export type Unchecked<T> = { [K in keyof T]?: unknown };

/** Shared schemas of this module (registered by $id; answers refer to them). */
export const secretsSchemas = [
  CredentialMeta, CredentialWithData, CredentialRead, CredentialList, CredentialDeleted, CredentialValidationFailed,
  KeychainGet, KeychainSetResponse, KeychainDeleteResponse, KeychainCatalogList,
  VarsList, VarRead, VarsSetResponse, VarDeleteResponse,
];
