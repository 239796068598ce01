/**
 * Output of the CLI's read commands, as kubectl, gh and the Temporal CLI do it:
 *
 *   -o table (default)  for people: aligned columns under upper-case headers, or `key: value`
 *                       blocks for one resource (some commands keep their own readable text)
 *   -o json             the API body exactly as the server sent it (pretty-printed), for scripts
 *   -o yaml             the same body as YAML
 *
 * `text` is accepted as a synonym of `table` (the earlier default, still used by scripts).
 * An unknown value is a usage error naming the allowed values, raised while the command line is
 * parsed, before any request.
 */
import { InvalidArgumentError } from 'commander';
import { stringify } from 'yaml';

export const OUTPUT_FORMATS = ['table', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** commander argParser for `-o, --output <format>`. */
export function parseOutputFormat(value: string): OutputFormat {
  const v = value.trim().toLowerCase();
  if (v === 'text') return 'table';
  if ((OUTPUT_FORMATS as readonly string[]).includes(v)) return v as OutputFormat;
  throw new InvalidArgumentError(`unknown output format ${JSON.stringify(value)}; allowed: ${OUTPUT_FORMATS.join(', ')}`);
}

export function toJson(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

export function toYaml(value: unknown): string {
  // No line folding and no anchors/aliases: the YAML reads back to exactly the JSON body.
  return stringify(value, { lineWidth: 0, aliasDuplicateObjects: false });
}

/** Writes the body as JSON or YAML; false for `table` (the caller prints its own layout). */
export function printStructured(format: OutputFormat, value: unknown, out: NodeJS.WritableStream = process.stdout): boolean {
  if (format === 'json') out.write(toJson(value));
  else if (format === 'yaml') out.write(toYaml(value));
  else return false;
  return true;
}

export type Cell = string | number | boolean | null | undefined;

/** One cell's text: empty for null/undefined, `-` never invented; newlines flattened. */
export function cell(v: Cell): string {
  if (v === null || v === undefined) return '';
  return String(v).replace(/\s*\n\s*/g, ' ');
}

/**
 * Aligned columns (kubectl style): upper-case headers, two spaces between columns, the last
 * column not padded. `empty` is printed instead when there are no rows.
 */
export function table(headers: string[], rows: Cell[][], empty?: string): string {
  if (rows.length === 0 && empty !== undefined) return `${empty}\n`;
  const text = [headers.map((h) => h.toUpperCase()), ...rows.map((r) => r.map(cell))];
  const widths = headers.map((_, i) => Math.max(...text.map((r) => (r[i] ?? '').length)));
  return text.map((r) => r.map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i]!))).join('  ').trimEnd()).join('\n') + '\n';
}

/** `key: value` lines with the values aligned (one resource, like `kubectl describe`). */
export function fields(pairs: Array<[string, Cell]>): string {
  const shown = pairs.filter(([, v]) => v !== undefined);
  const width = Math.max(0, ...shown.map(([k]) => k.length + 1));
  return shown.map(([k, v]) => `${`${k}:`.padEnd(width)}  ${cell(v)}`.trimEnd()).join('\n') + '\n';
}

/** Compact JSON of a value, shortened to `max` characters (table cells). */
export function brief(v: unknown, max = 60): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v) ?? 'undefined';
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** Indents every line of a block (nested JSON under a field). */
export function indent(text: string, by = '  '): string {
  return text.replace(/\n$/, '').split('\n').map((l) => by + l).join('\n') + '\n';
}
