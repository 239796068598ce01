/**
 * Schema validation of credential data and keychain token data (spec "Schema definition").
 * Rules, applied in order:
 *   1. each required field absent → `Missing required field: <field>`
 *   2. each present field whose type differs → `Field '<field>' must be <type>, got <actual type>`
 *   3. when `fields` is non-empty, present fields not in it → `Unexpected fields: <a>, <b>`
 * Valid when there are no errors. Type names: string, integer, boolean, number, array, object
 * (and `null` as an actual type). `number` accepts integers; `integer` only whole numbers.
 */
import type { Json, JsonObject } from '../../playbook/types.js';

export const SCHEMA_TYPES = ['string', 'integer', 'boolean', 'number', 'array', 'object'] as const;
export type SchemaType = (typeof SCHEMA_TYPES)[number];

export interface SchemaDefinition {
  fields?: string[];
  required?: string[];
  types?: Record<string, string>;
  description?: string;
}

export interface ValidationResult {
  valid: boolean;
  errors: string[];
}

export function typeOf(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  if (typeof value === 'object') return 'object';
  return typeof value; // string, boolean
}

function matches(value: unknown, type: string): boolean {
  const actual = typeOf(value);
  if (type === 'number') return actual === 'number' || actual === 'integer';
  return actual === type;
}

export function validateData(data: JsonObject, schema: SchemaDefinition | null | undefined): ValidationResult {
  const errors: string[] = [];
  if (!schema) return { valid: true, errors };
  const has = (f: string) => Object.prototype.hasOwnProperty.call(data, f) && data[f] !== undefined;
  for (const field of schema.required ?? []) {
    if (!has(field)) errors.push(`Missing required field: ${field}`);
  }
  for (const [field, type] of Object.entries(schema.types ?? {})) {
    if (has(field) && !matches(data[field], type)) errors.push(`Field '${field}' must be ${type}, got ${typeOf(data[field])}`);
  }
  const allowed = schema.fields ?? [];
  if (allowed.length > 0) {
    const extra = Object.keys(data).filter((k) => !allowed.includes(k));
    if (extra.length > 0) errors.push(`Unexpected fields: ${extra.join(', ')}`);
  }
  return { valid: errors.length === 0, errors };
}

/** Checks the schema document itself (a bad schema is a 400 on store, not a validation result). */
export function checkSchemaShape(schema: Json | undefined): string | null {
  if (schema === undefined || schema === null) return null;
  if (typeof schema !== 'object' || Array.isArray(schema)) return 'schema must be an object';
  const s = schema as JsonObject;
  for (const k of ['fields', 'required'] as const) {
    if (s[k] !== undefined && !(Array.isArray(s[k]) && (s[k] as Json[]).every((x) => typeof x === 'string'))) {
      return `schema.${k} must be an array of strings`;
    }
  }
  if (s.types !== undefined) {
    if (typeof s.types !== 'object' || s.types === null || Array.isArray(s.types)) return 'schema.types must be an object of field name to type';
    for (const [f, t] of Object.entries(s.types)) {
      if (typeof t !== 'string' || !(SCHEMA_TYPES as readonly string[]).includes(t)) {
        return `schema.types.${f} must be one of ${SCHEMA_TYPES.join(', ')}`;
      }
    }
  }
  if (s.description !== undefined && typeof s.description !== 'string') return 'schema.description must be a string';
  return null;
}
