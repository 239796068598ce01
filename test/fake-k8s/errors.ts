/**
 * Errors as the real API server words them: a `Status` with reason, code, details and, for
 * Invalid, one cause per field error (k8s.io/apimachinery/pkg/api/errors).
 */
import { qualifiedKind, qualifiedResource, type Obj, type ResourceDef } from './resources.js';

export class HttpError extends Error {
  constructor(readonly code: number, readonly reason: string, message: string, readonly details?: Obj) {
    super(message);
  }
}

export function statusOf(err: HttpError): Obj {
  return {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: err.message, reason: err.reason, code: err.code, ...(err.details ? { details: err.details } : {}),
  };
}

export function notFound(def: ResourceDef, name: string): HttpError {
  return new HttpError(404, 'NotFound', `${qualifiedResource(def)} "${name}" not found`, { name, group: def.group, kind: def.plural });
}

export function alreadyExists(def: ResourceDef, name: string): HttpError {
  return new HttpError(409, 'AlreadyExists', `${qualifiedResource(def)} "${name}" already exists`, { name, group: def.group, kind: def.plural });
}

export function conflict(def: ResourceDef, name: string): HttpError {
  return new HttpError(409, 'Conflict',
    `Operation cannot be fulfilled on ${qualifiedResource(def)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    { name, group: def.group, kind: def.plural });
}

/** One field.Error: `field: body`, e.g. `spec.x: Required value`. */
export interface FieldError {
  /** FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, FieldValueTooLong, … */
  type: string;
  field: string;
  /** What follows `field: ` (e.g. `Invalid value: "x": must be …`). */
  body: string;
}

export const required = (field: string): FieldError => ({ type: 'FieldValueRequired', field, body: 'Required value' });

export function invalidValue(field: string, value: unknown, detail: string): FieldError {
  return { type: 'FieldValueInvalid', field, body: `Invalid value: ${formatValue(value)}: ${detail}` };
}

/** An Invalid error whose value is printed as given (Go's %#v of non-string values, e.g. `0x0`). */
export function invalidRaw(field: string, printed: string, detail: string): FieldError {
  return { type: 'FieldValueInvalid', field, body: `Invalid value: ${printed}: ${detail}` };
}

/** How field.Error prints a value: strings quoted, objects by type name, numbers as is. */
export function formatValue(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return '"array"';
  if (typeof v === 'object') return '"object"';
  return String(v);
}

/** errors.NewInvalid: `Kind.group "name" is invalid: <one error>` or `…: [e1, e2]`. */
export function invalid(def: ResourceDef, name: string, errs: FieldError[]): HttpError {
  const texts = errs.map((e) => `${e.field}: ${e.body}`);
  const agg = texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`;
  return new HttpError(422, 'Invalid', `${qualifiedKind(def)} "${name}" is invalid: ${agg}`, {
    name, group: def.group, kind: def.kind,
    causes: errs.map((e) => ({ reason: e.type, message: e.body, field: e.field })),
  });
}

export function forbidden(def: ResourceDef, name: string | undefined, reason: string): HttpError {
  const what = name ? `${qualifiedResource(def)} "${name}"` : qualifiedResource(def);
  return new HttpError(403, 'Forbidden', `${what} is forbidden: ${reason}`, { ...(name ? { name } : {}), group: def.group, kind: def.plural });
}

export const UNSUPPORTED_PATCH_MESSAGE = 'the body of the request was in an unknown format - accepted media types include: '
  + 'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml';
