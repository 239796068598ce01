import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PythonPool, RAW_RESULT_MIN_CHARS } from './pool.js';

const pid = 'import os\ndef main():\n    return os.getpid()';

describe('PythonPool', () => {
  it('pre-spawns, recycles an interpreter after maxCallsPerProcess calls', async () => {
    const pool = new PythonPool({ size: 1, maxCallsPerProcess: 2 });
    await pool.start();
    expect(pool.stats.idle).toBe(1);
    const a = await pool.call({ code: pid });
    const b = await pool.call({ code: pid });
    // The replacement warms up in the background; the old interpreter is retired once it is ready.
    const first = a.ok ? a.result : null;
    for (let i = 0; i < 200 && pool.stats.pids.includes(first as number); i++) await new Promise((r) => setTimeout(r, 25));
    expect(pool.stats.alive).toBe(1);
    const c = await pool.call({ code: pid });
    expect(a.ok && b.ok && c.ok).toBe(true);
    if (a.ok && b.ok && c.ok) {
      expect(a.result).toBe(b.result);
      expect(c.result).not.toBe(a.result);
    }
    await pool.close();
  });

  it('one interpreter running alternating code: each traceback shows the lines of the code that ran, globals do not carry over', async () => {
    // The runner keeps compiled code; alternating snippets must not mix their source lines or state.
    const pool = new PythonPool({ size: 1, maxCallsPerProcess: 100 });
    await pool.start();
    try {
      const a = 'count = globals().get("count", 0) + 1\ndef main(n):\n    raise KeyError("a-%d-%d" % (n, count))';
      const b = 'def main(n):\n    x = n\n    raise LookupError("b-" + str(x))';
      const pids = new Set<number>();
      for (let round = 0; round < 3; round++) {
        for (const [code, message, line] of [
          [a, `KeyError: 'a-${round}-1'`, 'raise KeyError("a-%d-%d" % (n, count))'],
          [b, `LookupError: b-${round}`, 'raise LookupError("b-" + str(x))'],
        ] as const) {
          const r = await pool.call({ code, args: { n: round } });
          expect(r.ok).toBe(false);
          if (r.ok) return;
          if (r.pid !== undefined) pids.add(r.pid);
          expect(`${r.error.type}: ${r.error.message}`).toBe(message);
          expect(r.error.traceback).toContain('line 3, in main');
          expect(r.error.traceback).toContain(line);
        }
      }
      expect(pids.size).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it('a large answer keeps its result as the JSON text the interpreter wrote; small ones are parsed', async () => {
    const pool = new PythonPool({ size: 1 });
    await pool.start();
    try {
      // a result whose own keys include "log", and a log: only the runner's log key ends the result
      const code = 'print("hello, \\"log\\": there")\nresult = {"log": "x" * 10, "rows": [{"id": i, "log": ", \\"log\\": "} for i in range(40000)]}';
      const r = await pool.call({ code });
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      expect(r.resultJson).toBeDefined();
      expect(r.resultJson!.length).toBeGreaterThanOrEqual(RAW_RESULT_MIN_CHARS);
      expect(r.resultJson!.startsWith('{"log": "xxxxxxxxxx", "rows": [{"id": 0')).toBe(true);
      expect(r.log).toBe('hello, "log": there\n');
      // read, it is the value
      const value = r.result as { log: string; rows: Array<{ id: number; log: string }> };
      expect(value.log).toBe('x'.repeat(10));
      expect(value.rows).toHaveLength(40000);
      expect(value.rows[39999]).toEqual({ id: 39999, log: ', "log": ' });
      const small = await pool.call({ code: 'result = {"a": 1}' });
      expect(small.ok && small.resultJson).toBeFalsy();
      expect(small.ok && small.result).toEqual({ a: 1 });
    } finally {
      await pool.close();
    }
  });

  it('a python binary that cannot start is a clear failure, not a hang', async () => {
    const pool = new PythonPool({ size: 1, python: '/nonexistent/python3' });
    await expect(pool.start()).rejects.toThrow(/could not start|cannot start|ENOENT/);
    await expect(pool.call({ code: 'result = 1' })).rejects.toThrow(/python/);
    await pool.close();
  });

  it('cancellation through an AbortSignal kills the call', async () => {
    const pool = new PythonPool({ size: 1 });
    await pool.start();
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const r = await pool.call({ code: 'import time\ntime.sleep(20)' }, { signal: ac.signal });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe('cancelled');
    const again = await pool.call({ code: 'result = 5' });
    expect(again.ok && again.result).toBe(5);
    await pool.close();
  });

  it('maxCallsPerProcess is exact: with 3, the fourth call runs in another interpreter', async () => {
    const pool = new PythonPool({ size: 1, maxCallsPerProcess: 3 });
    await pool.start();
    const pids: unknown[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await pool.call({ code: pid });
      pids.push(r.ok ? r.result : r.error.message);
    }
    expect(pids[0]).toBe(pids[1]);
    expect(pids[1]).toBe(pids[2]);
    expect(pids[3]).not.toBe(pids[2]);
    expect([pids[4], pids[5]]).toEqual([pids[3], pids[3]]);
    expect(pids[6]).not.toBe(pids[5]);
    await pool.close();
  });

  it('a call that times out is killed with the processes it started', async () => {
    const pool = new PythonPool({ size: 1 });
    await pool.start();
    const pidFile = `/tmp/playflow-pool-test-${process.pid}.pid`;
    const r = await pool.call({ code: `import subprocess, time\nchild = subprocess.Popen(["sleep", "300"])\nopen(${JSON.stringify(pidFile)}, "w").write(str(child.pid))\ntime.sleep(300)` }, { timeoutMs: 1500 });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe('timeout');
    const child = Number(readFileSync(pidFile, 'utf8'));
    const running = () => {
      try {
        const stat = readFileSync(`/proc/${child}/stat`, 'utf8');
        return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 50 && running(); i++) await new Promise((res) => setTimeout(res, 100));
    expect(running()).toBe(false);
    await pool.close();
  });
});
