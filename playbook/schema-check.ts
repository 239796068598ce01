/**
 * Runs the JSON Schema with ajv and turns its errors into PlaybookIssues whose paths use the
 * same notation as the rest of the language (`workflow[2].tool.endpiont`) and whose messages
 * say what to change.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { playbookJsonSchema, playbookV1JsonSchema } from './schema.js';
import { formatPath, type PathSeg } from './issues.js';
import type { PlaybookIssue } from './types.js';

let compiled: { v2: ValidateFunction; v1: ValidateFunction } | undefined;

function validators(): { v2: ValidateFunction; v1: ValidateFunction } {
  if (!compiled) {
    const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, allowUnionTypes: true });
    compiled = { v2: ajv.compile(playbookJsonSchema), v1: ajv.compile(playbookV1JsonSchema) };
  }
  return compiled;
}

function pointerToSegs(pointer: string): PathSeg[] {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

function describe(segs: PathSeg[]): string {
  const last = segs[segs.length - 1];
  if (segs[0] === 'workflow' && segs.length === 2) return 'a step';
  if (segs[0] === 'workflow' && segs.length >= 3) return typeof last === 'string' ? `'${last}'` : 'this entry';
  return segs.length ? `'${formatPath(segs)}'` : 'the document';
}

function allowedKeys(e: ErrorObject): string {
  const props = (e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return props ? `; allowed: ${Object.keys(props).join(', ')}` : '';
}

function translate(e: ErrorObject): PlaybookIssue | undefined {
  const segs = pointerToSegs(e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'if':
      return undefined; // the failing `then` branch is reported on its own
    case 'additionalProperties': {
      const key = String(p.additionalProperty);
      return { path: formatPath([...segs, key]), severity: 'error', message: `unknown field '${key}' in ${describe(segs)}${allowedKeys(e)}` };
    }
    case 'required': {
      const key = String(p.missingProperty);
      return { path: formatPath([...segs, key]), severity: 'error', message: `missing required field '${key}' in ${describe(segs)}` };
    }
    case 'enum':
      return {
        path: formatPath(segs),
        severity: 'error',
        message: `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    case 'const':
      return { path: formatPath(segs), severity: 'error', message: `must be ${JSON.stringify(p.allowedValue)}` };
    case 'type':
      return { path: formatPath(segs), severity: 'error', message: `must be ${String(p.type).replace(/,/g, ' or ')}` };
    default:
      return { path: formatPath(segs), severity: 'error', message: e.message ?? e.keyword };
  }
}

/** Schema problems of a raw document; `v1` selects the relaxed schema for v1 documents. */
export function checkSchema(doc: unknown, v1: boolean): PlaybookIssue[] {
  const validate = v1 ? validators().v1 : validators().v2;
  if (validate(doc)) return [];
  const seen = new Set<string>();
  const out: PlaybookIssue[] = [];
  for (const e of validate.errors ?? []) {
    const issue = translate(e);
    if (!issue) continue;
    const key = `${issue.path}\0${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(issue);
  }
  return out;
}
