/**
 * Semantic validation. Two passes:
 *  - `checkWrittenDocument` looks at the document as written for what v2 removed (step `type`,
 *    step `when`, conditional next entries, tool attributes on the step) and says what to write
 *    instead — the schema alone would only say "unknown field";
 *  - `validatePlaybook` checks the normalised playbook as a graph (unique names, next and case
 *    targets exist, workbook references resolve), reporting at the author's paths.
 */
import { API_VERSIONS, type KeychainDef, type NextTarget, type Playbook, type PlaybookIssue, type Step } from './types.js';
import { Issues, closest, formatPath, isPlainObject, type PathSeg } from './issues.js';
import { isV1, type SourceMap } from './normalize.js';

/** Tool attributes that v1 wrote on the step itself; in v2 they live under `tool`. */
const TOOL_ATTRIBUTES = [
  'method', 'endpoint', 'url', 'params', 'headers', 'json', 'data', 'payload', 'timeout', 'verify', 'auth',
  'command', 'query', 'database', 'code', 'libs', 'path',
];

function apiVersionChecks(doc: Record<string, unknown>, issues: Issues): void {
  const v = doc.apiVersion;
  if (v === undefined) {
    issues.error('apiVersion', `missing apiVersion; write apiVersion: playflow.io/v2`);
  } else if (!(API_VERSIONS as readonly unknown[]).includes(v)) {
    const cr = typeof v === 'string' && /alpha|beta/.test(v) && isPlainObject(doc.spec)
      ? '; this looks like a Kubernetes custom resource: validate the playbook document it was made from, or its spec with apiVersion playflow.io/v2'
      : '';
    issues.error('apiVersion', `unsupported apiVersion ${JSON.stringify(v)}; accepted: ${API_VERSIONS.join(', ')}${cr}`);
  }
  if (doc.kind === undefined) issues.error('kind', 'missing kind; write kind: Playbook');
  else if (doc.kind !== 'Playbook') issues.error('kind', `kind must be 'Playbook', got ${JSON.stringify(doc.kind)}`);
}

function removedStepFields(step: Record<string, unknown>, path: PathSeg[], issues: Issues): void {
  const name = typeof step.step === 'string' ? `step '${step.step}'` : 'this step';
  if ('type' in step) {
    const t = step.type;
    const hint = t === 'start' || t === 'end'
      ? 'a routing step has no tool: remove it'
      : `put the tool under 'tool' with 'kind' (tool: {kind: ${typeof t === 'string' ? t : '<kind>'}, ...})`;
    issues.error([...path, 'type'], `${name}: step-level 'type' was removed in v2; ${hint}`);
  }
  if ('when' in step) {
    issues.error([...path, 'when'], `${name}: step-level 'when' was removed in v2; route from the previous step with a case entry: case: [{when: <condition>, then: {next: [{step: ${typeof step.step === 'string' ? step.step : '<name>'}}]}}]`);
  }
  if ('with' in step) {
    issues.error([...path, 'with'], `${name}: 'with' is reserved for tool inputs (tool.with); pass data into a step with 'args'`);
  }
  for (const attr of TOOL_ATTRIBUTES) {
    if (attr in step) {
      issues.error([...path, attr], `${name}: tool attribute '${attr}' directly on the step is not accepted in v2; move it under 'tool' (tool: {kind: ..., ${attr}: ...})`);
    }
  }
  const next = step.next;
  if (Array.isArray(next)) {
    next.forEach((entry, i) => {
      if (!isPlainObject(entry)) return;
      const keys = ['when', 'then', 'else'].filter((k) => k in entry);
      if (keys.length) {
        issues.error([...path, 'next', i], `${name}: next entries with ${keys.join('/')} were removed in v2; use case: [{when: <condition>, then: {next: [{step: <name>, args: {...}}]}}] and keep next for unconditional successors`);
      }
    });
  }
}

/**
 * Checks on the document as written: apiVersion/kind and, for v2 documents, the constructs v2
 * removed. v1 documents get those rewritten by normalisation instead (with warnings).
 */
