/**
 * Playflow's template engine: nunjucks' parser and code generator, with Playflow's own runtime.
 *
 * nunjucks compiles a template to JavaScript that calls a `runtime` object for every variable,
 * member access, call, `in` and output. Instead of patching the global `nunjucks.runtime` (which
 * would change nunjucks for every other user in the process) this module hands the compiled code
 * its own runtime object and its own environment, and adjusts code generation on a per-compiler
 * instance basis (no nunjucks prototype is modified):
 *
 * - member access, calls and variable lookups go through the sandbox (sandbox.ts);
 * - truthiness, `and`/`or`/`not`, comparisons, `in`, arithmetic and `~` follow Python (python.ts):
 *   `[] ` is false, `[1] == [1]`, `1 < x < 3` chains, `'%s' % x` formats;
 * - `True`/`False`/`None` are literals as in Jinja2;
 * - `value.method(args)` calls Python-style methods (`d.get('k', 0)`, `s.split(',')`);
 * - `{% include %}`, `{% import %}`, `{% extends %}`, `{% block %}` and extensions are refused
 *   (templates are self-contained values of a playbook, there is no loader).
 *
 * Compiled templates are kept in a bounded LRU keyed by the template string.
 */
import nunjucks from 'nunjucks';
import { SecurityError, UndefinedValueError, checkName, getAttr, ownLookup } from './sandbox.js';
import { arith, callMethod, compare, concat, neg, pyIn, pyRange, pySlice, toText, truthy } from './python.js';
import { makeFilters, makeTests } from './filters.js';
import { BudgetError, charge, startRender, templateLimits } from './budget.js';

const { parser, lexer, nodes, compiler, runtime: nunjucksRuntime, lib } = nunjucks as any;

/**
 * Python slices `x[1:]`, `x[:-1]`, `x[::2]`: a node type of our own and a parser adjustment made
 * on each parser instance (the same approach as nunjucks' installJinjaCompat, without touching
 * nunjucks' prototypes).
 */
const Slice = nodes.Node.extend('Slice', {
  fields: ['start', 'stop', 'step'],
  init(this: any, lineno: number, colno: number, start?: any, stop?: any, step?: any) {
    this.parent(lineno, colno, start ?? new nodes.Literal(lineno, colno, null), stop ?? new nodes.Literal(lineno, colno, null), step ?? new nodes.Literal(lineno, colno, null));
  },
});

/**
 * Wraps the collection of every `{% for %}`: charges the loop budget and, for a single loop
 * variable, turns a dict into its keys (Jinja; nunjucks would iterate nothing). Two loop
 * variables over a dict keep nunjucks' key/value pairs.
 */
const IterKeys = nodes.Node.extend('IterKeys', { fields: ['target'] });
const IterPairs = nodes.Node.extend('IterPairs', { fields: ['target'] });

/** Loop iterations one render may perform in total (nested loops multiply): CPU protection. */
export const MAX_LOOP_ITEMS = 100_000;
let loopBudget = MAX_LOOP_ITEMS;

function chargeLoop(v: unknown): void {
  if (v === undefined) throw new UndefinedValueError('for loop over an undefined value');
  const n = Array.isArray(v) || typeof v === 'string' ? v.length : v && typeof v === 'object' ? Object.keys(v).length : 0;
  loopBudget -= n;
  charge(n);
  if (loopBudget < 0) throw new UndefinedValueError(`template loops exceed ${MAX_LOOP_ITEMS} iterations`);
}

