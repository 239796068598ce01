import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError } from './config.js';
import { DEFAULT_INTERRUPT_BUDGET, interruptBudget } from './v8-tiering.js';

const BUILT = fileURLToPath(new URL('../dist/common/v8-tiering.js', import.meta.url));

/**
 * How many calls a small function takes to be optimized in a fresh node, after tuneV8Tiering ran
 * with `env` (the built module, as the CLI runs it). Compiling on the main thread makes the count
 * exact: the optimized code is installed on the call that asked for it.
 */
function callsUntilOptimized(env: Record<string, string>): Promise<number> {
  const script = `
    const { tuneV8Tiering } = await import(${JSON.stringify(BUILT)});
    tuneV8Tiering(${JSON.stringify(env)});
    function pick(o) { let s = 0; for (const k in o) s += o[k].length; return s + (o.a ? 1 : 0); }
    const o = { a: 'xx', b: 'yyy', c: 'zzzz' };
    let n = 0;
    while (!(%GetOptimizationStatus(pick) & 16) && n < 1e6) { pick(o); n++; }
    console.log(n);`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--allow-natives-syntax', '--no-concurrent-recompilation', '--input-type=module', '-e', script], (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(Number(stdout.trim()));
    });
  });
}

describe('V8 tiering budget (PLAYFLOW_V8_INTERRUPT_BUDGET)', () => {
  it('defaults to 8 KB; "default" keeps V8\'s own; a number of bytes is taken', () => {
    expect(interruptBudget({})).toBe(DEFAULT_INTERRUPT_BUDGET);
    expect(interruptBudget({ PLAYFLOW_V8_INTERRUPT_BUDGET: ' ' })).toBe(DEFAULT_INTERRUPT_BUDGET);
    expect(interruptBudget({ PLAYFLOW_V8_INTERRUPT_BUDGET: 'default' })).toBeNull();
    expect(interruptBudget({ PLAYFLOW_V8_INTERRUPT_BUDGET: '16384' })).toBe(16384);
  });

  it.each(['8k', '1e4', '-1', '512', '0x2000', 'off'])('refuses %j, naming the variable', (value) => {
    expect(() => interruptBudget({ PLAYFLOW_V8_INTERRUPT_BUDGET: value })).toThrow(ConfigError);
    expect(() => interruptBudget({ PLAYFLOW_V8_INTERRUPT_BUDGET: value })).toThrow(
      `PLAYFLOW_V8_INTERRUPT_BUDGET: expected bytes of bytecode from 1024 to 100000000, or "default" for V8's own, got ${JSON.stringify(value)}`);
  });

  it('takes effect in the running process: code is optimized after fewer calls than with V8\'s own budget', async () => {
    const v8Own = await callsUntilOptimized({ PLAYFLOW_V8_INTERRUPT_BUDGET: 'default' });
    const tuned = await callsUntilOptimized({});
    const larger = await callsUntilOptimized({ PLAYFLOW_V8_INTERRUPT_BUDGET: '200000' });
    expect(tuned).toBeGreaterThan(0);
    expect(tuned).toBeLessThan(v8Own);
    expect(larger).toBeGreaterThan(v8Own);
  }, 30_000);
});
