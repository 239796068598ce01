/**
 * Legacy and v1 spellings → the v2 shape of types.ts. Every rewrite leaves a deprecation
 * warning at the path the author wrote, so a playbook can be migrated by reading the warnings.
 *
 * Normalisation is defensive: it runs on documents that may also fail the schema, reports what
 * it cannot make sense of as errors, and never throws on malformed input. It records, for every
 * next target and step it builds, the path of that target in the written document, so semantic
 * validation of the normalised playbook can still point at the author's text.
 */
import {
  type PlaybookSchedule,
  API_VERSIONS,
  TOOL_KINDS,
  type Action,
  type ApiVersion,
  type CaseEntry,
  type Json,
  type JsonObject,
  type KeychainDef,
  type LegacyPagination,
  type Loop,
  type NextTarget,
  type NumberOrTemplate,
  type Playbook,
  type PlaybookMetadata,
  type RetryPolicy,
  type RetryThen,
  type Step,
  type Tool,
  type ToolKind,
  type WorkbookTask,
} from './types.js';
import { Issues, closest, describeType, formatPath, isPlainObject, type PathSeg } from './issues.js';
import { isLegacyOperation, operationToTool } from './legacy-operations.js';
import { checkCatalogPath, normalizeCatalogPath } from './catalog-path.js';
import { checkToolSpec } from './schema-check.js';

/** Where each normalised object (step, next target) came from in the written document. */
export type SourceMap = WeakMap<object, string>;

export interface NormalizeResult {
  playbook: Playbook;
  sources: SourceMap;
}

/** Fields a v2 step may carry (plus the deprecated `call`). */
export const STEP_FIELDS = ['step', 'desc', 'args', 'loop', 'tool', 'case', 'next', 'vars', 'retry', 'call'] as const;

export const ACTION_NAMES = ['call', 'retry', 'collect', 'sink', 'set', 'result', 'next', 'fail', 'skip'] as const;

/** v1 `type` spellings that are not v2 kind names. */
const V1_KIND_ALIASES: Record<string, ToolKind> = { secrets: 'secret', playbooks: 'playbook' };
const ROUTING_TYPES = new Set(['start', 'end']);

/**
 * The field a tool kind cannot run without. `names`: the spellings an author writes (the field
 * and its synonym, normalised into it before the check); `provided`: every field that gives it
 * at run time (legacy spellings the worker still reads, a `script` it loads, the table write of
 * postgres and duckdb, a legacy table `operation`).
 */
interface ToolNeed {
  field: string;
  names: readonly string[];
  provided: readonly string[];
  what: string;
}
const TOOL_NEEDS: Partial<Record<ToolKind, ToolNeed>> = {
  http: { field: 'endpoint', names: ['endpoint', 'url'], provided: ['endpoint'], what: "'endpoint' (or its synonym 'url'): the URL to call" },
  postgres: {
    field: 'command', names: ['command', 'query'], provided: ['command', 'statement', 'sql', 'script', 'table', 'operation'],
    what: "'command' (or its synonym 'query'): the SQL to run, or 'table' with args for a table write",
  },
  duckdb: {
    field: 'query', names: ['query', 'command'], provided: ['query', 'command', 'sql', 'table'],
    what: "'query' (or 'command'): the SQL to run, or 'table' with args for a table write",
  },
  playbook: { field: 'path', names: ['path'], provided: ['path'], what: "'path': the catalog path of the playbook to run" },
};

/**
 * The step writes a tool (`tool`, `call`, a `type` other than start/end): when it has none after
 * normalisation, an error already says why (an unknown call type, v1 `type` in a v2 document, …).
 */
function writesTool(raw: Record<string, unknown>): boolean {
  if (raw.tool !== undefined || raw.call !== undefined) return true;
  return raw.type !== undefined && !(typeof raw.type === 'string' && ROUTING_TYPES.has(raw.type));
}

const LOOP_VAR = /(?<![\w.])_loop\.(index|count)\b/g;
const WHOLE_TEMPLATE = /^\s*\{\{([\s\S]*)\}\}\s*$/;

export function isV1(apiVersion: unknown): boolean {
  return typeof apiVersion === 'string' && apiVersion.endsWith('/v1');
}

export function isToolKind(v: unknown): v is ToolKind {
  return typeof v === 'string' && (TOOL_KINDS as readonly string[]).includes(v);
}

/** Deep copy into plain JSON (YAML may give Dates or other objects; functions never occur). */
function toJson(v: unknown): Json {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(toJson);
  if (typeof v === 'object') {
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = toJson(x);
    return out;
  }
  return String(v);
}

function toObject(v: unknown): JsonObject {
  return isPlainObject(v) ? (toJson(v) as JsonObject) : {};
}

function stripBraces(expr: string): string {
  const m = WHOLE_TEMPLATE.exec(expr);
  return (m ? m[1] : expr).trim();
}

