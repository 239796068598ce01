/** SQL helpers shared by the postgres and duckdb tools (no I/O). */

/**
 * Splits SQL text into statements at top-level semicolons, respecting '…' and "…" quoting
 * (doubled quotes), E'…' backslash escapes, $tag$…$tag$ bodies, -- and nested block comments.
 * Empty statements (only whitespace/comments) are dropped.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let start = 0;
  let i = 0;
  let meaningful = false;
  const n = sql.length;
  const push = (end: number) => {
    const s = sql.slice(start, end).trim();
    if (s && meaningful) out.push(s);
    meaningful = false;
  };
  while (i < n) {
    const c = sql[i];
    const next = sql[i + 1];
    if (c === '-' && next === '-') {
      const e = sql.indexOf('\n', i);
      i = e < 0 ? n : e + 1;
      continue;
    }
    if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') { depth++; i += 2; }
        else if (sql[i] === '*' && sql[i + 1] === '/') { depth--; i += 2; }
        else i++;
      }
      continue;
    }
    if (c === "'" || c === '"') {
      meaningful = true;
      const escapes = c === "'" && i > 0 && /[eE]/.test(sql[i - 1]) && !/\w/.test(sql[i - 2] ?? '');
      i++;
      while (i < n) {
        if (escapes && sql[i] === '\\') { i += 2; continue; }
        if (sql[i] === c) {
          if (sql[i + 1] === c) { i += 2; continue; }
          break;
        }
        i++;
      }
      i++;
      continue;
    }
    if (c === '$') {
      const m = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i));
      if (m && !/[A-Za-z0-9_]/.test(sql[i - 1] ?? '')) {
        meaningful = true;
        const tag = m[0];
        const e = sql.indexOf(tag, i + tag.length);
        i = e < 0 ? n : e + tag.length;
        continue;
      }
    }
    if (c === ';') {
      push(i);
      start = i + 1;
      i++;
      continue;
    }
    if (!/\s/.test(c)) meaningful = true;
    i++;
  }
  push(n);
  return out;
}

/** Highest `$n` placeholder outside quotes/comments (0 when none). */
export function maxPlaceholder(statement: string): number {
  // Strip quoted strings, dollar bodies and comments, then look for $n.
  const stripped = statement
    .replace(/--[^\n]*/g, ' ')
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/\$([A-Za-z_][A-Za-z0-9_]*)?\$[\s\S]*?\$\1\$/g, ' ')
    .replace(/'(?:[^']|'')*'/g, ' ')
    .replace(/"(?:[^"]|"")*"/g, ' ');
  let max = 0;
  for (const m of stripped.matchAll(/\$(\d+)/g)) max = Math.max(max, Number(m[1]));
  return max;
}

/** "schema.table" → "schema"."table", each part quoted with embedded quotes doubled. */
export function quoteIdent(name: string): string {
  if (!name || typeof name !== 'string') throw new Error('identifier must be a non-empty string');
  return name
    .split('.')
    .map((p) => {
      const bare = p.startsWith('"') && p.endsWith('"') && p.length >= 2 ? p.slice(1, -1).replace(/""/g, '"') : p;
      if (!bare) throw new Error(`bad identifier ${JSON.stringify(name)}`);
      return `"${bare.replace(/"/g, '""')}"`;
    })
    .join('.');
}

/** The table sink of postgres and duckdb: rows written to `table` with generated SQL. */
export interface TableWrite {
  table: string;
  rows: Array<Record<string, unknown>>;
  mode: 'insert' | 'upsert';
  key: string[];
}

const isRow = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Reads `{table, args | data, mode, key}` of a tool; undefined when the tool has no `table` or
 * also gives SQL text. Throws Error with a message naming the field for anything malformed.
 */
export function tableWriteOf(tool: Record<string, unknown>, kind: string): TableWrite | undefined {
  if (tool.table === undefined || tool.command !== undefined || tool.query !== undefined) return undefined;
  if (typeof tool.table !== 'string' || !tool.table.trim()) throw new Error(`${kind} table sink: table must be a table name`);
  if (tool.args !== undefined && tool.data !== undefined) throw new Error(`${kind} table sink: give the rows in args or in data, not both`);
  const given = tool.args ?? tool.data;
  const rows = Array.isArray(given) ? given : given === undefined || given === null ? [] : [given];
  if (rows.length === 0) throw new Error(`${kind} table sink: args (or data) must be a row object or a non-empty list of row objects`);
  rows.forEach((r, i) => {
    if (!isRow(r) || Object.keys(r).length === 0) throw new Error(`${kind} table sink: row ${i} of args must be an object of column values, got ${JSON.stringify(r)?.slice(0, 80)}`);
  });
  const mode = tool.mode ?? 'insert';
  if (mode !== 'insert' && mode !== 'upsert') throw new Error(`${kind} table sink: mode must be insert or upsert, got ${JSON.stringify(mode)}`);
  const key = tool.key === undefined || tool.key === null ? [] : Array.isArray(tool.key) ? tool.key : [tool.key];
  if (!key.every((k) => typeof k === 'string' && k)) throw new Error(`${kind} table sink: key must be a column name or a list of column names`);
  if (mode === 'upsert' && key.length === 0) throw new Error(`${kind} table sink: mode upsert needs key (the column(s) of a unique constraint)`);
  return { table: tool.table, rows: rows as Array<Record<string, unknown>>, mode, key: key as string[] };
}

/**
 * One parameterised INSERT for every row (columns: the union of the rows' keys, missing ones
 * NULL); upsert adds ON CONFLICT (key) DO UPDATE of the other columns. Identifiers are quoted,
 * values are bound as `$1..$n`, never written into the text.
 */
export function tableWriteSql(w: TableWrite, returning: boolean): { text: string; values: unknown[] } {
  const cols = [...new Set(w.rows.flatMap((r) => Object.keys(r)))];
  for (const k of w.key) if (!cols.includes(k)) throw new Error(`table sink: key column '${k}' is not in the rows (columns: ${cols.join(', ')})`);
  const values: unknown[] = [];
  const tuples = w.rows.map((r) => `(${cols.map((c) => {
    values.push(r[c] === undefined ? null : r[c]);
    return `$${values.length}`;
  }).join(', ')})`);
  let text = `INSERT INTO ${quoteIdent(w.table)} (${cols.map(quoteIdent).join(', ')}) VALUES ${tuples.join(', ')}`;
  if (w.mode === 'upsert') {
    const rest = cols.filter((c) => !w.key.includes(c));
    const conflict = `ON CONFLICT (${w.key.map(quoteIdent).join(', ')})`;
    text += rest.length ? ` ${conflict} DO UPDATE SET ${rest.map((c) => `${quoteIdent(c)} = EXCLUDED.${quoteIdent(c)}`).join(', ')}` : ` ${conflict} DO NOTHING`;
  }
  if (returning) text += ' RETURNING *';
  return { text, values };
}
