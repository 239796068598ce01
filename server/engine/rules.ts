/**
 * Static analysis of a playbook for the engine (cached per playbook object): step index, entry
 * step, and which control-flow event each case entry applies to.
 *
 * Case-entry event rule (spec: "entries are evaluated only for the event they name"):
 *  1. an entry whose `when` mentions `event.name` names the events whose names appear in it as
 *     string literals (`event.name == 'call.done'`, `event.name in ['step.enter', 'step.exit']`);
 *     if it mentions `event.name` but no known event name literal, it applies to every event and
 *     its expression decides;
 *     so does one that compares `event.name` negatively (`!=`, `not`): the literals it names are
 *     the events it excludes, not the ones it wants;
 *  2. otherwise, an entry that references `response`, `error`, `result`, `page`, `pages`,
 *     `_retry`, `_loop`, `loop_index`, `event.payload.response`/`.error` or the step's loop
 *     iterator (outside string literals) applies to `call.done`: those names are bound there
 *     only (the spec makes the iterator available to `when` during the loop);
 *  3. otherwise it applies to `step.exit`.
 */
import type { CaseEntry, Playbook, Step } from '../../playbook/types.js';

export const CONTROL_EVENTS = ['step.enter', 'call.done', 'step.exit', 'worker.done'] as const;
export type ControlEvent = (typeof CONTROL_EVENTS)[number];

export interface PlaybookIndex {
  steps: Map<string, Step>;
  entry: string | null;
}

const indexes = new WeakMap<Playbook, PlaybookIndex>();
const entryEvents = new WeakMap<CaseEntry, ReadonlySet<string>>();

export function indexPlaybook(pb: Playbook): PlaybookIndex {
  let idx = indexes.get(pb);
  if (!idx) {
    const steps = new Map<string, Step>();
    for (const s of pb.workflow) if (!steps.has(s.step)) steps.set(s.step, s);
    const entry = steps.has('start') ? 'start' : (pb.workflow[0]?.step ?? null);
    idx = { steps, entry };
    indexes.set(pb, idx);
  }
  return idx;
}

const STRING_LITERAL = /'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g;

/** An expression with its string literals blanked: the names it reads, not the text it compares. */
export function withoutLiterals(expr: string): string {
  return expr.replace(STRING_LITERAL, "''");
}
const CALL_REFS = /(?<![\w.])(response|error|result|page|pages|_retry|_loop|loop_index)\b|\bevent\.payload\.(response|error)\b/;
const NEGATED = /!=|\bnot\b/;

/** The events a step's case entry applies to (the step gives its loop iterator's name). */
export function caseEvents(entry: CaseEntry, step?: Step): ReadonlySet<string> {
  let set = entryEvents.get(entry);
  if (!set) {
    set = classify(String(entry.when ?? ''), step?.loop?.iterator);
    entryEvents.set(entry, set);
  }
  return set;
}

export function classify(when: string, iterator?: string): ReadonlySet<string> {
  const code = withoutLiterals(when);
  if (/\bevent\.name\b/.test(when) || /\bevent\[\s*['"]name['"]\s*\]/.test(when)) {
    if (NEGATED.test(code)) return new Set(CONTROL_EVENTS);
    const named = new Set<string>();
    for (const lit of when.match(STRING_LITERAL) ?? []) {
      const v = lit.slice(1, -1);
      if ((CONTROL_EVENTS as readonly string[]).includes(v)) named.add(v);
    }
    return named.size ? named : new Set(CONTROL_EVENTS);
  }
  const onCall = CALL_REFS.test(code) || (iterator !== undefined && /^\w+$/.test(iterator) && new RegExp(`(?<![\\w.])${iterator}\\b`).test(code));
  return new Set([onCall ? 'call.done' : 'step.exit']);
}
