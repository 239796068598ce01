import { describe, expect, it } from 'vitest';
import { PythonPool } from './pool.js';

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
});
