/**
 * Checks the templates of a written document without rendering them: syntax and sandbox
 * violations (errors, since every such template would fail at run time), and references that
 * cannot resolve — undeclared keychain entries, case conditions on event names that never fire,
 * a loop iterator in structural next args (the spec evaluates those at step exit, where the
 * iterator no longer exists). Paths are those of the written strings.
 */
import { checkTemplate, referencesName } from './template/index.js';
import { Issues, formatPath, isPlainObject, type PathSeg } from './issues.js';

export const EVENT_NAMES = ['step.enter', 'call.done', 'step.exit', 'worker.done'] as const;

const KEYCHAIN_REF = /\bkeychain\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*['"]([^'"]+)['"]\s*\])/g;
const EVENT_NAME_TEST = /\bevent\.name\s*(?:==|!=)\s*['"]([^'"]*)['"]/g;
const TEMPLATE_PARTS = /\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\}/g;

/** Keys whose string value is a condition; a bare expression there is still an expression. */
function isConditionPath(path: PathSeg[]): boolean {
  const [last, parent, grand] = [path[path.length - 1], path[path.length - 2], path[path.length - 3]];
  if (last === 'when') return grand === 'case' || grand === 'retry' || grand === 'next' || parent === 'retry' || parent === 'on_error' || parent === 'on_success';
  return (last === 'while' && parent === 'on_success') || (last === 'continue_while' && parent === 'pagination') || isFromPath(path);
}

/** `collect.from` and `result.from` (or `result: <expr>`) in a case action: expressions too. */
function isFromPath(path: PathSeg[]): boolean {
  const [last, parent, grand] = [path[path.length - 1], path[path.length - 2], path[path.length - 3]];
  if (last === 'from') return parent === 'collect' || parent === 'result';
  return last === 'result' && (parent === 'then' || grand === 'then');
}

function walkStrings(v: unknown, path: PathSeg[], visit: (s: string, path: PathSeg[]) => void): void {
  if (typeof v === 'string') visit(v, path);
  else if (Array.isArray(v)) v.forEach((x, i) => walkStrings(x, [...path, i], visit));
  else if (isPlainObject(v)) for (const [k, x] of Object.entries(v)) walkStrings(x, [...path, k], visit);
}

/**
 * Most templates compiled per document. Compiling costs about a tenth of a millisecond each;
 * real playbooks hold hundreds, a hostile 2 MiB one tens of thousands. A count, not a time
 * budget, so the verdict on a document never depends on the machine.
 */
export const MAX_CHECKED_TEMPLATES = 5000;

export function checkTemplates(doc: Record<string, unknown>, issues: Issues): void {
  let checked = 0;
  const declared = new Set(
    (Array.isArray(doc.keychain) ? doc.keychain : []).flatMap((k) => (isPlainObject(k) && typeof k.name === 'string' ? [k.name] : [])),
  );
  const unknownKeychain = new Set<string>();

  const visit = (s: string, path: PathSeg[]) => {
    const condition = isConditionPath(path);
    if (!s.includes('{{') && !s.includes('{%') && !condition) return;
    if (++checked > MAX_CHECKED_TEMPLATES) {
      if (checked === MAX_CHECKED_TEMPLATES + 1) issues.warn(path, `template checks stopped after ${MAX_CHECKED_TEMPLATES} templates; the rest are checked when they render`);
      return;
    }
    const problem = checkTemplate(s, { expression: condition, field: formatPath(path) });
    if (problem) {
      issues.error(path, `invalid template: ${problem.message}`);
      return;
    }
    const exprs = condition && !s.includes('{{') && !s.includes('{%') ? [s] : (s.match(TEMPLATE_PARTS) ?? []);
    for (const expr of exprs) {
      for (const m of expr.matchAll(KEYCHAIN_REF)) {
        const name = m[1] ?? m[2];
        if (!declared.has(name) && !unknownKeychain.has(`${formatPath(path)}\0${name}`)) {
          unknownKeychain.add(`${formatPath(path)}\0${name}`);
          issues.warn(path, `keychain entry '${name}' is not declared in the keychain section`);
        }
      }
      if (condition) {
        for (const m of expr.matchAll(EVENT_NAME_TEST)) {
          if (!(EVENT_NAMES as readonly string[]).includes(m[1])) {
            issues.warn(path, `event '${m[1]}' never fires; case conditions see ${EVENT_NAMES.join(', ')}`);
          }
        }
      }
    }
  };

  for (const section of ['keychain', 'workbook', 'workflow'] as const) walkStrings(doc[section], [section], visit);
  // The engine uses workload values as written (the start payload is merged over them), so a
  // template there reaches tools as literal text.
  walkStrings(doc.workload, ['workload'], (s, path) => {
    if (s.includes('{{') || s.includes('{%')) {
      issues.warn(path, 'workload values are not rendered: this template reaches steps as literal text; compute it in a step (vars) or pass the value in the start payload');
    }
  });

  if (!Array.isArray(doc.workflow)) return;
  doc.workflow.forEach((step, i) => {
    if (!isPlainObject(step) || !isPlainObject(step.loop) || !Array.isArray(step.next)) return;
    const iterator = step.loop.iterator ?? step.loop.element ?? 'item';
    if (typeof iterator !== 'string') return;
    step.next.forEach((target, j) => {
      if (!isPlainObject(target)) return;
      walkStrings(target.args, ['workflow', i, 'next', j, 'args'], (s, path) => {
        // Broken templates were reported above; scanning them again could be slow on hostile input.
        if (!checkTemplate(s) && referencesName(s, iterator)) {
          issues.warn(path, `the loop iterator '${iterator}' is not available in next args: they are evaluated once, at step exit; collect per-item values in a case action instead`);
        }
      });
    });
  });
}
