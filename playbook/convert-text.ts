/**
 * `playflow playbook convert` on text (no I/O): the YAML is parsed into a document, the
 * reference-era forms are rewritten (convert.ts, legacy set included) and only the nodes that
 * changed are replaced, so comments and layout elsewhere in the file survive. The result is then
 * validated: what still warns is listed with what could not be converted.
 */
import { isDeepStrictEqual } from 'node:util';
import { parseDocument } from 'yaml';
import { convertReferenceForms, type ConvertNote } from './convert.js';
import { parsePlaybook } from './parse.js';
import { isPlainObject } from './issues.js';
import type { PlaybookIssue } from './types.js';

export interface TextConversion {
  /** The rewritten text (the input when nothing changed). */
  text: string;
  changed: boolean;
  changes: ConvertNote[];
  unconverted: ConvertNote[];
  /** Problems of the converted playbook (errors block nothing here: the file is still rewritten). */
  errors: PlaybookIssue[];
  warnings: PlaybookIssue[];
}

type Doc = ReturnType<typeof parseDocument>;

/** Replaces in `doc` only what differs between `before` and `after`. */
function patch(doc: Doc, path: Array<string | number>, before: unknown, after: unknown): void {
  if (isDeepStrictEqual(before, after)) return;
  if (isPlainObject(before) && isPlainObject(after)) {
    for (const k of Object.keys(before)) if (!(k in after)) doc.deleteIn([...path, k]);
    for (const k of Object.keys(after)) {
      if (k in before) patch(doc, [...path, k], before[k], after[k]);
      else doc.setIn([...path, k], doc.createNode(after[k]));
    }
    return;
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    after.forEach((x, i) => patch(doc, [...path, i], before[i], x));
    return;
  }
  if (path.length === 0) doc.contents = doc.createNode(after) as Doc['contents'];
  else doc.setIn(path, doc.createNode(after));
}

export function convertPlaybookText(text: string): TextConversion {
  const doc = parseDocument(text);
  if (doc.errors.length) {
    const e = doc.errors[0];
    return { text, changed: false, changes: [], unconverted: [], errors: [{ path: '', message: `invalid YAML: ${e.message.split('\n')[0]}`, severity: 'error' }], warnings: [] };
  }
  const before = doc.toJS() as unknown;
  const c = convertReferenceForms(before, { legacy: true });
  let out = text;
  if (c.changes.length) {
    patch(doc, [], before, c.doc);
    out = doc.toString({ lineWidth: 0 });
  }
  const check = parsePlaybook(out);
  return { text: out, changed: out !== text, changes: c.changes, unconverted: c.unconverted, errors: check.errors, warnings: check.warnings };
}
