/**
 * Reference-era forms → the current spec forms, on the document as written (no I/O).
 *
 * Two rule sets:
 *  - `conventions`: forms the reference implementation's playbooks rely on that Playflow accepts
 *    with a deprecation warning (parse applies them, so such a playbook runs): `tool: <kind>`
 *    with flat attributes, `call.error`, workbook `task`, playbook `payload`, `set` as a list,
 *    case-level `retry` with `params`/`collect`, sinks written `tool: <kind>` or `backend:`,
 *    `script:` text, `| tojson` feeding an object field, python `main(input_data)` and a `main()`
 *    parameter named like the loop iterator;
 *  - `legacy` (the converter only): older spellings normalisation already accepts with a warning
 *    (loop collection/element, http url, postgres query, `_loop.`, a leading `/` in the path),
 *    rewritten so that a converted playbook validates without warnings.
 * Every change is reported at the path the author wrote; what cannot be rewritten is reported with
 * the reason and left as written.
 */
import type { Json, JsonObject } from './types.js';
import { formatPath, isPlainObject, type PathSeg } from './issues.js';

export interface ConvertNote {
  path: string;
  message: string;
}

export interface Conversion {
  /** The rewritten document (a deep copy; the input is never changed). */
  doc: Record<string, unknown>;
  changes: ConvertNote[];
  /** Forms left as written, with the reason. */
  unconverted: ConvertNote[];
}

type Obj = Record<string, unknown>;

