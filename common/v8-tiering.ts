/**
 * How soon V8 optimizes the code of a long-running Playflow process (server, worker, `dev`).
 *
 * A step runs a wide, flat path: a few hundred functions (HTTP parsing, fastify's hooks,
 * validation, the engine, the store, pg), each once or twice. V8 hands a function to its optimizing
 * compiler after it has run about three times `--interrupt-budget` (66 KB) of bytecode, so with
 * V8's default a fresh process needs about 2,000 steps before that path leaves the baseline tier,
 * and every step until then pays for that tier. A server that sees a few executions a minute
 * never gets there. A budget of 8 KB gets there within a few hundred steps; the price is compiling
 * some functions that would otherwise never have been (figures: bench/tiering.ts, README
 * "Optimized early").
 *
 * The server and the worker set it once they are ready, not before their imports: their start
 * (module loading, migrations, YAML and schema compiles, python interpreters) runs once, and at
 * 8 KB V8 optimized much of it for nothing. A budget set later still applies to code that ran
 * before, from that code's next budget on.
 */
import v8 from 'node:v8';
import { ConfigError, envValue, type Env } from './config.js';

export const INTERRUPT_BUDGET_VARIABLE = 'PLAYFLOW_V8_INTERRUPT_BUDGET';
export const DEFAULT_INTERRUPT_BUDGET = 8192;
const MIN_BUDGET = 1024;
const MAX_BUDGET = 100_000_000;

/** The budget the variable asks for; null keeps V8's own (`default`). */
export function interruptBudget(env: Env): number | null {
  const raw = envValue(env, INTERRUPT_BUDGET_VARIABLE);
  if (raw === undefined) return DEFAULT_INTERRUPT_BUDGET;
  if (raw === 'default') return null;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < MIN_BUDGET || n > MAX_BUDGET) {
    throw new ConfigError(INTERRUPT_BUDGET_VARIABLE, `expected bytes of bytecode from ${MIN_BUDGET} to ${MAX_BUDGET}, or "default" for V8's own, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** Sets V8's tiering budget (null: leaves V8's own); every function's next budget uses it. */
export function applyInterruptBudget(budget: number | null): void {
  if (budget !== null) v8.setFlagsFromString(`--interrupt-budget=${budget}`);
}

/** Reads the budget from the environment and sets it now (the benchmarks' processes). */
export function tuneV8Tiering(env: Env): number | null {
  const budget = interruptBudget(env);
  applyInterruptBudget(budget);
  return budget;
}
