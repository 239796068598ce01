/**
 * Large values one decision write holds more than once, sent to PostgreSQL once.
 *
 * A completing step's result is in its `call.done`, `step.exit` and `step_completed` events, in the
 * step's summary and, for the last step, in `execution_completed`, the execution's result and the
 * snapshot: the same object up to seven times. Sent inline, node-postgres encodes every copy into
 * its bind buffer and PostgreSQL parses every copy as jsonb, at 15–60 MB/s on the 2-core bench
 * machine, so a 30 MB result cost seconds per copy (bench/results.ts e2e). A value that occurs at
 * least twice (the same object, or an equal long string) and whose JSON is at least
 * SHARE_MIN_CHARS long is sent once, as an element of one jsonb array parameter that PostgreSQL
 * parses once at bind. store/decision.ts stores it beside the documents (migration 280) or, while
 * a server of the previous version is live, puts it inside them with `jsonb_set`; either way what
 * the readers return is what the inline write stored.
 *
 * Below the threshold everything goes inline as before: a step's small result costs one extra
 * JSON.stringify here, and the SQL takes the inline branch.
 */

/** Values whose JSON is shorter are sent inline (sharing them would not pay for itself). */
export const SHARE_MIN_CHARS = 16 * 1024;

const candidate = (v: unknown): boolean =>
  (typeof v === 'object' && v !== null) || (typeof v === 'string' && v.length >= SHARE_MIN_CHARS);

export class SharedValues {
  private readonly seen = new Map<unknown, number>();
  /** Index in `texts`, or -1 once a value was found too small to share. */
  private readonly index = new Map<unknown, number>();
  private readonly texts: string[] = [];

  /** Counts one occurrence of `v` in the write; call for every position before any `ref`. */
  note(v: unknown): void {
    if (candidate(v)) this.seen.set(v, (this.seen.get(v) ?? 0) + 1);
  }

  /** The index of `v` in the shared array parameter, or undefined when `v` goes inline. */
  ref(v: unknown): number | undefined {
    if (!candidate(v) || (this.seen.get(v) ?? 0) < 2) return undefined;
    const known = this.index.get(v);
    if (known !== undefined) return known < 0 ? undefined : known;
    const text = JSON.stringify(v);
    if (text.length < SHARE_MIN_CHARS) {
      this.index.set(v, -1);
      return undefined;
    }
    this.index.set(v, this.texts.length);
    this.texts.push(text);
    return this.texts.length - 1;
  }

  /** The jsonb array parameter (null when nothing is shared). */
  param(): string | null {
    return this.texts.length ? `[${this.texts.join(',')}]` : null;
  }
}

/** `obj` without `key` (a shallow copy; the value itself is not copied). */
export function without<T extends object>(obj: T, key: string): T {
  const { [key]: _dropped, ...rest } = obj as Record<string, unknown>;
  return rest as T;
}

/** `obj` without the value at `path`: shallow copies along the path, everything else shared. */
export function withoutPath<T extends object>(obj: T, path: readonly string[]): T {
  if (path.length === 1) return without(obj, path[0]!);
  const [head, ...rest] = path as [string, ...string[]];
  const child = (obj as Record<string, unknown>)[head] as object;
  return { ...obj, [head]: withoutPath(child, rest) };
}
