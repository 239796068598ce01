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
