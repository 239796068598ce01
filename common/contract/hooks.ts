/**
 * Webhook triggers (server/hooks): a hook names the playbook a signed delivery starts. The
 * secret is write-only: answers say whether one is set, never what it is.
 */
import { Id, JsonObject, NullableInteger, NullableString, Ref, StringEnum, Type, type Static } from './common.js';

/** What GET /api/hooks/{name} answers. */
export const HookView = Type.Object({
  hook_id: Id({ description: 'what an execution started by a delivery records as its hook_id' }),
  name: Type.String(),
  path: Type.String(),
  version: NullableInteger({ description: 'pinned version; null: the latest at each delivery' }),
  filter: NullableString(),
  insecure: Type.Boolean(),
  secret_set: Type.Boolean({ description: 'whether a secret is stored (the secret itself is write-only)' }),
  url: Type.String({ description: 'where deliveries go (POST)' }),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
}, { $id: 'Hook' });
export type HookView = Static<typeof HookView>;

export const HookList = Type.Object({ hooks: Type.Array(Ref(HookView)), count: Type.Integer() }, { $id: 'HookList' });
export type HookList = Static<typeof HookList>;

export const HookParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 253 }) });
export const HookListQuery = Type.Object({ path: Type.Optional(Type.String()) });

/** PUT /api/hooks/{name}: create or replace. */
export const HookSpec = Type.Object({
  path: Type.String({ minLength: 1, description: 'catalog path of the playbook a delivery starts' }),
  version: Type.Optional(Type.Unsafe<number | null>({ type: ['integer', 'null'], minimum: 1, description: 'pinned version; null: the latest at each delivery' })),
  filter: Type.Optional(NullableString({ description: 'condition on the delivery (`body`, `headers`), the language of `when:`; false: nothing starts' })),
  /** Write-only. Required unless `insecure: true`; omitted on a replace: the stored one is kept. */
  secret: Type.Optional(Type.String({ minLength: 16, maxLength: 1024, description: 'HMAC-SHA256 key of X-Hub-Signature-256; write-only; omitted on a replace: kept' })),
  insecure: Type.Optional(Type.Boolean({ description: 'accept unsigned deliveries (no secret); refused otherwise' })),
}, { additionalProperties: false });
export type HookSpec = Static<typeof HookSpec>;

export const HookDeleted = Type.Object({ name: Type.String(), deleted: Type.Boolean() }, { $id: 'HookDeleted' });
export type HookDeleted = Static<typeof HookDeleted>;

/** POST /api/hooks/{name}: the delivery's JSON body becomes the execution's payload. */
export const HookDeliveryBody = JsonObject();

export const HookDeliveryHeaders = Type.Object({
  'x-hub-signature-256': Type.Optional(Type.String({ description: 'sha256=<hex HMAC-SHA256 of the raw body with the secret>' })),
  'x-idempotency-key': Type.Optional(Type.String({ maxLength: 150, description: 'delivery id: a repeat answers the first execution' })),
  'x-github-delivery': Type.Optional(Type.String({ maxLength: 150, description: 'delivery id (GitHub)' })),
});

/** 202: the delivery started an execution. */
export const HookStarted = Type.Object({
  started: Type.Boolean({ description: 'true' }), hook: Type.String(), execution_id: Id(), path: Type.String(), version: Type.Integer(),
}, { $id: 'HookStarted' });
/** 200: nothing started: the filter did not match (nothing stored), or the delivery id was seen (its execution). */
export const HookNotStarted = Type.Object({
  started: Type.Boolean({ description: 'false' }), hook: Type.String(),
  reason: StringEnum(['filter', 'replayed']),
  execution_id: Type.Optional(Id({ description: 'replayed: the execution the first delivery started' })),
}, { $id: 'HookNotStarted' });

export type HookDeliveryResult =
  | { started: true; execution_id: string; hook: string; path: string; version: number }
  | { started: false; hook: string; reason: 'filter' }
  | { started: false; hook: string; reason: 'replayed'; execution_id: string };

export const hookSchemas = [HookView, HookList, HookDeleted, HookStarted, HookNotStarted];
