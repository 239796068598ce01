/**
 * Building blocks of the wire contract (common/contract/*): the JSON Schemas fastify validates
 * requests with and the OpenAPI document shows, with their static types (`Static<typeof X>`).
 * common/protocol.ts re-exports the types under their published names.
 *
 * Conventions the schemas keep (server/app/support.ts reads them):
 * - `x-message` gives a field's refusal wording (the 400 names the field, then says this);
 * - response schemas list in `required` only what the TypeScript type requires, so a missing
 *   optional field is left out of the answer rather than failing serialisation;
 * - IDs are int64: answers carry decimal strings, requests accept a string or an integer. `0` is
 *   well-formed (it never exists: 404), a non-digit or a negative number is a 400.
 */
import { Type, type Static, type TObject, type TSchema, type SchemaOptions } from '@sinclair/typebox';
import type { Json as JsonValue, JsonObject as JsonObjectValue } from '../../playbook/types.js';
import type { PageLimit } from './limits.js';

export { Type, type Static, type TSchema };

/** Any JSON value. */
export const Json = (o: SchemaOptions = {}) => Type.Unsafe<JsonValue>({ ...o });
/** A JSON object with any members. */
export const JsonObject = (o: SchemaOptions = {}) => Type.Unsafe<JsonObjectValue>({ type: 'object', additionalProperties: true, ...o });

/** An object of any keys whose values all have one schema (`additionalProperties`, as OpenAPI 3.0 reads it). */
export const Dict = <T extends TSchema>(values: T, o: SchemaOptions = {}) =>
  Type.Unsafe<Record<string, Static<T>>>({ type: 'object', additionalProperties: values, ...o });

/** An object schema that also takes `null` (a body some clients send for "nothing"). */
export const ObjectOrNull = <T extends TObject>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, type: ['object', 'null'] });

/** An id in an answer: int64 as a decimal string. */
export const Id = (o: SchemaOptions = {}) => Type.String({ pattern: '^[0-9]+$', description: 'int64 id as a decimal string', ...o });
/** An id in an answer, or null. */
export const NullableId = (o: SchemaOptions = {}) =>
  Type.Unsafe<string | null>({ type: ['string', 'null'], pattern: '^[0-9]+$', description: 'int64 id as a decimal string, or null', ...o });

/** An id in a request body: decimal string or non-negative integer (send strings above 2^53). */
export const IdInput = (o: SchemaOptions = {}) =>
  Type.Union([Type.String({ pattern: '^[0-9]{1,19}$' }), Type.Integer({ minimum: 0 })], {
    description: 'int64 id: decimal string (preferred) or integer',
    'x-message': 'must be an id: a decimal string or a non-negative integer',
    ...o,
  });

/** An id as a path parameter (always text on the wire). */
export const IdParam = (o: SchemaOptions = {}) =>
  Type.String({ pattern: '^[0-9]{1,19}$', description: 'int64 id (decimal)', 'x-message': 'must be a decimal integer id', ...o });

export const Timestamp = (o: SchemaOptions = {}) => Type.String({ format: 'date-time', ...o });
export const NullableTimestamp = (o: SchemaOptions = {}) => Type.Unsafe<string | null>({ type: ['string', 'null'], format: 'date-time', ...o });
/** `T | null` as one JSON Schema type list (OpenAPI 3.0 has no `null` type of its own to union with). */
export const NullableString = (o: SchemaOptions = {}) => Type.Unsafe<string | null>({ type: ['string', 'null'], ...o });
export const NullableInteger = (o: SchemaOptions = {}) => Type.Unsafe<number | null>({ type: ['integer', 'null'], ...o });

/** A page size query parameter: its default and its cap are part of the contract. */
export const LimitQuery = (l: PageLimit) =>
  Type.Integer({ minimum: 1, maximum: l.max, default: l.default, description: `page size, default ${l.default}, at most ${l.max}` });
export const OffsetQuery = () => Type.Integer({ minimum: 0, maximum: 2147483647, default: 0, description: 'rows to skip' });

/**
 * A reference to a shared schema (registered by its `$id`): the document names it under
 * components.schemas, the static type is the referenced schema's.
 */
export const Ref = <T extends TSchema>(schema: T, o: SchemaOptions = {}) => {
  if (!schema.$id) throw new Error('Ref: the schema has no $id');
  return Type.Unsafe<Static<T>>({ $ref: `${schema.$id}#`, ...o });
};

/** Every error response: `{error: {code, message, details?}}`. */
export const ErrorBody = Type.Object({
  error: Type.Object({
    code: Type.String({ description: 'stable machine-readable code, e.g. not_found, bad_request, playbook_invalid' }),
    message: Type.String(),
    details: Type.Optional(Json({ description: 'code-specific: validation problems, playbook issues, SQL error fields' })),
  }),
}, { $id: 'ErrorBody', description: 'Every error answer' });
export type ErrorBody = Static<typeof ErrorBody>;

/**
 * One of a list of strings, as `{type: 'string', enum}` (a union of literals would be an anyOf of
 * consts: OpenAPI 3.0 has no `const`, and the 400 would list one problem per branch).
 */
export const StringEnum = <const T extends readonly string[]>(values: T, o: SchemaOptions = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...o });

export const StatusOk = Type.Object({ status: StringEnum(['ok']) }, { $id: 'StatusOk' });
export type StatusOk = Static<typeof StatusOk>;
