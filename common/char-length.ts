/**
 * Length in characters (Unicode code points), as the spec's limits, PostgreSQL's length() and
 * varchar(n), and the server's JSON Schema validator count them: `.length` counts UTF-16 units, so
 * an emoji would count twice.
 */
export function charLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}
