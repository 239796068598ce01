/**
 * Log lines of `playflow dev` for a person at a terminal: the server's and worker's pino JSON
 * lines turned into `warn  message  key=value …` on stderr (stdout carries the run's output).
 */
import { Writable } from 'node:stream';

const SKIP = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'v']);

function value(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

export function formatLogLine(line: string): string | null {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.trim() ? line.trim() : null;
  }
  const fields = Object.entries(rec)
    .filter(([k]) => !SKIP.has(k))
    .map(([k, v]) => `${k}=${value(v)}`);
  const who = typeof rec.name === 'string' ? rec.name.replace(/^playflow-/, '') : '';
  return [`${String(rec.level ?? 'info').padEnd(5)} ${who ? `[${who}] ` : ''}${String(rec.msg ?? '')}`, ...fields].join('  ');
}

/** A pino destination writing formatted lines; `drop(record)` true hides a line. */
export function humanLogStream(opts: { out?: NodeJS.WritableStream; drop?: (line: string) => boolean } = {}): Writable {
  const out = opts.out ?? process.stderr;
  let pending = '';
  return new Writable({
    write(chunk: Buffer | string, _enc, done) {
      pending += chunk.toString();
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (opts.drop?.(line)) continue;
        const text = formatLogLine(line);
        if (text !== null) out.write(`${text}\n`);
      }
      done();
    },
  });
}
