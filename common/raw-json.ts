/**
 * JSON text sent on as it is. A worker only forwards a large tool result to the server: parsing
 * the python interpreter's 30 MB answer and serialising it again for `call.done` cost the worker
 * about 400 ms of CPU for a result of small objects, on the path of every large step.
 *
 * `stringifyJson` writes each RawJson in a value as its text. A RawJson serialised by a plain
 * JSON.stringify is parsed first (correct, not fast): nothing breaks where it is not expected.
 * The text must be one valid JSON value; the receiver parses it, so invalid text is refused there.
 */

/** Marks where a RawJson goes while JSON.stringify runs; the control character is written \u0001. */
const MARK = `\u0001raw-json:${globalThis.crypto.randomUUID()}:`;
/** The mark as JSON.stringify writes it, from its opening quote (the index and `"` follow). */
const MARK_IN_JSON = JSON.stringify(MARK).slice(0, -1);

/** The RawJson values met by the stringifyJson in progress (null: none is). */
let found: RawJson[] | null = null;

export class RawJson {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    if (!found) return JSON.parse(this.text);
    found.push(this);
    return `${MARK}${found.length - 1}`;
  }
}

/** JSON.stringify of `value`, each RawJson in it written as its text. */
export function stringifyJson(value: unknown, replacer?: (key: string, value: unknown) => unknown): string {
  const outer = found;
  const raws: RawJson[] = [];
  found = raws;
  let text: string;
  try {
    text = JSON.stringify(value, replacer as never);
  } finally {
    found = outer;
  }
  if (!raws.length) return text;
  // outside stringifyJson a RawJson serialises as its parsed value
  const plain = () => JSON.stringify(value, replacer as never);
  const parts = text.split(MARK_IN_JSON);
  // each mark exactly once, as a whole string ("<mark><n>"); anything else (a string of the value
  // that happens to hold the mark) and the value is serialised plainly
  if (parts.length !== raws.length + 1) return plain();
  let out = parts[0]!;
  for (let i = 1; i < parts.length; i++) {
    const m = /^(\d+)"/.exec(parts[i]!);
    if (!m || Number(m[1]) !== i - 1) return plain();
    out += raws[i - 1]!.text + parts[i]!.slice(m[0].length);
  }
  return out;
}

/**
 * Defines `key` on `target` as the value parsed from `text`, parsed on first read and kept: a
 * large tool result the worker forwards as text is never parsed unless someone reads it.
 */
export function parsedOnRead<T extends object>(target: T, key: string, text: string): T {
  let parsed: unknown;
  let done = false;
  Object.defineProperty(target, key, {
    enumerable: true,
    get: () => {
      if (!done) {
        parsed = JSON.parse(text);
        done = true;
      }
      return parsed;
    },
  });
  return target;
}