function makeParser(src: string): any {
  const p = new parser.Parser(lexer.lex(src, env.opts));
  p.extensions = [];
  const orig = p.parseAggregate;
  p.parseAggregate = function parseAggregate(this: any) {
    const state = { index: this.tokens.index - 1, lineno: this.tokens.lineno, colno: this.tokens.colno - 1 };
    try {
      return orig.call(this);
    } catch (e) {
      const errState = { index: this.tokens.index, lineno: this.tokens.lineno, colno: this.tokens.colno };
      Object.assign(this.tokens, state);
      this.peeked = false;
      const tok = this.peekToken();
      if (tok.type !== lexer.TOKEN_LEFT_BRACKET) {
        Object.assign(this.tokens, errState);
        throw e;
      }
      this.nextToken();
      const node = new Slice(tok.lineno, tok.colno);
      const fields = ['start', 'stop', 'step'];
      let isSlice = false;
      for (let i = 0; i <= fields.length; i++) {
        if (this.skip(lexer.TOKEN_RIGHT_BRACKET)) break;
        if (i === fields.length) {
          if (isSlice) this.fail('too many slice components', tok.lineno, tok.colno);
          break;
        }
        if (this.skip(lexer.TOKEN_COLON)) isSlice = true;
        else {
          node[fields[i]] = this.parseExpression();
          isSlice = this.skip(lexer.TOKEN_COLON) || isSlice;
        }
      }
      if (!isSlice) {
        Object.assign(this.tokens, errState);
        throw e;
      }
      return new nodes.Array(tok.lineno, tok.colno, [node]);
    }
  };
  // Jinja tests: `x is divisibleby 3` (one argument without parentheses), `x is in [1, 2]`,
  // `x is none`, `x is sameas false`; multi-argument tests with parentheses.
  p.parseIs = function parseIs(this: any) {
    let node = this.parseCompare();
    if (this.skipSymbol('is')) {
      const not = this.skipSymbol('not');
      const tok = this.nextToken();
      let name = '';
      if (tok && tok.type === lexer.TOKEN_SYMBOL) name = tok.value;
      else if (tok && (tok.type === lexer.TOKEN_NONE || tok.type === lexer.TOKEN_BOOLEAN)) name = tok.type === lexer.TOKEN_NONE ? 'none' : String(tok.value);
      else if (tok && tok.type === lexer.TOKEN_OPERATOR && ['==', '!=', '<', '>', '<=', '>='].includes(tok.value)) name = tok.value;
      else this.fail(`expected a test name after 'is', got ${tok ? tok.value : 'end of input'}`, tok?.lineno, tok?.colno);
      let args = new nodes.NodeList(tok.lineno, tok.colno);
      const next = this.peekToken();
      if (next && next.type === lexer.TOKEN_LEFT_PAREN) args = this.parseSignature();
      else if (
        next &&
        ([lexer.TOKEN_STRING, lexer.TOKEN_INT, lexer.TOKEN_FLOAT, lexer.TOKEN_BOOLEAN, lexer.TOKEN_NONE, lexer.TOKEN_LEFT_BRACKET, lexer.TOKEN_LEFT_CURLY].includes(next.type) ||
          (next.type === lexer.TOKEN_SYMBOL && !['and', 'or', 'else', 'if', 'is', 'not', 'in'].includes(next.value)))
      ) {
        args.addChild(this.parsePrimary());
      }
      node = new nodes.Is(node.lineno, node.colno, node, new nodes.FunCall(tok.lineno, tok.colno, new nodes.Symbol(tok.lineno, tok.colno, name), args));
      if (not) node = new nodes.Not(node.lineno, node.colno, node);
    }
    return node;
  };
  return p;
}

/** A template that does not parse, or uses a refused construct; carries nunjucks' position. */
export class TemplateSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateSyntaxError';
  }
}

// ---------------------------------------------------------------------------------------------
// Environment: one per process, with Playflow's filters, tests and globals only.

const env: any = new nunjucks.Environment(null, { autoescape: false, throwOnUndefined: false });
{
  const tests = makeTests();
  const filters = makeFilters(tests);
  env.tests = Object.assign(Object.create(null), tests);
  env.filters = Object.assign(Object.create(null), filters);
  const g = env.globals as Record<string, unknown>;
  // Globals are functions: callable, with no readable members (sandbox). range is bounded
  // (MAX_ITEMS); lipsum is dropped: templates must be deterministic.
  env.globals = Object.assign(Object.create(null), { range: pyRange, cycler: g.cycler, joiner: g.joiner, dict: kwDict, namespace: kwDict });
}

/** Jinja's `dict(a=1, b=2)` (and `namespace(...)`, read-only here): keyword arguments as a dict. */
function kwDict(...args: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of args) {
    if (a && typeof a === 'object' && !Array.isArray(a)) {
      for (const k of Object.keys(a)) {
        if (k === '__keywords') continue;
        checkName(k);
        out[k] = (a as Record<string, unknown>)[k];
      }
    }
  }
  return out;
}