const STEP_KEYS = new Set(['step', 'desc', 'args', 'loop', 'tool', 'case', 'next', 'vars', 'retry', 'call', 'type', 'when', 'with', 'as']);
/** Tool fields whose value is an object (or list) a `| tojson` template would have fed as text. */
const OBJECT_FIELDS = ['params', 'headers', 'json', 'data', 'payload', 'args', 'body'];
const WHOLE = /^\s*\{\{([\s\S]*)\}\}\s*$/;
const TOJSON = /\|\s*tojson\s*(?:\(\s*\))?\s*$/;
const CALL_ERROR = /event\.name\s*==\s*(['"])call\.error\1/g;
const MAIN = /^(?:async\s+)?def\s+main\s*\(([^)]*)\)/m;
const LOOP_VAR = /(?<![\w.])_loop\.(index|count)\b/g;

function clone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

class Converter {
  readonly changes: ConvertNote[] = [];
  readonly unconverted: ConvertNote[] = [];

  constructor(
    private readonly doc: Obj,
    private readonly legacy: boolean,
  ) {}

  changed(path: PathSeg[], message: string): void {
    this.changes.push({ path: formatPath(path), message });
  }

  skipped(path: PathSeg[], message: string): void {
    this.unconverted.push({ path: formatPath(path), message });
  }

  run(): void {
    const doc = this.doc;
    if (this.legacy && isPlainObject(doc.metadata) && typeof doc.metadata.path === 'string' && /^\s*\/|\/\s*$/.test(doc.metadata.path)) {
      const p = doc.metadata.path.trim().replace(/^\/+|\/+$/g, '');
      this.changed(['metadata', 'path'], `catalog path '${doc.metadata.path}' → '${p}' (no leading or trailing '/')`);
      doc.metadata.path = p;
    }
    if (Array.isArray(doc.workbook)) {
      doc.workbook.forEach((t, i) => {
        if (isPlainObject(t) && isPlainObject(t.tool)) this.tool(t.tool, ['workbook', i, 'tool']);
      });
    }
    if (!Array.isArray(doc.workflow)) return;
    const incoming = this.incomingArgs(doc.workflow);
    doc.workflow.forEach((s, i) => {
      if (isPlainObject(s)) this.step(s, ['workflow', i], incoming);
    });
  }

  /** Keys of the args each step receives from next targets; null when some are not literal. */
  private incomingArgs(workflow: unknown[]): Map<string, Set<string> | null> {
    const out = new Map<string, Set<string> | null>();
    const add = (t: unknown) => {
      if (!isPlainObject(t) || typeof t.step !== 'string') return;
      const prev = out.get(t.step);
      if (prev === null) return;
      if (t.args === undefined) return void out.set(t.step, prev ?? new Set());
      if (!isPlainObject(t.args)) return void out.set(t.step, null);
      out.set(t.step, new Set([...(prev ?? []), ...Object.keys(t.args)]));
    };
    const targets = (n: unknown) => (Array.isArray(n) ? n.forEach(add) : undefined);
    for (const s of workflow) {
      if (!isPlainObject(s)) continue;
      targets(s.next);
      for (const c of Array.isArray(s.case) ? s.case : []) {
        if (!isPlainObject(c)) continue;
        const blocks = Array.isArray(c.then) ? c.then : [c.then];
        for (const b of blocks) if (isPlainObject(b)) targets(b.next);
      }
    }
    return out;
  }

  private step(s: Obj, path: PathSeg[], incoming: Map<string, Set<string> | null>): void {
    if (this.legacy) this.loopVars(s, path);
    // v1 step form: `tool: <kind>` with the tool's attributes on the step
    if (typeof s.tool === 'string') {
      const tool: Obj = { kind: s.tool };
      for (const k of Object.keys(s)) {
        if (!STEP_KEYS.has(k)) {
          tool[k] = s[k];
          delete s[k];
        }
      }
      s.tool = tool;
      this.changed([...path, 'tool'], `'tool: ${String(tool.kind)}' with attributes on the step → tool: {kind: ${String(tool.kind)}, ...} holding them`);
    }
    if (this.legacy && isPlainObject(s.loop)) {
      const loop = s.loop;
      if (loop.collection !== undefined && loop.in === undefined) {
        loop.in = loop.collection;
        delete loop.collection;
        this.changed([...path, 'loop', 'collection'], "loop 'collection' → 'in'");
      }
      if (loop.element !== undefined && loop.iterator === undefined) {
        loop.iterator = loop.element;
        delete loop.element;
        this.changed([...path, 'loop', 'element'], "loop 'element' → 'iterator'");
      }
    }
    if (isPlainObject(s.tool)) {
      this.tool(s.tool, [...path, 'tool']);
      if (s.tool.kind === 'python') this.pythonMain(s, path, incoming);
    }
    if (Array.isArray(s.case)) {
      const keep: unknown[] = [];
      s.case.forEach((c, i) => {
        if (!isPlainObject(c)) return void keep.push(c);
        const p = [...path, 'case', i];
        this.when(c, p);
        const lifted = this.caseRetry(s, c, p);
        this.actions(c.then, [...p, 'then']);
        if (!lifted) keep.push(c);
      });
      if (keep.length) s.case = keep;
      else delete s.case;
    }
    if (Array.isArray(s.retry)) {
      s.retry.forEach((r, i) => {
        if (!isPlainObject(r)) return;
        this.when(r, [...path, 'retry', i]);
        if (isPlainObject(r.then)) {
          this.sinkIn(r.then, [...path, 'retry', i, 'then']);
          if (r.then.max_delay !== undefined) this.maxDelay([...path, 'retry', i, 'then', 'max_delay']);
        }
      });
    }
  }

  /** `_loop.index` / `_loop.count` → `_retry.*` everywhere in a step (legacy set). */
  private loopVars(v: unknown, path: PathSeg[]): void {
    if (!isPlainObject(v) && !Array.isArray(v)) return;
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === 'string' && LOOP_VAR.test(x)) {
        LOOP_VAR.lastIndex = 0;
        (v as Obj)[k] = x.replace(LOOP_VAR, '_retry.$1');
        this.changed([...path, Array.isArray(v) ? Number(k) : k], "'_loop.index'/'_loop.count' → '_retry.index'/'_retry.count'");
      } else this.loopVars(x, [...path, Array.isArray(v) ? Number(k) : k]);
    }
  }

  /** `event.name == 'call.error'` → `call.done` with an error. */
  private when(entry: Obj, path: PathSeg[]): void {
    if (typeof entry.when !== 'string' || !CALL_ERROR.test(entry.when)) return;
    CALL_ERROR.lastIndex = 0;
    entry.when = entry.when.replace(CALL_ERROR, "(event.name == 'call.done' and error is defined)");
    this.changed([...path, 'when'], "event 'call.error' → \"event.name == 'call.done' and error is defined\"");
  }

  private tool(t: Obj, path: PathSeg[]): void {
    const kind = t.kind;
    if (kind === 'workbook' && t.task !== undefined && t.name === undefined) {
      t.name = t.task;
      delete t.task;
      this.changed([...path, 'task'], "workbook tool 'task' → 'name'");
    }
    if (kind === 'playbook' && t.payload !== undefined && t.args === undefined) {
      t.args = t.payload;
      delete t.payload;
      this.changed([...path, 'payload'], "playbook tool 'payload' → 'args' (the child's payload)");
    }
    if (t.script !== undefined && (kind === 'python' || kind === 'postgres')) {
      const field = kind === 'python' ? 'code' : 'command';
      if (typeof t.script === 'string' && t[field] === undefined) {
        t[field] = t.script;
        delete t.script;
        this.changed([...path, 'script'], `inline 'script' → '${field}'`);
      } else if (typeof t.script !== 'string') {
        this.skipped([...path, 'script'], `a script read from a file or a URL stays as written (the worker loads it at run time); inline it as '${field}' to make the playbook self-contained`);
      }
    }
    if (this.legacy && kind === 'http' && t.url !== undefined && t.endpoint === undefined) {
      t.endpoint = t.url;
      delete t.url;
      this.changed([...path, 'url'], "http 'url' → 'endpoint'");
    }
    if (this.legacy && kind === 'postgres' && t.query !== undefined && t.command === undefined) {
      t.command = t.query;
      delete t.query;
      this.changed([...path, 'query'], "postgres 'query' → 'command'");
    }
    for (const f of OBJECT_FIELDS) {
      const v = t[f];
      if (typeof v !== 'string') continue;
      const m = WHOLE.exec(v);
      if (!m || !TOJSON.test(m[1].trim())) continue;
      t[f] = `{{ ${m[1].trim().replace(TOJSON, '').trim()} }}`;
      this.changed([...path, f], `'| tojson' dropped: a whole-expression template renders to the native value (${f}: "${String(t[f])}")`);
    }
  }

  /**
   * Python `main(input_data)` given all args as one dict, and a `main()` parameter named like the
   * loop iterator: rewritten into explicit args when the args the step receives are known.
   */
  private pythonMain(s: Obj, path: PathSeg[], incoming: Map<string, Set<string> | null>): void {
    const tool = s.tool as Obj;
    if (typeof tool.code !== 'string') return;
    const m = MAIN.exec(tool.code);
    if (!m) return;
    const params = m[1].split(',').map((p) => p.trim().split(/[:=]/)[0].trim()).filter((p) => p && !p.startsWith('*'));
    const toolArgs = isPlainObject(tool.args) ? tool.args : tool.args === undefined ? {} : null;
    if (toolArgs === null) return;
    const stepArgs = isPlainObject(s.args) ? Object.keys(s.args) : [];
    const iterator = isPlainObject(s.loop) ? (s.loop.iterator ?? s.loop.element ?? 'item') : undefined;
    const into = incoming.get(String(s.step));
    const known = (p: string) => p in toolArgs || stepArgs.includes(p) || (into !== null && into !== undefined && into.has(p));
    if (typeof iterator === 'string' && params.includes(iterator) && !known(iterator)) {
      tool.args = { ...toolArgs, [iterator]: `{{ ${iterator} }}` };
      this.changed([...path, 'tool', 'args'], `main() parameter '${iterator}' was bound to the loop iterator; passed explicitly: args: {${iterator}: "{{ ${iterator} }}"}`);
      return;
    }
    // the reference's name for "all args as one dict" (the worker's runner does the same)
    if (params.length !== 1 || params[0] !== 'input_data' || known(params[0]) || params[0] === iterator) return;
    const p = params[0];
    if (into === null) {
      this.skipped([...path, 'tool', 'code'], `deprecated: main(${p}) receives all args as one dict, but the args this step receives are not known here; write def main(<arg names>)`);
      return;
    }
    if (Object.keys(toolArgs).length && stepArgs.length + (into?.size ?? 0) > 0) {
      this.skipped([...path, 'tool', 'code'], `deprecated: main(${p}) receives the step's args and the tool's args as one dict; write def main(<arg names>) or pass args: {${p}: {...}}`);
      return;
    }
    tool.args = { [p]: Object.keys(toolArgs).length ? (toolArgs as Json) : '{{ args }}' };
    this.changed([...path, 'tool', 'code'], `main(${p}) received all args as one dict; passed explicitly: args: {${p}: ${Object.keys(toolArgs).length ? '{...the tool args}' : '"{{ args }}"'}}`);
  }

  /**
   * A case entry whose `retry` carries `params` or `collect` paginates: it becomes a step-level
   * retry policy `{when, then: {max_attempts, next_call: {params}, collect}}`. Returns true when
   * the entry had nothing else and was removed.
   */
  private caseRetry(s: Obj, c: Obj, path: PathSeg[]): boolean {
    const blocks = Array.isArray(c.then) ? c.then : [c.then];
    const i = blocks.findIndex((b) => isPlainObject(b) && isPlainObject(b.retry) && (b.retry.params !== undefined || b.retry.collect !== undefined));
    if (i < 0) return false;
    const block = blocks[i] as Obj;
    const r = block.retry as Obj;
    const rpath = Array.isArray(c.then) ? [...path, 'then', i, 'retry'] : [...path, 'then', 'retry'];
    if (s.retry !== undefined && !Array.isArray(s.retry)) {
      this.skipped(rpath, "case-level retry with params/collect: the step's retry is in a legacy form; convert it to a list first");
      return false;
    }
    const { params, collect, ...rest } = r;
    const then: Obj = { ...rest };
    if (params !== undefined) then.next_call = { params };
    if (isPlainObject(collect)) {
      const col: Obj = { strategy: collect.strategy ?? 'append' };
      if (collect.path !== undefined) col.path = collect.path;
      if (collect.into !== undefined) col.into = collect.into;
      then.collect = col;
    }
    s.retry = [...((s.retry as unknown[] | undefined) ?? []), { when: c.when, then }];
    delete block.retry;
    this.changed(rpath, `case-level retry with params/collect → step-level retry policy retry[${(s.retry as unknown[]).length - 1}]: {when, then: {max_attempts, next_call: {params}, collect}}`);
    const empty = blocks.every((b) => !isPlainObject(b) || Object.keys(b).length === 0);
    if (Array.isArray(c.then)) c.then = c.then.filter((b) => !isPlainObject(b) || Object.keys(b).length > 0);
    return empty;
  }

  private actions(then: unknown, path: PathSeg[]): void {
    if (Array.isArray(then)) then.forEach((b, i) => this.actions(b, [...path, i]));
    if (!isPlainObject(then)) return;
    if (Array.isArray(then.set)) {
      const ctx: JsonObject = {};
      const ok = then.set.every((e) => isPlainObject(e) && typeof e.name === 'string' && 'value' in e);
      if (ok) {
        for (const e of then.set as Obj[]) ctx[e.name as string] = e.value as Json;
        then.set = { ctx };
        this.changed([...path, 'set'], "'set' as a list of {name, value} → set: {ctx: {<name>: <value>}}");
      } else this.skipped([...path, 'set'], "'set' as a list needs {name, value} entries");
    }
    if (isPlainObject(then.retry) && then.retry.max_delay !== undefined) this.maxDelay([...path, 'retry', 'max_delay']);
    this.sinkIn(then, path);
  }

  private maxDelay(path: PathSeg[]): void {
    this.skipped(path, "deprecated: 'max_delay' has no spec form (the spec's backoff is initial_delay × backoff_multiplier^n with jitter); it is kept and caps the delay");
  }

  /** Sinks written `tool: <kind>` (a string) or `backend: <kind>` → `kind`. */
  private sinkIn(holder: Obj, path: PathSeg[]): void {
    const sinkKey = isPlainObject(holder.sink) ? 'sink' : isPlainObject(holder.per_iteration) && isPlainObject(holder.per_iteration.sink) ? 'per_iteration' : undefined;
    if (!sinkKey) return;
    const sink = (sinkKey === 'sink' ? holder.sink : (holder.per_iteration as Obj).sink) as Obj;
    const spath = sinkKey === 'sink' ? [...path, 'sink'] : [...path, 'per_iteration', 'sink'];
    for (const key of ['tool', 'backend'] as const) {
      if (typeof sink[key] !== 'string') continue;
      if (sink.kind !== undefined) {
        this.skipped([...spath, key], `the sink has both '${key}' and 'kind'; keep kind`);
        continue;
      }
      sink.kind = sink[key];
      delete sink[key];
      this.changed([...spath, key], `sink '${key}: ${String(sink.kind)}' → 'kind: ${String(sink.kind)}'`);
    }
    const t = isPlainObject(sink.tool) ? sink.tool : sink;
    this.tool(t, isPlainObject(sink.tool) ? [...spath, 'tool'] : spath);
  }
}

/**
 * Rewrites reference-era forms. `legacy: true` (the converter) also rewrites the older spellings
 * normalisation accepts with a warning.
 */
export function convertReferenceForms(doc: unknown, opts: { legacy?: boolean } = {}): Conversion {
  if (!isPlainObject(doc)) return { doc: {}, changes: [], unconverted: [] };
  const copy = clone(doc);
  const c = new Converter(copy, opts.legacy ?? false);
  c.run();
  return { doc: copy, changes: c.changes, unconverted: c.unconverted };
}