/** `tool: {kind: http, method: GET, ...}` — enough of the replacement to copy from a warning. */
function describeTool(tool: Tool): string {
  const extra = tool.operation !== undefined ? `, operation: ${String(tool.operation)}` : tool.method !== undefined ? `, method: ${String(tool.method)}` : '';
  return `tool: {kind: ${tool.kind}${extra}, ...}`;
}

class Normalizer {
  readonly sources: SourceMap = new WeakMap();
  readonly v1: boolean;

  constructor(
    private readonly doc: Record<string, unknown>,
    private readonly issues: Issues,
  ) {
    this.v1 = isV1(doc.apiVersion);
  }

  run(): Playbook {
    const doc = this.doc;
    const apiVersion = (API_VERSIONS as readonly unknown[]).includes(doc.apiVersion) ? (doc.apiVersion as ApiVersion) : 'playflow.io/v2';
    const playbook: Playbook = {
      apiVersion,
      kind: 'Playbook',
      metadata: this.metadata(),
      workload: toObject(doc.workload),
      keychain: Array.isArray(doc.keychain) ? doc.keychain.map((k) => this.keychainDef(k)) : [],
      workbook: Array.isArray(doc.workbook)
        ? doc.workbook.flatMap((t, i) => this.workbookTask(t, ['workbook', i]) ?? [])
        : [],
      workflow: Array.isArray(doc.workflow)
        ? doc.workflow.flatMap((s, i) => this.step(s, ['workflow', i]) ?? [])
        : [],
    };
    // the schema checked the entries' shape; the server checks cron and time zone
    if (typeof doc.pool === 'string') playbook.pool = doc.pool;
    if (isPlainObject(doc.concurrency) && typeof doc.concurrency.limit === 'number') playbook.concurrency = { limit: doc.concurrency.limit };
    if (Array.isArray(doc.schedules)) playbook.schedules = doc.schedules.filter(isPlainObject) as unknown as PlaybookSchedule[];
    return playbook;
  }

  private metadata(): PlaybookMetadata {
    const doc = this.doc;
    const raw = isPlainObject(doc.metadata) ? doc.metadata : {};
    const meta: PlaybookMetadata = { ...toObject(raw), name: typeof raw.name === 'string' ? raw.name : '' };
    if (typeof raw.path === 'string') {
      // the same normalisation and check as registration, so validate never passes what it refuses
      // reference-era documents write `/team/etl`: the document's path is normalised with a warning
      // (validate and registration parse alike); a path sent in a request is never rewritten
      meta.path = normalizeCatalogPath(raw.path).replace(/^\/+|\/+$/g, '');
      if (meta.path && meta.path !== raw.path.trim()) {
        this.issues.warn(['metadata', 'path'], `deprecated: catalog paths have no leading or trailing '/': stored as '${meta.path}'; write metadata.path: ${meta.path}`);
      }
      const problem = meta.path ? checkCatalogPath(meta.path) : null;
      if (problem) this.issues.error(['metadata', 'path'], problem);
      if (!meta.path) delete meta.path;
    } else delete meta.path;
    if (typeof raw.description !== 'string') delete meta.description;
    if (isPlainObject(raw.labels)) meta.labels = Object.fromEntries(Object.entries(raw.labels).map(([k, v]) => [k, String(v)]));
    else delete meta.labels;
    if (this.v1) {
      for (const key of ['name', 'path', 'description'] as const) {
        const v = doc[key];
        if (typeof v === 'string' && !meta[key]) {
          meta[key] = v;
          this.issues.warn([key], `deprecated: top-level '${key}' belongs under metadata (metadata.${key})`);
        }
      }
    }
    if (!meta.name && !this.issues.errors.some((e) => e.path === 'metadata.name')) {
      this.issues.error('metadata.name', 'the playbook needs a name: metadata.name');
    }
    return meta;
  }

  private keychainDef(raw: unknown): KeychainDef {
    const def = toObject(raw) as Record<string, Json>;
    // The keychain GET endpoint defaults scope_type to global; declarations follow it.
    return { ...def, scope: (def.scope as KeychainDef['scope']) ?? 'global' } as KeychainDef;
  }

  private workbookTask(raw: unknown, path: PathSeg[]): WorkbookTask | undefined {
    if (!isPlainObject(raw)) return undefined;
    if (isPlainObject(raw.tool)) {
      const task: WorkbookTask = { name: String(raw.name ?? ''), tool: this.tool(raw.tool, [...path, 'tool']) };
      // v1 workbook entries are not checked by the schema, so a misspelt field is named here
      this.toolNeeds(task.tool, [...path, 'tool'], 'tool', !this.v1);
      if (typeof raw.desc === 'string') task.desc = raw.desc;
      return task;
    }
    // v1 workbook entry: {task|name, type, desc, ...tool attributes}
    const { task, name, type, desc, ...attrs } = raw;
    if (!isToolKind(type) && !(typeof type === 'string' && V1_KIND_ALIASES[type])) {
      this.issues.error([...path, 'tool'], "a workbook task needs a tool: {kind, ...}");
      return undefined;
    }
    this.issues.warn(path, "deprecated: workbook task with inline 'type'; write {name, tool: {kind, ...}}");
    const kind = isToolKind(type) ? type : V1_KIND_ALIASES[type as string];
    const out: WorkbookTask = { name: String(task ?? name ?? ''), tool: this.tool({ kind, ...attrs }, path) };
    this.toolNeeds(out.tool, path, 'tool', !this.v1);
    if (typeof desc === 'string') out.desc = desc;
    return out;
  }