/** Extra filters may be added by the application (names are checked by the sandbox). */
export function addFilter(name: string, fn: (...args: any[]) => unknown): void {
  checkName(name);
  env.filters[name] = fn;
}

// ---------------------------------------------------------------------------------------------
// Runtime given to compiled code.

/** Describes the most recent undefined lookup of the expression being evaluated. */
let lastMissing: { message: string; variable: string } | undefined;

export function resetMissing(): void {
  lastMissing = undefined;
}
export function takeMissing(): { message: string; variable: string } | undefined {
  return lastMissing;
}

class SandboxContext {
  private readonly overlay: Record<string, unknown> = Object.create(null);
  constructor(
    readonly env: unknown,
    private readonly data: object,
  ) {}
  lookup(name: string): unknown {
    if (Object.prototype.hasOwnProperty.call(this.overlay, name)) return this.overlay[name];
    const r = ownLookup(this.data, name);
    if (r.found) return r.value;
    return (env.globals as Record<string, unknown>)[name];
  }
  setVariable(name: string, value: unknown): void {
    checkName(name);
    this.overlay[name] = value;
  }
  getVariables(): Record<string, unknown> {
    return { ...this.data, ...this.overlay };
  }
  addExport(): void {}
  getExported(): Record<string, unknown> {
    return {};
  }
}

function isOwnError(e: unknown): boolean {
  return e instanceof SecurityError || e instanceof UndefinedValueError || e instanceof TemplateSyntaxError || e instanceof BudgetError;
}

/** Characters written by `{{ … }}` in the current render (maxOutput). */
let written = 0;

function emit(text: string): string {
  written += text.length;
  if (written > templateLimits().maxOutput) throw new BudgetError('maxOutput', `template over budget: output longer than ${templateLimits().maxOutput} characters`);
  return text;
}

const rt: any = Object.create(nunjucksRuntime);
Object.assign(rt, {
  contextOrFrameLookup(context: SandboxContext, frame: any, name: string): unknown {
    // `name` is a Symbol of the template, already checked at compile time (checkAst).
    const v = frame.lookup(name);
    if (v !== undefined) return v;
    const c = context.lookup(name);
    if (c === undefined) lastMissing = { message: `'${name}' is undefined`, variable: name };
    return c;
  },
  memberLookup(obj: unknown, key: unknown, path?: string): unknown {
    if (key === undefined || key === null) {
      // `x[k]` with k undefined: the lookup of k already recorded what is missing.
      if (obj !== undefined && obj !== null && key === null) lastMissing = { message: `'${path}' has no item None`, variable: path ?? 'None' };
      return undefined;
    }
    const v = getAttr(obj, key);
    if (v === undefined && obj !== undefined && obj !== null) {
      const variable = path ? `${path}.${String(key)}` : String(key);
      lastMissing = { message: path ? `'${path}' has no attribute '${String(key)}'` : `no attribute '${String(key)}'`, variable };
    }
    return v;
  },
  callWrap(fn: unknown, name: string, _context: unknown, args: unknown[]): unknown {
    if (typeof fn !== 'function') {
      throw new UndefinedValueError(fn === undefined ? `'${name}' is undefined and cannot be called` : `'${name}' is not callable`, name);
    }
    charge(); // macros may call themselves: every call is an evaluation step
    return (fn as (...a: unknown[]) => unknown)(...args);
  },
  callMethod(obj: unknown, key: unknown, args: unknown[], path?: string): unknown {
    if (obj === undefined && path) throw new UndefinedValueError(`'${path}' is undefined, cannot call '${String(key)}()'`, path);
    charge(1 + (Array.isArray(obj) ? obj.length : typeof obj === 'string' ? obj.length >>> 6 : 0));
    return callMethod(obj, key, args);
  },
  test(e: any, name: string, value: unknown, args: unknown[]): boolean {
    return e.tests[name](value, ...args) === true;
  },
  iterKeys(v: unknown): unknown {
    chargeLoop(v);
    return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Map) && !(v instanceof Set) ? Object.keys(v) : v;
  },
  iterPairs(v: unknown): unknown {
    chargeLoop(v);
    return v;
  },
  inOperator: pyIn,
  slice: pySlice,
  truthy,
  and: (a: unknown, b: () => unknown): unknown => (truthy(a) ? b() : a),
  or: (a: unknown, b: () => unknown): unknown => (truthy(a) ? a : b()),
  arith,
  concat,
  neg,
  compareChain(first: unknown, rest: [string, unknown][]): boolean {
    let left = first;
    for (const [op, right] of rest) {
      if (!compare(op, left, right)) return false;
      left = right;
    }
    return true;
  },
  mark(): void {
    lastMissing = undefined;
  },
  /** Output of `{{ … }}` inside a larger string: strict about undefined (Jinja StrictUndefined). */
  out(v: unknown): string {
    if (v === undefined) {
      const m = lastMissing;
      throw new UndefinedValueError(m ? m.message : 'value is undefined', m?.variable);
    }
    return emit(toText(v));
  },
  suppressValue(v: unknown): string {
    return emit(toText(v));
  },
  handleError(e: unknown, lineno: number, colno: number): unknown {
    if (isOwnError(e)) return e;
    return nunjucksRuntime.handleError(e, lineno, colno);
  },
});

