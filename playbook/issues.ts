/**
 * Collects problems with their JSON path into the document as the author wrote it. Paths are
 * kept as segment lists while walking and formatted once (`workflow[3].case[0].then.next[0].step`),
 * so every module reports locations the same way.
 */
import type { PlaybookIssue } from './types.js';

export type PathSeg = string | number;

const IDENT = /^[A-Za-z_$][\w$-]*$/;

export function formatPath(segs: readonly PathSeg[]): string {
  let out = '';
  for (const s of segs) {
    if (typeof s === 'number') out += `[${s}]`;
    else if (IDENT.test(s)) out += out ? `.${s}` : s;
    else out += `[${JSON.stringify(s)}]`;
  }
  return out;
}

export class Issues {
  readonly errors: PlaybookIssue[] = [];
  readonly warnings: PlaybookIssue[] = [];

  error(path: readonly PathSeg[] | string, message: string): void {
    this.errors.push({ path: typeof path === 'string' ? path : formatPath(path), message, severity: 'error' });
  }

  warn(path: readonly PathSeg[] | string, message: string): void {
    this.warnings.push({ path: typeof path === 'string' ? path : formatPath(path), message, severity: 'warning' });
  }
}

/** `a.b[0].c` → ['', 'a', 'a.b', 'a.b[0]']: every path strictly above this one. */
export function ancestors(path: string): string[] {
  const out = [''];
  for (let i = 1; i < path.length; i++) if (path[i] === '.' || path[i] === '[') out.push(path.slice(0, i));
  return path ? out : [];
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function describeType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  return `a ${typeof v}`;
}

/** Edit distance, capped: anything beyond `max` is reported as max + 1. */
export function editDistance(a: string, b: string, max = 3): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  const d = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = d[0];
    d[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = d[j];
      d[j] = Math.min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return Math.min(d[b.length], max + 1);
}

/** The candidate closest to a probable typo, if any is close enough to be a useful hint. */
export function closest(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Math.max(1, Math.min(2, Math.floor(name.length / 3))) + 1;
  for (const c of candidates) {
    const dist = c.toLowerCase() === name.toLowerCase() ? 0 : editDistance(c, name);
    if (dist < bestD) {
      best = c;
      bestD = dist;
    }
  }
  return best;
}
