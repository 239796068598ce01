/**
 * Runs the JSON Schema with ajv and turns its errors into PlaybookIssues whose paths use the
 * same notation as the rest of the language (`workflow[2].tool.endpiont`) and whose messages
 * say what to change.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { WHOLE_TEMPLATE_PATTERN, playbookJsonSchema, playbookV1JsonSchema, toolJsonSchema } from './schema.js';
import { closest, formatPath, isPlainObject, type PathSeg } from './issues.js';
import type { PlaybookIssue } from './types.js';

/** A schema issue; `scope` is the path it is about when that differs from where it points. */
export interface SchemaIssue extends PlaybookIssue {
  scope: string;
}

let ajv: Ajv | undefined;
const compiled: { v1?: ValidateFunction; v2?: ValidateFunction; tool?: ValidateFunction } = {};

/** Compiled on first use, one schema at a time: compiling costs more than most validations. */
function validator(v1: boolean): ValidateFunction {
  ajv ??= new Ajv({ allErrors: true, verbose: true, strict: true, strictTypes: false, allowUnionTypes: true });
  if (v1) return (compiled.v1 ??= ajv.compile(playbookV1JsonSchema));
  return (compiled.v2 ??= ajv.compile(playbookJsonSchema));
}

function pointerToSegs(pointer: string): PathSeg[] {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

function at(doc: unknown, segs: PathSeg[]): unknown {
  let v = doc;
  for (const s of segs) v = (v as Record<string | number, unknown> | undefined)?.[s];
  return v;
}

/** Names the object at `segs` the way an author thinks of it: "step 'fetch'", "case entry", … */
function describe(doc: unknown, segs: PathSeg[]): string {
  const last = segs[segs.length - 1];
  const parent = segs[segs.length - 2];
  if (segs[0] === 'workflow' && segs.length === 2) {
    const name = (at(doc, segs) as { step?: unknown } | undefined)?.step;
    return typeof name === 'string' ? `step '${name}'` : 'a step';
  }
  if (segs[0] === 'workflow' && segs.length > 2) {
    const name = (at(doc, segs.slice(0, 2)) as { step?: unknown } | undefined)?.step;
    const inStep = typeof name === 'string' ? ` of step '${name}'` : '';
    if (parent === 'case' && typeof last === 'number') return `case entry${inStep}`;
    if (parent === 'next' && typeof last === 'number') return `next entry${inStep}`;
    if (parent === 'retry' && typeof last === 'number') return `retry policy${inStep}`;
    if (typeof last === 'string') return `'${last}'${inStep}`;
    return `this entry${inStep}`;
  }
  return segs.length ? `'${formatPath(segs)}'` : 'the document';
}

function translate(e: ErrorObject, doc: unknown): SchemaIssue | undefined {
  const segs = pointerToSegs(e.instancePath);
  const here = formatPath(segs);
  const p = e.params as Record<string, unknown>;
  const issue = (path: string, message: string, scope = path): SchemaIssue => ({ path, message, severity: 'error', scope });
  switch (e.keyword) {
    case 'if':
      return undefined; // the failing `then` branch is reported on its own
    case 'additionalProperties': {
      const key = String(p.additionalProperty);
      const allowed = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      const hint = closest(key, allowed);
      const tail = hint ? `; did you mean '${hint}'?` : allowed.length ? `; allowed: ${allowed.join(', ')}` : '';
      return issue(formatPath([...segs, key]), `unknown field '${key}' in ${describe(doc, segs)}${tail}`);
    }
    case 'required': {
      const key = String(p.missingProperty);
      // About the object as a whole: a sibling problem (e.g. a bare `args`) explains it already.
      return issue(formatPath([...segs, key]), `missing required field '${key}' in ${describe(doc, segs)}`, segs.length ? here : key);
    }
    case 'enum':
      return issue(here, `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}, got ${JSON.stringify(e.data)}`);
    case 'const':
      return issue(here, `must be ${JSON.stringify(p.allowedValue)}, got ${JSON.stringify(e.data)}`);
    case 'type':
      return issue(here, `must be ${String(p.type).replace(/,/g, ' or ')}, got ${isPlainObject(e.data) ? 'a mapping' : Array.isArray(e.data) ? 'a list' : e.data === null ? 'null' : typeof e.data}`);
    case 'minItems':
      return issue(here, here === 'workflow' ? 'workflow needs at least one step' : `must have at least ${String(p.limit)} item(s)`);
    case 'pattern':
      if (p.pattern === WHOLE_TEMPLATE_PATTERN) {
        return issue(here, `must be a mapping, or one whole-expression template that renders to one (such as "{{ workload.${String(segs[segs.length - 1])} }}"), got text ${JSON.stringify(String(e.data).slice(0, 60))}`);
      }
      return issue(here, `must match ${String(p.pattern)}`);
    case 'minLength':
      return issue(here, 'must not be empty');
    default:
      return issue(here, e.message ?? e.keyword);
  }
}

/** Schema problems of a raw document; `v1` selects the relaxed schema for v1 documents. */
export function checkSchema(doc: unknown, v1: boolean): SchemaIssue[] {
  const validate = validator(v1);
  if (validate(doc)) return [];
  const seen = new Set<string>();
  const out: SchemaIssue[] = [];
  for (const e of validate.errors ?? []) {
    const issue = translate(e, doc);
    if (!issue) continue;
    const key = `${issue.path}\0${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(issue);
  }
  return out;
}

/**
 * Schema problems of one tool spec written outside a step's `tool` (a sink), reported at `at`;
 * `origin` maps a top-level field to where the author wrote it (a sink may split its fields
 * between `tool: {...}` and the sink itself).
 */
export function checkToolSpec(tool: unknown, at: PathSeg[], origin: (field: string) => PathSeg[] = (f) => [...at, f]): SchemaIssue[] {
  ajv ??= new Ajv({ allErrors: true, verbose: true, strict: true, strictTypes: false, allowUnionTypes: true });
  const validate = (compiled.tool ??= ajv.compile(toolJsonSchema));
  if (validate(tool)) return [];
  const out: SchemaIssue[] = [];
  const seen = new Set<string>();
  for (const e of validate.errors ?? []) {
    const segs = pointerToSegs(e.instancePath);
    const prefix = segs.length ? [...origin(String(segs[0])), ...segs.slice(1)] : at;
    const moved = { ...e, instancePath: '/' + prefix.map((s) => String(s).replace(/~/g, '~0').replace(/\//g, '~1')).join('/') };
    const issue = translate(moved, undefined);
    if (!issue) continue;
    if (e.keyword === 'additionalProperties' && segs.length === 0) {
      const key = String(p(e).additionalProperty);
      issue.path = issue.scope = formatPath(origin(key));
      issue.message = issue.message.replace(/ in .*?(;|$)/, ` in this ${String((tool as { kind?: unknown }).kind)} sink$1`);
    }
    const key = `${issue.path}\0${issue.message}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(issue);
    }
  }
  return out;
}

function p(e: ErrorObject): Record<string, unknown> {
  return e.params as Record<string, unknown>;
}