// ---------------------------------------------------------------------------------------------
// Compile-time checks.

const REFUSED_NODES = new Set(['Include', 'Import', 'FromImport', 'Extends', 'Block', 'Super', 'TemplateRef', 'CallExtension', 'CallExtensionAsync', 'FilterAsync']);

function walk(node: any, visit: (n: any) => void): void {
  if (!node || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    node.forEach((n) => walk(n, visit));
    return;
  }
  if (!(node instanceof nodes.Node)) return;
  visit(node);
  for (const f of node.fields as string[]) walk(node[f], visit);
}

function checkAst(ast: any): void {
  walk(ast, (n) => {
    const t = n.typename as string;
    if (REFUSED_NODES.has(t)) throw new TemplateSyntaxError(`'${t.toLowerCase()}' is not allowed in templates`);
    if (t === 'Symbol') checkName(n.value);
    if (t === 'Literal' && n.value instanceof RegExp) throw new TemplateSyntaxError('regular expression literals are not supported');
    if (t === 'LookupVal' && n.val instanceof nodes.Literal) checkName(n.val.value);
    if (t === 'Filter') {
      checkName(n.name.value);
      if (!Object.prototype.hasOwnProperty.call(env.filters, n.name.value)) throw new TemplateSyntaxError(`unknown filter '${n.name.value}'`);
    }
    // `{'__proto__': x}` would compile to an object literal whose prototype is x.
    if (t === 'Pair' && n.key instanceof nodes.Literal) checkName(n.key.value);
  });
}

// ---------------------------------------------------------------------------------------------
// Code generation adjustments, applied to each compiler instance.

const PY_LITERALS: Record<string, string> = { True: 'true', False: 'false', None: 'null' };

function nodeName(c: any, node: any): string {
  try {
    return c._getNodeName(node).replace(/\["([^"]*)"\]/g, '.$1');
  } catch {
    return '--expression--';
  }
}