  /** Rewrites `_loop.index`/`_loop.count` everywhere in a step, warning at each string. */
  private rewriteLoopVars(v: unknown, path: PathSeg[]): unknown {
    if (typeof v === 'string') {
      if (!LOOP_VAR.test(v)) return v;
      LOOP_VAR.lastIndex = 0;
      this.issues.warn(path, "deprecated: '_loop.index'/'_loop.count' are now '_retry.index'/'_retry.count'");
      return v.replace(LOOP_VAR, '_retry.$1');
    }
    if (Array.isArray(v)) return v.map((x, i) => this.rewriteLoopVars(x, [...path, i]));
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[k] = this.rewriteLoopVars(x, [...path, k]);
      return out;
    }
    return v;
  }

  private step(rawIn: unknown, path: PathSeg[]): Step | undefined {
    if (!isPlainObject(rawIn)) {
      this.issues.error(path, `a step must be a mapping with at least 'step: <name>', got ${describeType(rawIn)}`);
      return undefined;
    }
    const raw = this.rewriteLoopVars(rawIn, path) as Record<string, unknown>;
    const step: Step = { step: typeof raw.step === 'string' ? raw.step : '' };
    this.sources.set(step, formatPath(path));
    if (typeof raw.desc === 'string') step.desc = raw.desc;
    if (typeof raw.pool === 'string') step.pool = raw.pool;
    if (isPlainObject(raw.args)) step.args = toObject(raw.args);

    const tool = this.stepTool(raw, path, step);
    if (tool) step.tool = tool;
    if (raw.loop !== undefined) {
      const loop = this.loop(raw.loop, [...path, 'loop']);
      if (loop) step.loop = loop;
    }
    const cases: CaseEntry[] = Array.isArray(raw.case) ? raw.case.flatMap((c, i) => this.caseEntry(c, [...path, 'case', i]) ?? []) : [];
    if (raw.next !== undefined) {
      const { targets, conditional } = this.structuralNext(raw.next, [...path, 'next']);
      if (targets.length) step.next = targets;
      cases.push(...conditional);
    }
    if (cases.length) step.case = cases;
    if (isPlainObject(raw.vars)) step.vars = toObject(raw.vars);
    if (raw.retry !== undefined) {
      const retry = this.retry(raw.retry, [...path, 'retry']);
      if (retry.length) step.retry = retry;
    }
    if (!step.tool && !writesTool(raw)) {
      // the engine exits a step without a tool at once: a loop or retry on it would never apply
      if (step.loop) {
        this.issues.error([...path, 'loop'], "loop runs the step's tool once per item, but this step has no tool, so the loop would be ignored; give the step a tool or remove loop");
      }
      if (step.retry) {
        this.issues.error([...path, 'retry'], "retry re-runs the step's tool call, but this step has no tool, so the retry policies would be ignored; give the step a tool or remove retry");
      }
    }
    return step;
  }

  /** The step's tool from `tool`, the legacy `call`, or (v1 only) inline `type` + attributes. */
  private stepTool(raw: Record<string, unknown>, path: PathSeg[], step: Step): Tool | undefined {
    const sources = ['tool', 'call', ...(this.v1 ? ['type'] : [])].filter((k) => raw[k] !== undefined);
    if (sources.length > 1) {
      this.issues.error([...path, sources[1]], `a step has one tool: '${sources[0]}' and '${sources[1]}' both define it; keep only 'tool'`);
    }
    if (this.v1 && raw.when !== undefined) {
      this.issues.error([...path, 'when'], "step-level 'when' cannot be converted automatically; route from the previous step with a case entry: case: [{when: <condition>, then: {next: [{step: <this step>}]}}]");
    }
    if (this.v1 && raw.type === undefined) {
      // Without `type` nothing lifts inline attributes, so they would be silently ignored.
      for (const k of Object.keys(raw)) {
        if (!(STEP_FIELDS as readonly string[]).includes(k) && !['with', 'when', 'as'].includes(k)) {
          this.issues.error([...path, k], `unknown step field '${k}'; tool attributes belong under 'tool' (or give the step a 'type' in a v1 document)`);
        }
      }
      if (isPlainObject(raw.with)) {
        step.args = { ...toObject(raw.with), ...(step.args ?? {}) };
        this.issues.warn([...path, 'with'], "deprecated: step-level 'with' is 'args' in v2");
      }
    }
    if (raw.tool !== undefined) {
      const tool = this.tool(raw.tool, [...path, 'tool']);
      // a needed field written on the step beside the tool is reported there (removed or unknown step field)
      const need = Object.hasOwn(TOOL_NEEDS, tool.kind) ? TOOL_NEEDS[tool.kind] : undefined;
      const misplaced = need && [...need.names, ...need.provided].some((f) => raw[f] !== undefined);
      if (isPlainObject(raw.tool) && !misplaced) this.toolNeeds(tool, [...path, 'tool'], 'tool', true);
      return tool;
    }
    if (raw.call !== undefined) return this.legacyCall(raw.call, [...path, 'call']);
    if (this.v1 && raw.type !== undefined) return this.v1Tool(raw, path, step);
    return undefined;
  }

  tool(raw: unknown, path: PathSeg[]): Tool {
    if (!isPlainObject(raw)) {
      this.issues.error(path, `tool must be a mapping with a 'kind', got ${describeType(raw)}`);
      return { kind: 'python' };
    }
    const { kind, ...fields } = toObject(raw);
    if (kind === undefined || kind === null || kind === '') {
      this.issues.error([...path, 'kind'], `tool needs a 'kind': one of ${TOOL_KINDS.join(', ')}`);
    } else if (!isToolKind(kind)) {
      const hint = isLegacyOperation(kind) ? ` ('${kind}' is a legacy operation; use kind: ${String(kind).split('.')[0] === 'db' ? 'postgres' : String(kind).split('.')[0]})` : '';
      this.issues.error([...path, 'kind'], `unknown tool kind '${String(kind)}'; expected one of ${TOOL_KINDS.join(', ')}${hint}`);
    }
    const tool: Tool = { kind: kind as ToolKind, ...fields };
    // Methods are case-insensitive in HTTP; one spelling spares every consumer the check.
    if (tool.kind === 'http' && typeof tool.method === 'string' && !tool.method.includes('{')) tool.method = tool.method.toUpperCase();
    if (tool.kind === 'http' && tool.url !== undefined) {
      if (tool.endpoint === undefined) {
        tool.endpoint = tool.url;
        this.issues.warn([...path, 'url'], "'url' is a synonym of 'endpoint'; normalised to endpoint");
      } else {
        this.issues.error([...path, 'url'], "both 'url' and 'endpoint' are set; keep only 'endpoint'");
      }
      delete tool.url;
    }
    if (tool.kind === 'postgres' && tool.query !== undefined) {
      if (tool.command === undefined) {
        tool.command = tool.query;
        this.issues.warn([...path, 'query'], "'query' is a synonym of 'command' for postgres; normalised to command");
      } else {
        this.issues.error([...path, 'query'], "both 'query' and 'command' are set; keep only 'command'");
      }
      delete tool.query;
    }
    return tool;
  }

  /**
   * A sink: a tool spec, written flat (`{kind, auth, table, args}`) or with its tool apart
   * (`{tool: {kind, auth}, command, args}`); every field is kept and checked by the tool schema.
   */
  private sinkTool(obj: Record<string, unknown>, path: PathSeg[]): Tool {
    const inner = isPlainObject(obj.tool) ? obj.tool : undefined;
    const { tool: _tool, ...flat } = obj;
    if (inner) {
      for (const k of Object.keys(flat)) {
        if (k in inner) this.issues.error([...path, k], `'${k}' is set both in the sink and in its tool; keep one`);
      }
    }
    const merged: Record<string, unknown> = inner ? { ...inner, ...flat } : flat;
    const origin = (f: string): PathSeg[] => (inner && f in inner && !(f in flat) ? [...path, 'tool', f] : [...path, f]);
    if (merged.kind !== undefined && isToolKind(merged.kind)) {
      for (const issue of checkToolSpec(merged, path, origin)) this.issues.error(issue.path, issue.message);
    }
    const tool = this.tool(merged, inner ? [...path, 'tool'] : path);
    this.toolNeeds(tool, path, 'sink', true);
    return tool;
  }

  /**
   * The field the tool's kind cannot run without (TOOL_NEEDS), reported at `at`, where the
   * author writes the tool's fields. `checked`: the schema also checks these fields, and its
   * "unknown field …; did you mean" already explains a misspelt one, so it is not reported twice.
   */
  private toolNeeds(tool: Tool, at: PathSeg[], what: 'tool' | 'sink', checked: boolean): void {
    const need = Object.hasOwn(TOOL_NEEDS, tool.kind) ? TOOL_NEEDS[tool.kind] : undefined;
    if (!need || need.provided.some((f) => tool[f] !== undefined && tool[f] !== null)) return;
    const typo = Object.keys(tool).find((k) => k !== 'kind' && !need.provided.includes(k) && closest(k, need.names) !== undefined);
    if (typo && checked) return;
    const hint = typo ? `; '${typo}' is not one of its fields: did you mean '${closest(typo, need.names)}'?` : '';
    this.issues.error([...at, need.field], `${tool.kind === 'http' ? 'an' : 'a'} ${tool.kind} ${what} needs ${need.what}${hint}`);
  }

  /** `call: {name, type, args}` of the legacy task guide. */
  private legacyCall(raw: unknown, path: PathSeg[]): Tool | undefined {
    if (!isPlainObject(raw)) {
      this.issues.error(path, `call must be a mapping {name, type, args}, got ${describeType(raw)}`);
      return undefined;
    }
    const args = toObject(raw.args);
    const op = isLegacyOperation(raw.type) ? raw.type : isLegacyOperation(raw.name) ? raw.name : undefined;
    if (op) {
      const tool = operationToTool(op, args, [...path, 'args'], this.issues);
      this.issues.warn(path, `deprecated: 'call' with operation '${op}'; write ${describeTool(tool)}`);
      return tool;
    }
    const kind = isToolKind(raw.type) ? raw.type : undefined;
    if (!kind) {
      this.issues.error([...path, 'type'], `unknown call type '${String(raw.type)}'; expected a tool kind (${TOOL_KINDS.join(', ')}) or a legacy operation such as http.get`);
      return undefined;
    }
    this.issues.warn(path, `deprecated: 'call' step; write tool: {kind: ${kind}, ...}`);
    const fields: JsonObject = { kind, ...args };
    // For a workbook call the call's name is the task to run.
    if (kind === 'workbook' && fields.name === undefined && typeof raw.name === 'string') fields.name = raw.name;
    const tool = this.tool(fields, [...path, 'args']);
    this.toolNeeds(tool, [...path, 'args'], 'tool', false);
    return tool;
  }

  /** v1 step: `type` plus inline tool attributes (`endpoint`, `command`, `code`, …). */
  private v1Tool(raw: Record<string, unknown>, path: PathSeg[], step: Step): Tool | undefined {
    const type = raw.type;
    const attrs: JsonObject = {};
    for (const [k, v] of Object.entries(raw)) {
      if (!(STEP_FIELDS as readonly string[]).includes(k) && !['type', 'with', 'when', 'as'].includes(k)) attrs[k] = toJson(v);
    }
    if (raw.as !== undefined) this.issues.warn([...path, 'as'], "'as' has no effect in v2: a step's result is addressed by the step name");
    if (isPlainObject(raw.with)) {
      step.args = { ...toObject(raw.with), ...(step.args ?? {}) };
      this.issues.warn([...path, 'with'], "deprecated: step-level 'with' is 'args' in v2");
    }
    if (typeof type === 'string' && ROUTING_TYPES.has(type)) {
      this.issues.warn([...path, 'type'], `deprecated: 'type: ${type}'; a routing step simply has no tool in v2`);
      return undefined;
    }
    if (isLegacyOperation(type)) {
      const tool = operationToTool(type, attrs, path, this.issues);
      this.issues.warn([...path, 'type'], `deprecated: 'type: ${type}'; write ${describeTool(tool)}`);
      return tool;
    }
    const kind = isToolKind(type) ? type : typeof type === 'string' ? V1_KIND_ALIASES[type] : undefined;
    if (!kind) {
      this.issues.error([...path, 'type'], `unknown step type '${String(type)}'; expected a tool kind (${TOOL_KINDS.join(', ')}), start or end`);
      return undefined;
    }
    if (kind === 'workbook' && attrs.task !== undefined) {
      attrs.name = attrs.task;
      delete attrs.task;
    }
    this.issues.warn([...path, 'type'], `deprecated: 'type: ${String(type)}' with inline attributes; write tool: {kind: ${kind}, ...}`);
    const tool = this.tool({ kind, ...attrs }, path);
    this.toolNeeds(tool, path, 'tool', false);
    return tool;
  }

  private loop(raw: unknown, path: PathSeg[]): Loop | undefined {
    if (!isPlainObject(raw)) {
      this.issues.error(path, `loop must be a mapping {in, iterator, mode}, got ${describeType(raw)}`);
      return undefined;
    }
    let collection: unknown = raw.in;
    if (raw.collection !== undefined) {
      if (collection === undefined) {
        collection = raw.collection;
        this.issues.warn([...path, 'collection'], "deprecated: loop 'collection' is 'in'");
      } else this.issues.error([...path, 'collection'], "both 'in' and 'collection' are set; keep only 'in'");
    }
    let iterator: unknown = raw.iterator;
    if (raw.element !== undefined) {
      if (iterator === undefined) {
        iterator = raw.element;
        this.issues.warn([...path, 'element'], "deprecated: loop 'element' is 'iterator'");
      } else this.issues.error([...path, 'element'], "both 'iterator' and 'element' are set; keep only 'iterator'");
    }
    const pagination = raw.pagination !== undefined ? this.pagination(raw.pagination, [...path, 'pagination']) : undefined;
    if (collection === undefined && !pagination) {
      this.issues.error([...path, 'in'], "loop needs 'in': the collection to iterate (a template such as \"{{ fetch_users.items }}\" or a list)");
    }
    const mode = raw.mode ?? 'sequential';
    if (mode !== 'sequential' && mode !== 'async') {
      this.issues.error([...path, 'mode'], `loop mode must be 'sequential' or 'async', got ${JSON.stringify(mode)}`);
    }
    const loop: Loop = {
      // A pagination-only loop (legacy) iterates pages, not a collection.
      in: collection === undefined ? null : toJson(collection),
      iterator: typeof iterator === 'string' && iterator ? iterator : 'item',
      mode: mode === 'async' ? 'async' : 'sequential',
    };
    if (raw.max_in_flight !== undefined) {
      const n = raw.max_in_flight;
      if (typeof n === 'number' && Number.isInteger(n) && n > 0) loop.max_in_flight = n;
      else this.issues.error([...path, 'max_in_flight'], 'max_in_flight must be a positive integer');
    }
    if (pagination) loop.pagination = pagination;
    return loop;
  }

  private pagination(raw: unknown, path: PathSeg[]): LegacyPagination | undefined {
    if (!isPlainObject(raw)) return undefined;
    this.issues.warn(path, "deprecated: loop.pagination; use step-level retry with a 'response' condition, next_call and collect");
    const retry = isPlainObject(raw.retry) ? raw.retry : {};
    const nextPage = isPlainObject(raw.next_page) ? (toJson(raw.next_page) as LegacyPagination['next_page']) : undefined;
    const out: LegacyPagination = {
      type: 'response_based',
      continue_while: typeof raw.continue_while === 'string' ? raw.continue_while : '',
      merge_strategy: (raw.merge_strategy ?? 'append') as LegacyPagination['merge_strategy'],
      max_iterations: this.number(raw.max_iterations, [...path, 'max_iterations']) ?? 1000,
      retry: {
        max_attempts: this.number(retry.max_attempts, [...path, 'retry', 'max_attempts']) ?? 1,
        backoff: retry.backoff === 'exponential' ? 'exponential' : 'fixed',
        initial_delay: this.number(retry.initial_delay, [...path, 'retry', 'initial_delay']) ?? 1,
        max_delay: this.number(retry.max_delay, [...path, 'retry', 'max_delay']) ?? 60,
      },
    };
    if (nextPage) out.next_page = nextPage;
    if (typeof raw.merge_path === 'string') out.merge_path = raw.merge_path;
    return out;
  }

  private caseEntry(raw: unknown, path: PathSeg[]): CaseEntry | undefined {
    if (!isPlainObject(raw)) {
      this.issues.error(path, `a case entry must be a mapping {when, then}, got ${describeType(raw)}`);
      return undefined;
    }
    if (typeof raw.when !== 'string' || !raw.when.trim()) {
      if (raw.when !== undefined) this.issues.error([...path, 'when'], "case 'when' must be a condition string such as \"{{ event.name == 'call.done' }}\"");
      return undefined;
    }
    return { when: raw.when, then: this.actions(raw.then, [...path, 'then']) };
  }

  /** `then` as an object (one action per key, in key order) or a list of such objects. */
  private actions(raw: unknown, path: PathSeg[]): Action[] {
    if (Array.isArray(raw)) {
      return raw.flatMap((item, i) => {
        if (!isPlainObject(item)) {
          this.issues.error([...path, i], `an action must be a mapping such as {next: [...]} or {retry: {...}}, got ${describeType(item)}`);
          return [];
        }
        return this.actionBlock(item, [...path, i]);
      });
    }
    if (isPlainObject(raw)) return this.actionBlock(raw, path);
    if (raw !== undefined) this.issues.error(path, `'then' must be a mapping of actions or a list of them, got ${describeType(raw)}`);
    return [];
  }

  private actionBlock(block: Record<string, unknown>, path: PathSeg[]): Action[] {
    const out: Action[] = [];
    for (const [key, value] of Object.entries(block)) {
      const action = this.action(key, value, [...path, key]);
      if (action) out.push(action);
    }
    return out;
  }

  private action(name: string, v: unknown, path: PathSeg[]): Action | undefined {
    const obj = isPlainObject(v) ? v : undefined;
    // `fail: false` / `skip: false` read as "don't", not as the action.
    if (v === false && (name === 'fail' || name === 'skip' || name === 'call' || name === 'retry')) return undefined;
    switch (name) {
      case 'call':
        return { action: 'call', overrides: toObject(v) };
      case 'retry': {
        const a: Action = { action: 'retry' };
        // max_delay: reference convention; convert.ts reports it
        for (const f of ['max_attempts', 'backoff_multiplier', 'initial_delay', 'max_delay'] as const) {
          const n = this.number(obj?.[f], [...path, f]);
          if (n !== undefined) a[f] = n;
        }
        if (typeof obj?.jitter === 'number' || typeof obj?.jitter === 'boolean') a.jitter = obj.jitter;
        return a;
      }
      case 'collect': {
        if (!obj) return undefined;
        const mode = obj.mode === 'extend' ? 'extend' : 'append';
        return { action: 'collect', from: toJson(obj.from), into: String(obj.into ?? ''), mode };
      }
      case 'sink': {
        if (!obj) {
          this.issues.error(path, 'sink needs a tool spec: {kind, auth, command|table, args}');
          return undefined;
        }
        return { action: 'sink', tool: this.sinkTool(obj, path) };
      }
      case 'set':
        return { action: 'set', ctx: toObject(obj?.ctx) };
      case 'result':
        return { action: 'result', from: obj ? toJson(obj.from) : toJson(v) };
      case 'next':
        return { action: 'next', targets: this.targets(v, path, 'action') };
      case 'fail': {
        const message = typeof v === 'string' ? v : typeof obj?.message === 'string' ? obj.message : undefined;
        return message === undefined ? { action: 'fail' } : { action: 'fail', message };
      }
      case 'skip':
        return { action: 'skip' };
      default:
        this.issues.error(path, `unknown action '${name}'; actions are ${ACTION_NAMES.join(', ')}`);
        return undefined;
    }
  }

  /**
   * Next targets in any accepted form. `where` distinguishes the structural `next` (whose
   * conditional entries are handled by the caller) from a `then.next` action.
   */
  private targets(raw: unknown, path: PathSeg[], where: 'structural' | 'action'): NextTarget[] {
    const out: NextTarget[] = [];
    const add = (t: NextTarget, src: PathSeg[]) => {
      this.sources.set(t, formatPath(src));
      out.push(t);
    };
    if (typeof raw === 'string') {
      add({ step: raw }, path);
      return out;
    }
    if (isPlainObject(raw)) {
      const target = typeof raw.step === 'string' ? raw.step : '<name>';
      if ('args' in raw) {
        this.issues.error([...path, 'args'], `'args' is not allowed as a top-level key of ${where === 'action' ? "'next'" : 'a structural next'}; pass args inside a target: next: [{step: ${target}, args: {...}}]`);
      } else {
        this.issues.error(path, `next is a step name, a list of step names or a list of {step, args}, not a single mapping; write next: [{step: ${target}}]`);
      }
      return out;
    }
    if (!Array.isArray(raw)) {
      this.issues.error(path, `next must be a step name, a list of step names or a list of {step, args}, got ${describeType(raw)}`);
      return out;
    }
    raw.forEach((item, i) => {
      const p = [...path, i];
      if (typeof item === 'string') return add({ step: item }, p);
      if (!isPlainObject(item)) {
        this.issues.error(p, `a next target must be a step name or {step, args}, got ${describeType(item)}`);
        return;
      }
      if ('when' in item || 'then' in item || 'else' in item) return; // reported or lifted by the caller
      if (typeof item.step !== 'string' || !item.step) {
        if ('args' in item) {
          this.issues.error([...p, 'args'], "'args' is not allowed as a top-level key of next; put it inside a target with its step: {step: <name>, args: {...}}");
        } else {
          this.issues.error([...p, 'step'], "a next target needs 'step': the name of the step to run");
        }
        return;
      }
      const t: NextTarget = { step: item.step };
      let args = item.args;
      if (item.with !== undefined) {
        if (this.v1 && args === undefined) {
          args = item.with;
          this.issues.warn([...p, 'with'], "deprecated: 'with' on a next target is 'args' in v2");
        } else {
          this.issues.error([...p, 'with'], "'with' is reserved for tool inputs; pass data to the next step with 'args'");
        }
      }
      if (args !== undefined) {
        if (isPlainObject(args)) t.args = toObject(args);
        else if (typeof args === 'string' && WHOLE_TEMPLATE.test(args)) t.args = args;
        else this.issues.error([...p, 'args'], `args must be a mapping (or one whole-expression template rendering to one), got ${describeType(args)}`);
      }
      add(t, [...p, 'step']);
    });
    return out;
  }

  /**
   * Structural next. In a v1 document, conditional entries (`when`/`then`/`else`) become case
   * entries on step.exit, in order, so the first matching condition wins as it did in v1.
   */
  private structuralNext(raw: unknown, path: PathSeg[]): { targets: NextTarget[]; conditional: CaseEntry[] } {
    const targets = this.targets(raw, path, 'structural');
    const conditional: CaseEntry[] = [];
    if (!this.v1 || !Array.isArray(raw)) return { targets, conditional };
    raw.forEach((item, i) => {
      if (!isPlainObject(item) || !('when' in item || 'then' in item || 'else' in item)) return;
      const p = [...path, i];
      const exit = "event.name == 'step.exit'";
      if ('else' in item) {
        this.issues.warn(p, "deprecated: 'else' in next; written as a last case entry on step.exit");
        conditional.push({ when: `{{ ${exit} }}`, then: [{ action: 'next', targets: this.targets(item.else, [...p, 'else'], 'action') }] });
        return;
      }
      if (typeof item.when !== 'string') {
        this.issues.error([...p, 'when'], 'a conditional next entry needs a when condition string');
        return;
      }
      this.issues.warn(p, "deprecated: next with when/then; write case: [{when: ..., then: {next: [...]}}]");
      conditional.push({
        when: `{{ ${exit} and (${stripBraces(item.when)}) }}`,
        then: [{ action: 'next', targets: this.targets(item.then, [...p, 'then'], 'action') }],
      });
    });
    return { targets, conditional };
  }

  private retry(raw: unknown, path: PathSeg[]): RetryPolicy[] {
    if (Array.isArray(raw)) {
      return raw.flatMap((p, i) => {
        if (!isPlainObject(p) || typeof p.when !== 'string') return [];
        return [{ when: p.when, then: this.retryThen(p.then, [...path, i, 'then']) }];
      });
    }
    if (!isPlainObject(raw)) {
      this.issues.error(path, `retry must be a list of {when, then} policies, got ${describeType(raw)}`);
      return [];
    }
    if ('on_error' in raw || 'on_success' in raw) {
      this.issues.warn(path, 'deprecated: retry {on_error, on_success}; write a list of {when, then} policies');
      const out: RetryPolicy[] = [];
      if (isPlainObject(raw.on_error)) {
        const { when, ...then } = raw.on_error;
        out.push({ when: typeof when === 'string' ? when : '{{ error }}', then: this.retryThen(then, [...path, 'on_error']) });
      }
      if (isPlainObject(raw.on_success)) {
        const { while: cond, when, ...then } = raw.on_success;
        const c = typeof cond === 'string' ? cond : typeof when === 'string' ? when : undefined;
        if (c === undefined) this.issues.error([...path, 'on_success', 'while'], "on_success needs 'while': the condition under which to fetch again");
        else out.push({ when: c, then: this.retryThen(then, [...path, 'on_success']) });
      }
      return out;
    }
    if (typeof raw.when === 'string' && isPlainObject(raw.then)) {
      this.issues.warn(path, 'retry is a list of policies; write it as [- when: ..., then: ...]');
      return [{ when: raw.when, then: this.retryThen(raw.then, [...path, 'then']) }];
    }
    if (typeof raw.when === 'string') {
      this.issues.warn(path, 'deprecated: simple retry {when, max_attempts}; write [- when: ..., then: {max_attempts: ...}]');
      const { when, ...then } = raw;
      return [{ when: when as string, then: this.retryThen(then, path) }];
    }
    this.issues.error([...path, 'when'], "retry needs a condition: write a list of {when, then} policies");
    return [];
  }

  /**
   * A count or duration of a retry or pagination setting: a number, a number written as text
   * (`"5"`), or a template the engine renders when it applies it. Anything else is an error here:
   * dropping it would run the default instead of what the author wrote.
   */
  private number(v: unknown, path: PathSeg[]): NumberOrTemplate | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'number') return this.notNegative(v, path);
    if (typeof v === 'string') {
      if (/\{\{|\{%/.test(v)) return v;
      if (v.trim() !== '' && Number.isFinite(Number(v))) return this.notNegative(Number(v), path);
      this.issues.error(path, `must be a number or a template, got '${v}'`);
      return undefined;
    }
    this.issues.error(path, `must be a number or a template, got ${describeType(v)}`);
    return undefined;
  }

  /**
   * Every setting `number` reads is a count (attempts, iterations) or a delay and its factor: a
   * negative one has no meaning, so a literal one is refused here; a template is rendered when it
   * applies (the engine's `numbers`).
   */
  private notNegative(n: number, path: PathSeg[]): number {
    // kept as written: the error refuses the playbook, and a dropped value would add a warning
    if (n < 0) this.issues.error(path, `${String(path[path.length - 1])} must not be negative, got ${n}`);
    return n;
  }

  private retryThen(raw: unknown, path: PathSeg[]): RetryThen {
    const then: RetryThen = {};
    if (!isPlainObject(raw)) return then;
    for (const f of ['max_attempts', 'backoff_multiplier', 'initial_delay', 'max_delay'] as const) {
      const n = this.number(raw[f], [...path, f]);
      if (n !== undefined) then[f] = n;
    }
    if (typeof raw.jitter === 'number' || typeof raw.jitter === 'boolean') then.jitter = raw.jitter;
    if (isPlainObject(raw.next_call)) then.next_call = toObject(raw.next_call);
    if (isPlainObject(raw.collect)) {
      const c = raw.collect;
      const strategy = c.strategy === 'replace' || c.strategy === 'merge' ? c.strategy : 'append';
      then.collect = { strategy };
      if (typeof c.path === 'string') then.collect.path = c.path;
      if (typeof c.into === 'string') then.collect.into = c.into;
    }
    const sink = isPlainObject(raw.sink) ? raw.sink : isPlainObject(raw.per_iteration) && isPlainObject(raw.per_iteration.sink) ? raw.per_iteration.sink : undefined;
    if (sink) then.sink = this.sinkTool(sink, raw.sink ? [...path, 'sink'] : [...path, 'per_iteration', 'sink']);
    return then;
  }
}

/** Normalises a raw document (a plain object) into the v2 playbook; problems go to `issues`. */
export function normalizePlaybook(doc: Record<string, unknown>, issues: Issues): NormalizeResult {
  const n = new Normalizer(doc, issues);
  const playbook = n.run();
  return { playbook, sources: n.sources };
}
