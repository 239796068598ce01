/**
 * What the API server does with a custom resource's body before storing it, from the CRD's
 * structural openAPIV3Schema: prune unknown fields (reporting them, for fieldValidation), apply
 * defaults, validate (errors worded as the real server words them), and evaluate the
 * x-kubernetes-validations CEL rules (cel.ts).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { celErrors } from './cel.js';
import { invalidValue, required, type FieldError } from './errors.js';
import type { Obj } from './resources.js';

const EXTENSIONS = ['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-int-or-string', 'x-kubernetes-validations',
  'x-kubernetes-list-type', 'x-kubernetes-list-map-keys', 'x-kubernetes-embedded-resource', 'x-kubernetes-map-type'];

const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `spec.workflow[0].step` from a JSON pointer `/spec/workflow/0/step`. */
export function fieldPath(pointer: string): string {
  let out = '';
  for (const seg of pointer.split('/').slice(1)) {
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else out += out ? `.${seg}` : seg;
  }
  return out;
}

const join = (base: string, key: string): string => (base ? `${base}.${key}` : key);

/**
 * Structural pruning: drops fields the schema does not declare (unless
 * x-kubernetes-preserve-unknown-fields), returning their paths. apiVersion, kind and metadata
 * of the root and of embedded resources are always kept.
 */
export function prune(schema: Obj, value: unknown, path = '', root = true): string[] {
  if (schema['x-kubernetes-preserve-unknown-fields'] && !schema.properties && !schema.additionalProperties) return [];
  if (Array.isArray(value)) {
    return schema.items ? value.flatMap((v, i) => prune(schema.items, v, `${path}[${i}]`, false)) : [];
  }
  if (!isObject(value)) return [];
  const keepMeta = root || schema['x-kubernetes-embedded-resource'];
  const out: string[] = [];
  for (const k of Object.keys(value)) {
    if (keepMeta && (k === 'apiVersion' || k === 'kind' || k === 'metadata')) continue;
    const sub = schema.properties?.[k] ?? (isObject(schema.additionalProperties) ? schema.additionalProperties : undefined);
    if (sub) out.push(...prune(sub, value[k], join(path, k), false));
    else if (schema.additionalProperties === true || schema['x-kubernetes-preserve-unknown-fields']) continue;
    else {
      out.push(join(path, k));
      delete value[k];
    }
  }
  return out;
}

/** Defaulting: a `default` fills a missing field (and is itself defaulted). */
export function applyDefaults(schema: Obj, value: unknown): void {
  if (Array.isArray(value)) {
    if (schema.items) for (const v of value) applyDefaults(schema.items, v);
    return;
  }
  if (!isObject(value)) return;
  for (const [k, sub] of Object.entries((schema.properties ?? {}) as Record<string, Obj>)) {
    if (value[k] === undefined && sub.default !== undefined) value[k] = structuredClone(sub.default);
    if (value[k] !== undefined) applyDefaults(sub, value[k]);
  }
  if (isObject(schema.additionalProperties)) for (const v of Object.values(value)) applyDefaults(schema.additionalProperties, v);
}

/** Defaulting then pruning, as before (kept for callers that want both in place). */
export function applyDefaultsAndPrune(schema: Obj, value: unknown): void {
  prune(schema, value);
  applyDefaults(schema, value);
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** An ajv error worded like kube-openapi's validation errors. */
function toFieldError(e: ErrorObject, doc: unknown): FieldError | undefined {
  const at = fieldPath(e.instancePath);
  let value: unknown = doc;
  for (const seg of e.instancePath.split('/').slice(1)) value = (value as any)?.[seg];
  const p = e.params as Record<string, any>;
  switch (e.keyword) {
    case 'required': return required(join(at, String(p.missingProperty)));
    case 'type':
      return { ...invalidValue(at, typeName(value), `${at} in body must be of type ${String(p.type)}: "${typeName(value)}"`), type: 'FieldValueTypeInvalid' };
    case 'enum':
      return {
        type: 'FieldValueNotSupported', field: at,
        body: `Unsupported value: ${JSON.stringify(value)}: supported values: ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    case 'minimum': return invalidValue(at, value, `${at} in body should be greater than or equal to ${p.limit}`);
    case 'maximum': return invalidValue(at, value, `${at} in body should be less than or equal to ${p.limit}`);
    case 'exclusiveMinimum': return invalidValue(at, value, `${at} in body should be greater than ${p.limit}`);
    case 'exclusiveMaximum': return invalidValue(at, value, `${at} in body should be less than ${p.limit}`);
    case 'minLength': return invalidValue(at, value, `${at} in body should be at least ${p.limit} chars long`);
    case 'maxLength': return { type: 'FieldValueTooLong', field: at, body: `Too long: may not be more than ${p.limit} bytes` };
    case 'pattern': return invalidValue(at, value, `${at} in body should match '${p.pattern}'`);
    case 'minItems': return invalidValue(at, value, `${at} in body should have at least ${p.limit} items`);
    case 'maxItems': return { type: 'FieldValueTooMany', field: at, body: `Too many: ${(value as unknown[]).length}: must have at most ${p.limit} items` };
    case 'minProperties': return invalidValue(at, value, `${at} in body should have at least ${p.limit} properties`);
    case 'maxProperties': return { type: 'FieldValueTooMany', field: at, body: `Too many: must have at most ${p.limit} items` };
    // oneOf/anyOf report their branches' errors too; those carry the useful message.
    case 'oneOf': case 'anyOf': case 'if': return undefined;
    default: return invalidValue(at, value, `${at} in body ${e.message ?? 'is invalid'}`);
  }
}

export interface SchemaResult {
  /** Paths of the fields pruned as unknown (`spec.foo`). */
  unknownFields: string[];
  errors: FieldError[];
}

/** One CRD version's openAPIV3Schema, compiled once. */
export class CrdSchema {
  readonly schema: Obj;
  private readonly validate: ValidateFunction;

  constructor(schema: Obj, ajv: Ajv = CrdSchema.ajv()) {
    this.schema = schema;
    // metadata is validated as ObjectMeta by the server, not by the CRD's schema.
    const { metadata: _meta, ...props } = (this.schema.properties ?? {}) as Obj;
    this.validate = ajv.compile({ ...this.schema, properties: props });
  }

  static ajv(): Ajv {
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
    for (const k of EXTENSIONS) ajv.addKeyword(k);
    return ajv;
  }

  /**
   * Prunes and defaults `obj` in place (metadata untouched), then validates it and evaluates the
   * CEL rules (`old` is the stored object on update, for transition rules).
   */
  process(obj: Obj, old?: Obj): SchemaResult {
    const { metadata } = obj;
    delete obj.metadata;
    const unknownFields = prune(this.schema, obj);
    applyDefaults(this.schema, obj);
    const errors: FieldError[] = [];
    if (!this.validate(obj)) {
      for (const e of this.validate.errors ?? []) {
        const fe = toFieldError(e, obj);
        if (fe && !errors.some((x) => x.field === fe.field && x.body === fe.body)) errors.push(fe);
      }
    }
    // Like the real server, CEL rules are skipped when a type or enum error would make them
    // meaningless, and that is said.
    if (errors.some((e) => e.type === 'FieldValueTypeInvalid' || e.type === 'FieldValueNotSupported')) {
      errors.push({ ...invalidValue('<nil>', 'null', 'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation'), field: '<nil>' });
    } else {
      const oldBody = old ? { ...old, metadata: undefined } : undefined;
      errors.push(...celErrors(this.schema, obj, oldBody));
    }
    obj.metadata = metadata;
    return { unknownFields, errors };
  }
}