function patchCompiler(c: any): void {
  const emit = (s: string) => c._emit(s);
  const bin = (fn: string, op?: string) => (node: any, frame: any) => {
    emit(`runtime.${fn}(`);
    if (op) emit(`${JSON.stringify(op)}, `);
    c.compile(node.left, frame);
    emit(', ');
    c.compile(node.right, frame);
    emit(')');
  };
  const origSymbol = c.compileSymbol;
  c.compileSymbol = (node: any, frame: any) => {
    if (Object.prototype.hasOwnProperty.call(PY_LITERALS, node.value) && !frame.lookup(node.value)) emit(PY_LITERALS[node.value]);
    else origSymbol.call(c, node, frame);
  };
  const origAssert = c.assertType;
  c.assertType = (node: any, ...types: any[]) => {
    if (!(node instanceof Slice) && !(node instanceof IterKeys) && !(node instanceof IterPairs)) origAssert.call(c, node, ...types);
  };
  c.compileIterKeys = (node: any, frame: any) => {
    emit('runtime.iterKeys(');
    c._compileExpression(node.target, frame);
    emit(')');
  };
  c.compileIterPairs = (node: any, frame: any) => {
    emit('runtime.iterPairs(');
    c._compileExpression(node.target, frame);
    emit(')');
  };
  const origFor = c.compileFor;
  c.compileFor = (node: any, frame: any) => {
    if (!(node.arr instanceof IterKeys) && !(node.arr instanceof IterPairs)) {
      const Wrap = node.name instanceof nodes.Array ? IterPairs : IterKeys;
      node.arr = new Wrap(node.arr.lineno, node.arr.colno, node.arr);
    }
    origFor.call(c, node, frame);
  };
  c.compileLookupVal = (node: any, frame: any) => {
    if (node.val instanceof Slice) {
      emit('runtime.slice((');
      c._compileExpression(node.target, frame);
      for (const f of ['start', 'stop', 'step']) {
        emit('), (');
        c._compileExpression(node.val[f], frame);
      }
      emit('))');
      return;
    }
    emit('runtime.memberLookup((');
    c._compileExpression(node.target, frame);
    emit('),');
    c._compileExpression(node.val, frame);
    emit(`, ${JSON.stringify(nodeName(c, node.target))})`);
  };
  const origFunCall = c.compileFunCall;
  c.compileFunCall = (node: any, frame: any) => {
    if (node.name instanceof nodes.LookupVal) {
      emit(`(lineno = ${node.lineno}, colno = ${node.colno}, runtime.callMethod((`);
      c._compileExpression(node.name.target, frame);
      emit('),');
      c._compileExpression(node.name.val, frame);
      emit(', ');
      c._compileAggregate(node.args, frame, '[', ']');
      emit(`, ${JSON.stringify(nodeName(c, node.name.target))}))`);
    } else origFunCall.call(c, node, frame);
  };
  // Python tuples: `(a, b)` is a list (nunjucks would compile a JavaScript comma expression).
  c.compileGroup = (node: any, frame: any) => {
    c._compileAggregate(node, frame, node.children.length === 1 ? '(' : '[', node.children.length === 1 ? ')' : ']');
  };
  c.compileIs = (node: any, frame: any) => {
    const name = String(node.right.name.value);
    if (!Object.prototype.hasOwnProperty.call(env.tests, name)) throw new TemplateSyntaxError(`unknown test '${name}'`);
    emit(`runtime.test(env, ${JSON.stringify(name)}, `);
    c.compile(node.left, frame);
    emit(', ');
    c._compileAggregate(node.right.args, frame, '[', ']');
    emit(')');
  };
  c.compileIn = bin('inOperator');
  c.compileAdd = bin('arith', '+');
  c.compileSub = bin('arith', '-');
  c.compileMul = bin('arith', '*');
  c.compileDiv = bin('arith', '/');
  c.compileFloorDiv = bin('arith', '//');
  c.compileMod = bin('arith', '%');
  c.compilePow = bin('arith', '**');
  c.compileConcat = bin('concat');
  c.compileNeg = (node: any, frame: any) => {
    emit('runtime.neg(');
    c.compile(node.target, frame);
    emit(')');
  };
  c.compileNot = (node: any, frame: any) => {
    emit('!runtime.truthy(');
    c.compile(node.target, frame);
    emit(')');
  };
  const lazy = (fn: string) => (node: any, frame: any) => {
    emit(`runtime.${fn}(`);
    c.compile(node.left, frame);
    emit(', () => (');
    c.compile(node.right, frame);
    emit('))');
  };
  c.compileAnd = lazy('and');
  c.compileOr = lazy('or');
  c.compileInlineIf = (node: any, frame: any) => {
    emit('(runtime.truthy(');
    c.compile(node.cond, frame);
    emit(') ? (');
    c.compile(node.body, frame);
    emit(') : (');
    if (node.else_ !== null && node.else_ !== undefined) c.compile(node.else_, frame);
    else emit('""');
    emit('))');
  };
  c.compileCompare = (node: any, frame: any) => {
    emit('runtime.compareChain(');
    c.compile(node.expr, frame);
    emit(', [');
    node.ops.forEach((op: any, i: number) => {
      if (i > 0) emit(', ');
      emit(`[${JSON.stringify(op.type)}, `);
      c.compile(op.expr, frame);
      emit(']');
    });
    emit('])');
  };
  const origIf = c.compileIf;
  c.compileIf = (node: any, frame: any, async?: boolean) => {
    // Python truthiness for `{% if %}`: not(not(x)) compiles to runtime.truthy(x).
    node.cond = new nodes.Not(node.lineno, node.colno, new nodes.Not(node.lineno, node.colno, node.cond));
    origIf.call(c, node, frame, async);
  };
  c.compileOutput = (node: any, frame: any) => {
    for (const child of node.children) {
      if (child instanceof nodes.TemplateData) {
        if (child.value) {
          emit(`${c.buffer} += `);
          c.compileLiteral(child, frame);
          c._emitLine(';');
        }
      } else {
        emit(`${c.buffer} += runtime.out((runtime.mark(), `);
        c.compile(child, frame);
        c._emitLine('));');
      }
    }
  };
}