export function checkWrittenDocument(doc: Record<string, unknown>, issues: Issues): void {
  apiVersionChecks(doc, issues);
  if (isV1(doc.apiVersion)) return;
  if (!Array.isArray(doc.workflow)) return;
  doc.workflow.forEach((step, i) => {
    if (isPlainObject(step)) removedStepFields(step, ['workflow', i], issues);
  });
}

function suggest(name: string, names: string[]): string {
  // Bounded so a document with thousands of steps and bad targets stays fast.
  const close = names.length <= 500 ? closest(name, names) : undefined;
  if (close) return `; did you mean '${close}'?`;
  return names.length <= 20 ? `; steps are: ${names.join(', ')}` : '';
}

/** Template context names (spec "Template context"); a step result must not hide them. */
const RESERVED_NAMES = ['workload', 'args', 'vars', 'results', 'execution_id', 'job', 'payload', 'event', 'response', 'error', 'ctx', 'keychain', 'result', 'page', 'pages', 'iteration', '_retry'];

function uniqueNames(names: string[], section: string, what: string, issues: Issues): void {
  const seen = new Map<string, number>();
  names.forEach((n, i) => {
    const first = seen.get(n);
    if (first !== undefined) issues.error(`${section}[${i}].name`, `duplicate ${what} name '${n}' (first defined at ${section}[${first}])`);
    else seen.set(n, i);
  });
}

function keychainRequirements(k: KeychainDef, i: number, issues: Issues): void {
  const need = (field: string, why: string) => {
    if (k[field] === undefined || k[field] === null || k[field] === '') issues.error(`keychain[${i}].${field}`, `keychain entry '${k.name}' (kind ${k.kind}) needs '${field}': ${why}`);
  };
  if (k.kind === 'secret_manager') {
    need('provider', 'gcp, aws or azure');
    need('map', 'result field name → secret path');
  }
  if (k.kind === 'oauth2' || k.kind === 'http') need('endpoint', 'the token request URL');
}

const DEF_MAIN = /^(?:async\s+)?def\s+main\s*\(/m;
const ASSIGNS_RESULT = /^result\s*(?::[^=\n]*)?=(?!=)/m;
const IMPORT = /^(?:import\s+\w|from\s+[\w.]+\s+import\s)/m;

/**
 * The spec's two python shapes: `def main(...)` returning the result, or a plain body assigning
 * `result` with libraries pre-imported through `libs`. Anything else runs but yields nothing.
 */
function pythonShape(code: unknown, path: string, issues: Issues): void {
  if (typeof code !== 'string') {
    if (code === undefined) issues.error(path, "a python tool needs 'code': a body assigning result, or def main(...)");
    return;
  }
  if (/^\s*\{\{[^}]*\}\}\s*$/.test(code) || DEF_MAIN.test(code)) return;
  if (!ASSIGNS_RESULT.test(code)) {
    issues.warn(path, 'python code neither defines main(...) nor assigns result at top level, so the step has no result');
  }
  if (IMPORT.test(code)) {
    issues.warn(path, 'a plain python body has its libraries pre-imported: declare them in libs ({alias: module}) or write def main(...) with the imports inside');
  }
}

/** The step an execution starts with: the one named `start`, else the first. */
export function entryStep(playbook: Playbook): Step {
  const start = playbook.workflow.find((s) => s.step === 'start');
  if (start) return start;
  if (!playbook.workflow.length) throw new Error(`playbook '${playbook.metadata.name}' has no steps`);
  return playbook.workflow[0];
}

/** Every target a step can transition to: structural next and case next actions. */
export function stepTargets(step: Step): NextTarget[] {
  const out = [...(step.next ?? [])];
  for (const c of step.case ?? []) for (const a of c.then) if (a.action === 'next') out.push(...a.targets);
  return out;
}

/**
 * Graph-level checks of a normalised playbook. `sources` (from normalisation) maps steps and
 * targets to their written paths; without it, paths into the normalised shape are used.
 */
