/** CPU time of another process, for the benchmarks' per-process figures. */
import { readFileSync } from 'node:fs';

/** Linux's USER_HZ: /proc/<pid>/stat counts CPU time in ticks of 10 ms. */
const CLOCK_TICKS = 100;

/** utime + stime of a process in ms (Linux /proc), NaN when unknown or unreadable. */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name, which may itself hold spaces and parentheses
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}
