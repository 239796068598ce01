import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runTool } from './index.js';
import { closePythonPool, configurePython, pythonPool } from './python.js';
import { makeCtx } from '../testing/helpers.js';

beforeAll(async () => {
  // the worker's own secrets, which no python call may see (restored after the file: vi.unstubAllEnvs)
  vi.stubEnv('PLAYFLOW_API_TOKEN', 'worker-secret-token');
  vi.stubEnv('BROKER_URL', 'nats://user:pass@127.0.0.1:4222');
  configurePython({ size: 2, maxCallsPerProcess: 1000 });
  await pythonPool().start();
});
afterAll(async () => {
  await closePythonPool();
  vi.unstubAllEnvs();
});

const py = (code: string, extra: Record<string, any> = {}, ctxArgs: Record<string, any> = {}) =>
  runTool({ kind: 'python', code, ...extra }, makeCtx({ args: ctxArgs }));

describe('python tool', () => {
  it('main(<params>) binds args by name; defaults and **kwargs work; step args are merged under tool args', async () => {
    const out = await py('def main(a, b, c=10, **rest):\n    return {"sum": a + b + c, "rest": rest}', { args: { a: 1, b: 2, extra: 'x' } }, { b: 100, step_only: true });
    expect(out.error).toBeUndefined();
    expect(out.response).toEqual({ sum: 13, rest: { extra: 'x', step_only: true } });
  });

  it('a plain body assigning result, with args visible and libs pre-imported', async () => {
    const out = await py('result = {"root": m.sqrt(n), "dumped": j.dumps(args), "od": type(OD()).__name__}', { args: { n: 16 }, libs: { m: 'math', j: 'json', OD: 'collections.OrderedDict' } });
    expect(out.response).toEqual({ root: 4, dumped: '{"n": 16}', od: 'OrderedDict' });
  });

  it('integers beyond 2^53 come back as strings, like BIGINT from the SQL tools', async () => {
    const out = await py('result = {"big": 2**64, "small": 2**53 - 1, "list": [-(2**60), 1, True]}');
    expect(out.response).toEqual({ big: '18446744073709551616', small: 9007199254740991, list: ['-1152921504606846976', 1, true] });
  });

  it('a large result is whole; a big integer anywhere in it is a string, digit strings and safe integers stay as they are', async () => {
    // The runner scans the JSON text for 16 digits in a row in 256 KiB pieces: here the only such
    // run straddles the end of the first piece.
    const out = await py('pad = "x" * (262144 - 10)\nresult = [pad, 2**60, 2**40, {"__proto__": 1}, ["y" * 1000] * 2000]');
    expect(out.error).toBeUndefined();
    const r = out.response as unknown[];
    expect(r.slice(0, 4)).toEqual(['x'.repeat(262144 - 10), '1152921504606846976', 2 ** 40, JSON.parse('{"__proto__": 1}')]);
    expect(Object.getPrototypeOf(r[3])).toBe(Object.prototype);
    expect(r[4]).toEqual(Array.from({ length: 2000 }, () => 'y'.repeat(1000)));
    const digits = await py('result = {"id": "12345678901234567890", "n": 12345678901234567, "f": 1.5e300, "safe": 2**53 - 1, "small": -(2**53 - 1)}');
    expect(digits.response).toEqual({ id: '12345678901234567890', n: '12345678901234567', f: 1.5e300, safe: 9007199254740991, small: -9007199254740991 });
  });

  it('a result that refers to itself is not_serialisable', async () => {
    const out = await py('result = {"a": 1}\nresult["self"] = result');
    expect(out.error?.code).toBe('not_serialisable');
  });

  it('async def main', async () => {
    const out = await py('import asyncio\nasync def main(n):\n    await asyncio.sleep(0.01)\n    return n * 2', { args: { n: 21 } });
    expect(out.response).toBe(42);
  });

  it('a missing library is a clear error', async () => {
    const out = await py('result = 1', { libs: { pd: 'pandas_does_not_exist' } });
    expect(out.error?.code).toBe('missing_library');
    expect(out.error?.message).toContain("library 'pandas_does_not_exist' (libs.pd) is not installed");
  });

  it('print output is the call log, never mixed into the protocol stream', async () => {
    const out = await py('import os, sys\ndef main():\n    print("hello")\n    print("warn", file=sys.stderr)\n    os.write(1, b"{\\"id\\": 999}\\n")\n    return "done"');
    expect(out.response).toBe('done');
    expect(out.log).toBe('hello\nwarn\n');
  });

  it('an exception is an error with the traceback; print output before it is kept', async () => {
    const out = await py('def helper():\n    raise ValueError("bad value")\ndef main():\n    print("before")\n    helper()');
    expect(out.error?.code).toBe('python_error');
    expect(out.error?.message).toBe('ValueError: bad value');
    const tb = (out.error?.data as any).traceback as string;
    expect(tb).toContain('line 2, in helper');
    expect(tb).toContain('raise ValueError("bad value")');
    expect(tb).not.toContain('runner.py');
    expect(out.log).toBe('before\n');
  });

  it('a syntax error and a missing main parameter are clear errors', async () => {
    const syn = await py('def main(:\n  pass');
    expect(syn.error?.message).toMatch(/SyntaxError/);
    const miss = await py('def main(x):\n    return x');
    expect(miss.error?.code).toBe('missing_argument');
    expect(miss.error?.message).toContain("parameter 'x'");
  });

  it('a non-serialisable result is a clear error', async () => {
    const out = await py('def main():\n    return {1, 2}');
    expect(out.error?.code).toBe('not_serialisable');
    expect(out.error?.message).toContain('set');
    const nan = await py('result = float("nan")');
    expect(nan.error?.code).toBe('not_serialisable');
  });

  it('warm pool: calls reuse the same interpreters (no fresh start per call)', async () => {
    const pids = new Set<number>();
    for (let i = 0; i < 8; i++) {
      const out = await py('import os\ndef main():\n    return os.getpid()');
      pids.add(out.response as number);
    }
    expect(pids.size).toBeLessThanOrEqual(2);
    const before = pythonPool().stats.pids;
    for (const p of pids) expect(before).toContain(p);
  });

  it('a timeout kills and replaces the interpreter; the pool keeps serving', async () => {
    const out = await py('import time\ndef main():\n    time.sleep(30)', { timeout: 0.5 });
    expect(out.error?.code).toBe('timeout');
    const next = await py('result = "alive"');
    expect(next.response).toBe('alive');
  });

  it('os._exit and sys.exit in user code replace the interpreter without taking the worker down', async () => {
    const pidOf = async () => (await py('import os\ndef main():\n    return os.getpid()')).response as number;
    const hard = await py('import os\ndef main():\n    print("bye")\n    os._exit(7)');
    expect(hard.error?.code).toBe('crash');
    expect(hard.error?.message).toMatch(/exited with code 7/);
    const soft = await py('import sys\nsys.exit(3)');
    expect(soft.error?.code).toBe('exit');
    expect(soft.error?.message).toContain('sys.exit(3)');
    const results = await Promise.all([py('result = 1'), py('result = 2'), py('result = 3')]);
    expect(results.map((r) => r.response)).toEqual([1, 2, 3]);
    expect(typeof (await pidOf())).toBe('number');
    await new Promise((r) => setTimeout(r, 300));
    expect(pythonPool().stats.alive).toBe(2);
  });

  it('user code does not see the worker\'s secrets in its environment', async () => {
    const out = await py('import os\ndef main():\n    return sorted(k for k in os.environ if "TOKEN" in k or k == "BROKER_URL")');
    expect(out.response).toEqual([]);
  });

  it('input() cannot read the protocol stream', async () => {
    const out = await py('def main():\n    try:\n        return input()\n    except EOFError:\n        return "eof"');
    expect(out.response).toBe('eof');
  });

  it('concurrent calls beyond the pool size queue and all complete', async () => {
    const outs = await Promise.all(Array.from({ length: 6 }, (_, i) => py('import time\ndef main(i):\n    time.sleep(0.05)\n    return i', { args: { i } })));
    expect(outs.map((o) => o.response)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it.each([
    ['main(input_data) with no such arg receives all args as one dict (reference convention)', 'def main(input_data):\n    return sorted(input_data.items())', { args: { b: 2 } }, { a: 1 }, [['a', 1], ['b', 2]]],
    ['an arg named input_data is passed as itself', 'def main(input_data):\n    return input_data', { args: { input_data: 5 } }, {}, 5],
    ['async def main(input_data) too', 'async def main(input_data):\n    return input_data["a"]', {}, { a: 3 }, 3],
  ])('%s', async (_n, code, extra, ctxArgs, want) => {
    const out = await py(code, extra, ctxArgs);
    expect(out.error).toBeUndefined();
    expect(out.response).toEqual(want);
  });
});
