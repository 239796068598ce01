/**
 * Validates custom resources the way the API server does for our CRDs, with the fake API
 * server's schema code (test/fake-k8s/schema.ts): structural pruning (reported as unknown fields,
 * which strict field validation rejects), defaulting, the openAPIV3Schema in the real server's
 * wording, and the x-kubernetes-validations CEL rules.
 */
import { CrdSchema } from '../fake-k8s/schema.js';

export function crdValidator(schemaOf: (kind: string) => any) {
  const ajv = CrdSchema.ajv();
  const compiled = new Map<string, CrdSchema>();
  return (kind: string, obj: unknown): string[] => {
    let schema = compiled.get(kind);
    if (!schema) {
      schema = new CrdSchema(schemaOf(kind), ajv);
      compiled.set(kind, schema);
    }
    const { unknownFields, errors } = schema.process(structuredClone(obj) as Record<string, any>);
    return [
      ...errors.map((e) => `${e.field}: ${e.body}`),
      ...unknownFields.map((p) => `.${p}: unknown field`),
    ];
  };
}
