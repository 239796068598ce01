/**
 * Validates custom resources the way the API server does for our CRDs: ajv on the version's
 * openAPIV3Schema, plus the unknown fields the server would prune (strict field validation
 * rejects them). CEL rules are not evaluated.
 */
import { Ajv } from 'ajv';

/** Fields the API server would prune (strict field validation rejects them). */
function unknownFields(s: any, v: any, path = ''): string[] {
  if (v === null || typeof v !== 'object' || s['x-kubernetes-preserve-unknown-fields']) return [];
  if (Array.isArray(v)) return s.items ? v.flatMap((x, i) => unknownFields(s.items, x, `${path}[${i}]`)) : [];
  if (s.additionalProperties) return Object.entries(v).flatMap(([k, x]) => unknownFields(s.additionalProperties, x, `${path}.${k}`));
  const out: string[] = [];
  for (const [k, x] of Object.entries(v)) {
    if (path === '' && k === 'metadata') continue;
    const sub = s.properties?.[k];
    if (!sub) out.push(`${path}.${k}`);
    else out.push(...unknownFields(sub, x, `${path}.${k}`));
  }
  return out;
}

export function crdValidator(schemaOf: (kind: string) => any) {
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  for (const k of ['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-int-or-string', 'x-kubernetes-validations',
    'x-kubernetes-list-type', 'x-kubernetes-list-map-keys']) ajv.addKeyword(k);
  return (kind: string, obj: unknown): string[] => {
    const validate = ajv.compile(schemaOf(kind));
    const ok = validate(obj);
    return [
      ...(ok ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`)),
      ...unknownFields(schemaOf(kind), obj).map((p) => `${p}: unknown field`),
    ];
  };
}