export function validatePlaybook(playbook: Playbook, sources?: SourceMap): PlaybookIssue[] {
  const issues = new Issues();
  const steps = playbook.workflow;
  if (!steps.length) issues.error('workflow', 'workflow needs at least one step');
  const stepPath = (s: Step, i: number) => sources?.get(s) ?? formatPath(['workflow', i]);

  const first = new Map<string, number>();
  steps.forEach((s, i) => {
    if (!s.step) return;
    const seen = first.get(s.step);
    if (seen !== undefined) {
      issues.error(`${stepPath(s, i)}.step`, `duplicate step name '${s.step}' (first defined at ${stepPath(steps[seen], seen)}); step names must be unique`);
    } else first.set(s.step, i);
  });
  const names = [...first.keys()];
  const tasks = new Set(playbook.workbook.map((t) => t.name));
  uniqueNames(playbook.workbook.map((t) => t.name), 'workbook', 'workbook task', issues);
  uniqueNames(playbook.keychain.map((k) => k.name), 'keychain', 'keychain entry', issues);
  playbook.keychain.forEach((k, i) => keychainRequirements(k, i, issues));
  playbook.workbook.forEach((t, i) => {
    if (t.tool.kind === 'python') pythonShape(t.tool.code, `workbook[${i}].tool.code`, issues);
  });
  steps.forEach((s, i) => {
    if (RESERVED_NAMES.includes(s.step)) {
      issues.warn(`${stepPath(s, i)}.step`, `step name '${s.step}' hides the template variable of the same name; rename the step`);
    } else if (s.step && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(s.step)) {
      issues.warn(`${stepPath(s, i)}.step`, `step name '${s.step}' is not a template identifier, so its result can only be read as results['${s.step}']; prefer letters, digits and _`);
    }
  });

  steps.forEach((s, i) => {
    const base = stepPath(s, i);
    const checkTarget = (t: NextTarget, fallback: string) => {
      if (!first.has(t.step)) {
        issues.error(sources?.get(t) ?? fallback, `step '${s.step}': next target '${t.step}' is not a step of this playbook${suggest(t.step, names)}`);
      }
    };
    (s.next ?? []).forEach((t, j) => checkTarget(t, `${base}.next[${j}].step`));
    (s.case ?? []).forEach((c, ci) => c.then.forEach((a, ai) => {
      if (a.action === 'next') a.targets.forEach((t, j) => checkTarget(t, `${base}.case[${ci}].then[${ai}].next[${j}].step`));
    }));
    if (s.tool?.kind === 'workbook') {
      const task = s.tool.name;
      if (typeof task !== 'string' || !task) {
        issues.error(`${base}.tool.name`, `step '${s.step}': a workbook tool needs 'name': the workbook task to run`);
      } else if (!task.includes('{{') && !tasks.has(task)) {
        issues.error(`${base}.tool.name`, `step '${s.step}': workbook task '${task}' is not defined in the workbook section${tasks.size ? ` (tasks: ${[...tasks].join(', ')})` : ''}`);
      }
    }
    if (s.tool?.kind === 'python' && s.tool.script === undefined) pythonShape(s.tool.code, `${base}.tool.code`, issues);
    (s.retry ?? []).forEach((p, j) => {
      if (p.then.max_attempts === undefined) {
        issues.warn(`${base}.retry[${j}].then.max_attempts`, `step '${s.step}': set max_attempts on every retry policy to prevent endless loops`);
      }
    });
  });

  if (steps.length && !issues.errors.length) unreachable(playbook, stepPath, issues);
  return [...issues.errors, ...issues.warnings];
}

function unreachable(playbook: Playbook, stepPath: (s: Step, i: number) => string, issues: Issues): void {
  const byName = new Map(playbook.workflow.map((s) => [s.step, s]));
  const seen = new Set<string>();
  const todo = [entryStep(playbook).step];
  while (todo.length) {
    const name = todo.pop() as string;
    if (seen.has(name)) continue;
    seen.add(name);
    const s = byName.get(name);
    if (s) for (const t of stepTargets(s)) todo.push(t.step);
  }
  playbook.workflow.forEach((s, i) => {
    if (!seen.has(s.step)) issues.warn(stepPath(s, i), `step '${s.step}' is never reached from the entry step '${entryStep(playbook).step}'`);
  });
}

