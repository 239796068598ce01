/** RFC 4180 CSV: header row ↔ list of objects. */
import type { Json, JsonObject } from '../../playbook/types.js';

export function parseCsv(text: string): JsonObject[] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  let i = 0;
  if (text.charCodeAt(0) === 0xfeff) i = 1;
  let any = false;
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') { field += '"'; i++; }
        else quoted = false;
      } else field += c;
      continue;
    }
    if (c === '"') { quoted = true; any = true; }
    else if (c === ',') { row.push(field); field = ''; any = true; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      if (any || field) { row.push(field); rows.push(row); }
      row = []; field = ''; any = false;
    } else { field += c; any = true; }
  }
  if (any || field) { row.push(field); rows.push(row); }
  if (rows.length === 0) return [];
  const [header, ...body] = rows;
  return body.map((r) => Object.fromEntries(header.map((h, j) => [h, r[j] ?? ''])));
}

function cell(v: Json | undefined): string {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\r\n]/.test(s) || /^\s|\s$/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** Objects (header from the union of keys, first-seen order) or lists of cells. */
export function toCsv(rows: Json[], withHeader = true): string {
  if (rows.length === 0) return '';
  if (rows.every(Array.isArray)) return rows.map((r) => (r as Json[]).map(cell).join(',')).join('\n') + '\n';
  const cols: string[] = [];
  for (const r of rows) if (r && typeof r === 'object' && !Array.isArray(r)) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
  const lines = rows.map((r) => cols.map((c) => cell((r as JsonObject)?.[c])).join(','));
  return (withHeader ? [cols.map(cell).join(','), ...lines] : lines).join('\n') + '\n';
}