// ---------------------------------------------------------------------------------------------
// Compilation and cache.

type RootFn = (env: unknown, context: unknown, frame: unknown, runtime: unknown, cb: (err: unknown, res?: string) => void) => void;
type ExprFn = (env: unknown, context: unknown, frame: unknown, runtime: unknown) => unknown;

export type Compiled = { kind: 'expr'; fn: ExprFn; source: string } | { kind: 'template'; fn: RootFn };

function parse(src: string): any {
  try {
    return makeParser(src).parseAsRoot();
  } catch (e) {
    throw new TemplateSyntaxError(cleanNunjucksMessage(e));
  }
}

export function cleanNunjucksMessage(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  const pos = e as { lineno?: number; colno?: number; firstUpdate?: boolean };
  if (!/\[Line \d+/.test(msg) && typeof pos.lineno === 'number' && typeof pos.colno === 'number') {
    return `${msg.replace(/^\(unknown path\)\s*/, '').trim()} (line ${pos.lineno}, column ${pos.colno})`;
  }
  // nunjucks: "(unknown path) [Line 1, Column 5]\n  parseAggregate: expected comma after expression"
  const m = /\[Line (\d+), Column (\d+)\]\s*\n?\s*(?:Error: )?([\s\S]*)$/.exec(msg);
  if (m) return `${m[3].trim()} (line ${m[1]}, column ${m[2]})`;
  return msg.replace(/^\(unknown path\)\s*/, '').trim();
}

/** A template whose only content is one `{{ expression }}` (surrounding whitespace allowed). */
function wholeExpression(ast: any): any | undefined {
  const exprs: any[] = [];
  for (const child of ast.children as any[]) {
    if (!(child instanceof nodes.Output)) return undefined;
    for (const o of child.children as any[]) {
      if (o instanceof nodes.TemplateData) {
        if (String(o.value).trim() !== '') return undefined;
      } else exprs.push(o);
    }
  }
  return exprs.length === 1 && ast.children.length <= 3 ? exprs[0] : undefined;
}

function compileAst(src: string, ast: any, exprOnly: boolean): Compiled {
  checkAst(ast);
  const c = new compiler.Compiler('template', false);
  patchCompiler(c);
  try {
    if (exprOnly) {
      const expr = wholeExpression(ast);
      if (!expr) throw new TemplateSyntaxError(`not a single expression: ${src}`);
      c._compileExpression(expr, new nunjucksRuntime.Frame());
      const body = c.getCode();
      const fn = new Function(`return function expr(env, context, frame, runtime) { var lineno = 0; var colno = 0; return (${body}); };`)() as ExprFn;
      return { kind: 'expr', fn, source: src };
    }
    // nunjucks' transformer only matters for async filters and blocks, both refused here.
    c.compile(ast);
    const props = new Function(c.getCode())() as { root: RootFn };
    return { kind: 'template', fn: props.root };
  } catch (e) {
    if (isOwnError(e)) throw e;
    throw new TemplateSyntaxError(cleanNunjucksMessage(e));
  }
}

/**
 * Bounded cache with approximate LRU eviction and O(1) hits without reordering: entries live in
 * a young and an old generation; when the young one reaches half the bound, the old one is
 * dropped and the young one becomes old; a hit in the old generation is promoted. Templates used
 * in the last `max / 2` insertions are never evicted; at most `max` are held.
 */
class Lru<V> {
  private young = new Map<string, V>();
  private old = new Map<string, V>();
  constructor(public max: number) {}
  get(k: string): V | undefined {
    const v = this.young.get(k);
    if (v !== undefined) return v;
    const o = this.old.get(k);
    if (o !== undefined) this.set(k, o);
    return o;
  }
  set(k: string, v: V): void {
    if (this.young.size >= this.max / 2) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(k, v);
  }
  get size(): number {
    return this.young.size + this.old.size;
  }
  clear(): void {
    this.young.clear();
    this.old.clear();
  }
}

const CACHE_SIZE = 5000;
// Keyed by the template string itself (not a derived key): a playbook's template strings are the
// same string objects on every evaluation, so V8 hashes each one only once.
const templateCache = new Lru<Compiled | TemplateSyntaxError | SecurityError>(CACHE_SIZE);
const expressionCache = new Lru<Compiled | TemplateSyntaxError | SecurityError>(CACHE_SIZE);

export const cacheStats = { hits: 0, misses: 0 };

export function cacheSize(): number {
  return templateCache.size + expressionCache.size;
}
export function clearCache(): void {
  templateCache.clear();
  expressionCache.clear();
}

/** Changes the bound of each compiled-template cache (default 5000); clears them. For tests and tuning. */
export function setCacheLimit(max: number = CACHE_SIZE): void {
  templateCache.max = max;
  expressionCache.max = max;
  clearCache();
}

function cached(cache: Lru<Compiled | TemplateSyntaxError | SecurityError>, key: string, make: () => Compiled): Compiled {
  const hit = cache.get(key);
  if (hit !== undefined) {
    cacheStats.hits++;
    if (hit instanceof Error) throw hit;
    return hit;
  }
  cacheStats.misses++;
  try {
    const v = make();
    cache.set(key, v);
    return v;
  } catch (e) {
    if (e instanceof TemplateSyntaxError || e instanceof SecurityError) cache.set(key, e);
    throw e;
  }
}

/** Compiles a template string: a whole `{{ expr }}` becomes an expression, the rest a template. */
export function compileTemplate(src: string): Compiled {
  return cached(templateCache, src, () => {
    const ast = parse(src);
    return compileAst(src, ast, wholeExpression(ast) !== undefined);
  });
}

/** Compiles a bare expression (`a.b > 1`, as written in `when:`). */
export function compileExpression(expr: string): Compiled {
  return cached(expressionCache, expr, () => {
    if (/^\s*$/.test(expr)) throw new TemplateSyntaxError('empty expression');
    const src = `{{ ${expr} }}`;
    const ast = parse(src);
    if (!wholeExpression(ast)) throw new TemplateSyntaxError(`not a single expression: ${expr}`);
    return compileAst(src, ast, true);
  });
}

/** Runs a compiled template; returns the native value (expression) or the rendered string. */
export function run(compiled: Compiled, data: object): unknown {
  try {
    return runRaw(compiled, data);
  } catch (e) {
    // An operation that failed on an undefined operand (`missing + 1`, `'a' in missing`): name
    // the variable that was missing.
    if (e instanceof UndefinedValueError && e.variable === undefined && lastMissing && /undefined/.test(e.message)) {
      throw new UndefinedValueError(`${e.message} (${lastMissing.message})`, lastMissing.variable);
    }
    throw e;
  }
}

function runRaw(compiled: Compiled, data: object): unknown {
  const context = new SandboxContext(env, data);
  const frame = new nunjucksRuntime.Frame();
  lastMissing = undefined;
  loopBudget = MAX_LOOP_ITEMS;
  written = 0;
  startRender();
  if (compiled.kind === 'expr') {
    try {
      return compiled.fn(env, context, frame, rt);
    } catch (e) {
      if (isOwnError(e)) throw e;
      if (e instanceof lib.TemplateError) throw new UndefinedValueError(cleanNunjucksMessage(e));
      throw new UndefinedValueError((e as Error)?.message ?? String(e));
    }
  }
  let out: string | undefined;
  let err: unknown;
  compiled.fn(env, context, frame, rt, (e, res) => {
    err = e;
    out = res;
  });
  if (err) {
    if (isOwnError(err)) throw err;
    throw new UndefinedValueError(cleanNunjucksMessage(err));
  }
  return out ?? '';
}
