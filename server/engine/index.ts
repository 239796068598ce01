/**
 * The engine module: a pure, event-sourced core (see README.md in this folder).
 *
 *   import { engine } from './engine/index.js';
 *   const d = engine.start(playbook, init, { now, random });
 *   const d2 = engine.handle(d.state, playbook, event, { now, random, externalVars });
 */
import type { Engine } from './contract.js';
import { fold, handle, reduce, start } from './engine.js';
import type { EngineState } from './state.js';

export const engine: Engine<EngineState> = { start, handle, reduce, fold };

export { fold, handle, reduce, start } from './engine.js';
export { DEFAULT_MAX_DELIVERIES, DEFAULT_MAX_IN_FLIGHT, MAX_STEP_ENTRIES_PER_DECISION } from './engine.js';
export {
  mergeTool, DEFAULT_RETRY_ATTEMPTS, DEFAULT_MAX_PAGES, DEFAULT_INITIAL_DELAY_S, DEFAULT_BACKOFF_MULTIPLIER, DEFAULT_JITTER,
} from './call-chain.js';
export { classify as caseEventsOf } from './rules.js';
export { resultView } from './context.js';
export type { EngineState, RunState, CommandRecord, Effects } from './state.js';
export * from './contract.js';
