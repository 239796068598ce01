/**
 * Text → normalised playbook: size limit, YAML, written-document checks, normalisation,
 * JSON Schema, graph validation. Every stage reports into one list so an author sees all
 * problems at once; a problem already explained by an earlier stage (with a better message)
 * is not repeated by a later one at the same place.
 */
import { parseDocument, type YAMLError } from 'yaml';
import type { ParseResult, PlaybookIssue } from './types.js';
import { Issues, ancestors, describeType, isPlainObject } from './issues.js';
import { checkSchema } from './schema-check.js';
import { isV1, normalizePlaybook } from './normalize.js';
import { checkWrittenDocument, validatePlaybook } from './validate.js';
import { checkTemplates } from './template-check.js';
import { MAX_NESTING, valueDepth, yamlDepth } from './nesting.js';
import { convertReferenceForms } from './convert.js';

/** Largest playbook accepted, in bytes of UTF-8 text (2 MiB). */
export const MAX_PLAYBOOK_BYTES = 2 * 1024 * 1024;

export interface ParseOptions {
  /** Overrides MAX_PLAYBOOK_BYTES (bytes). */
  maxBytes?: number;
}

const fail = (path: string, message: string): ParseResult => ({ errors: [{ path, message, severity: 'error' }], warnings: [] });

function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} bytes`;
}

function yamlError(e: YAMLError): PlaybookIssue {
  const pos = e.linePos?.[0];
  const where = pos ? `line ${pos.line}, column ${pos.col}: ` : '';
  let first = e.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
  // The library's wording names its own API; say what the author should do instead.
  if (e.code === 'MULTIPLE_DOCS') first = 'the file holds several YAML documents (---); a playbook is one document';
  return { path: '', message: `invalid YAML at ${where}${first}`, severity: 'error' };
}

/** Parses playbook YAML (or JSON, a subset of YAML) into the normalised v2 playbook. */
export function parsePlaybook(text: string, opts: ParseOptions = {}): ParseResult {
  const limit = opts.maxBytes ?? MAX_PLAYBOOK_BYTES;
  const size = Buffer.byteLength(text, 'utf8');
  if (size > limit) {
    return fail('', `playbook is too large: ${formatBytes(size)} (${size} bytes); the limit is ${formatBytes(limit)} (${limit} bytes)`);
  }
  if (!text.trim()) return fail('', 'the playbook document is empty');
  const nesting = yamlDepth(text);
  if (nesting.depth > MAX_NESTING) {
    return fail('', `playbook nests too deeply: more than ${MAX_NESTING} levels at line ${nesting.line}; the limit is ${MAX_NESTING}`);
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length) return { errors: doc.errors.map(yamlError), warnings: [] };
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 1000 });
  } catch (e) {
    return fail('', `invalid YAML: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (value === null || value === undefined) return fail('', 'the playbook document is empty');
  return parsePlaybookObject(value);
}

/** Same as parsePlaybook for a document already decoded (JSON body, custom resource spec). */
export function parsePlaybookObject(input: unknown): ParseResult {
  if (!isPlainObject(input)) {
    return fail('', `a playbook must be a mapping with apiVersion, kind, metadata and workflow; got ${describeType(input)}`);
  }
  let doc: Record<string, unknown> = input;
  // Decoded documents (JSON bodies, custom resources) skip the text check; the walkers below recurse.
  if (valueDepth(doc) > MAX_NESTING) return fail('', `playbook nests too deeply: more than ${MAX_NESTING} levels; the limit is ${MAX_NESTING}`);
  // Reference-era conventions run as their spec forms; each says what to write instead.
  const conventions = convertReferenceForms(doc);
  const converted = new Issues();
  if (conventions.changes.length) {
    doc = conventions.doc;
    for (const c of conventions.changes) converted.warn(c.path, `deprecated: ${c.message} (playflow playbook convert rewrites it)`);
  }
  for (const c of conventions.unconverted) converted.warn(c.path, c.message);
  const written = new Issues();
  checkWrittenDocument(doc, written);
  const templates = new Issues();
  checkTemplates(doc, templates);

  const semantic = new Issues();
  const { playbook, sources } = normalizePlaybook(doc, semantic);

  const schema = checkSchema(doc, isV1(doc.apiVersion));
  const graph = validatePlaybook(playbook, sources);

  const errors: PlaybookIssue[] = [];
  // An issue is dropped when an earlier one is at, above or below the place it is about.
  // Sets keep this linear: a 2 MiB document can hold tens of thousands of problems.
  const at = new Set<string>();
  const above = new Set<string>();
  const record = (issue: PlaybookIssue) => {
    errors.push(issue);
    at.add(issue.path);
    for (const a of ancestors(issue.path)) above.add(a);
  };
  const add = (issue: PlaybookIssue, scope = issue.path) => {
    if (at.has(issue.path) || ancestors(issue.path).some((a) => at.has(a)) || at.has(scope) || above.has(scope)) return;
    record(issue);
  };
  for (const e of written.errors) record(e);
  for (const e of templates.errors) add(e);
  for (const e of semantic.errors) add(e);
  for (const { scope, ...e } of schema) add(e, scope);
  for (const e of graph) if (e.severity === 'error') add(e);

  const warnings = [...converted.warnings, ...written.warnings, ...templates.warnings, ...semantic.warnings, ...graph.filter((w) => w.severity === 'warning')];
  return errors.length ? { errors: capped(errors), warnings: capped(warnings) } : { playbook, errors, warnings: capped(warnings) };
}

/** Most problems an author can act on at once; the rest are counted, not listed. */
export const MAX_REPORTED_ISSUES = 200;

function capped(issues: PlaybookIssue[]): PlaybookIssue[] {
  if (issues.length <= MAX_REPORTED_ISSUES) return issues;
  const rest = issues.length - MAX_REPORTED_ISSUES;
  const severity = issues[0].severity;
  return [...issues.slice(0, MAX_REPORTED_ISSUES), { path: '', severity, message: `… and ${rest} more ${severity === 'error' ? 'errors' : 'warnings'}` }];
}
