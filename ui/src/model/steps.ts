/**
 * Folds an execution's event log into what the execution page shows per step: its state, loop
 * progress (items done / items), and its calls (one per command: issued, claimed, done), in one
 * pass so a 10,000-event log folds in milliseconds.
 */
import { TERMINAL, type EventView, type Execution, type Json } from '../types.js';

export type NodeState = 'pending' | 'queued' | 'running' | 'completed' | 'failed' | 'skipped' | 'cancelled' | 'not-run';

/**
 * A step with no run in an execution that has ended never will run (a branch not taken, a step
 * after a failure): `not-run`, not `pending`, which reads as "about to start".
 */
export function shownState(state: NodeState, executionStatus: Execution['status'] | undefined): NodeState {
  return state === 'pending' && executionStatus !== undefined && TERMINAL.includes(executionStatus) ? 'not-run' : state;
}

/** A state as words: `not-run` (a CSS class and a data attribute) reads "not run". */
export function stateLabel(state: NodeState): string {
  return state === 'not-run' ? 'not run' : state;
}

export interface Call {
  command_id: number;
  item: number | null;
  attempt: number;
  kind: string;
  issued_at: string;
  started_at?: string;
  done_at?: string;
  duration_ms?: number;
  worker_id?: string;
  tool?: Record<string, Json>;
  args?: Record<string, Json>;
  response?: Json;
  error?: Json;
  outcome?: string;
  /** Retry / pagination iteration of the step, when the server numbered it. */
  iteration?: number | null;
}

export interface StepSummary {
  name: string;
  state: NodeState;
  runs: number;
  loop?: { done: number; total: number };
  args?: Json;
  calls: Call[];
  error?: Json;
  result?: Json;
}

export interface Folded {
  steps: Map<string, StepSummary>;
  vars: Record<string, Json>;
}

/** The variables a `vars_set` event set: its payload's `variables` (the engine's shape). */
export function varsSet(e: EventView): Record<string, Json> {
  const v = e.payload?.variables;
  return v && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, Json> : {};
}

export function emptySummary(name: string): StepSummary {
  return { name, state: 'pending', runs: 0, calls: [] };
}

export function foldEvents(events: EventView[], execution?: Execution): Folded {
  const steps = new Map<string, StepSummary>();
  const byCommand = new Map<number, Call>();
  const vars: Record<string, Json> = {};
  const get = (name: string) => {
    let s = steps.get(name);
    if (!s) steps.set(name, (s = emptySummary(name)));
    return s;
  };
  for (const e of events) {
    const p = e.payload ?? {};
    if (e.name === 'vars_set') Object.assign(vars, varsSet(e));
    if (!e.step) continue;
    const s = get(e.step);
    switch (e.name) {
      case 'step.enter':
        s.runs = Math.max(s.runs, Number(p.run ?? s.runs + 1));
        // Entered: waiting for a worker to claim its first command (action_started → running).
        s.state = 'queued';
        s.args = p.args;
        s.loop = p.loop && Array.isArray(p.loop.items) ? { done: 0, total: p.loop.items.length } : undefined;
        s.error = undefined;
        break;
      case 'command_issued': {
        const c = p.command ?? {};
        const call: Call = {
          command_id: Number(e.command_id ?? c.command_id),
          item: p.item ?? null,
          attempt: Number(c.attempt ?? 1),
          kind: String(c.tool?.kind ?? p.kind ?? ''),
          issued_at: e.created_at,
          tool: c.tool,
          args: c.tool?.args ?? c.args,
          iteration: c.iteration ?? null,
        };
        byCommand.set(call.command_id, call);
        s.calls.push(call);
        if (s.state === 'pending') s.state = 'queued';
        break;
      }
      case 'action_started': {
        const call = e.command_id != null ? byCommand.get(e.command_id) : undefined;
        if (call) {
          call.started_at = e.created_at;
          call.worker_id = p.worker_id;
        }
        if (s.state === 'queued' || s.state === 'pending') s.state = 'running';
        break;
      }
      case 'call.done': {
        const call = e.command_id != null ? byCommand.get(e.command_id) : undefined;
        if (call) {
          call.done_at = e.created_at;
          const meta = p.meta ?? {};
          if (typeof meta.duration_ms === 'number') call.duration_ms = meta.duration_ms;
          else if (call.started_at) call.duration_ms = Date.parse(e.created_at) - Date.parse(call.started_at);
          if (meta.attempt !== undefined) call.attempt = Number(meta.attempt);
          if ('error' in p && p.error !== null && p.error !== undefined) call.error = p.error;
          else call.response = p.response;
        }
        break;
      }
      case 'action_completed': {
        const call = e.command_id != null ? byCommand.get(e.command_id) : undefined;
        if (call) call.outcome = p.outcome;
        const item = p.effects?.done?.item;
        if (s.loop && item !== undefined && item !== null) s.loop.done += 1;
        break;
      }
      case 'step_completed':
        s.state = 'completed';
        s.result = p.result;
        if (s.loop) s.loop.done = s.loop.total;
        break;
      case 'step_failed':
        s.state = 'failed';
        s.error = p.error ?? p;
        break;
      case 'step_skipped':
        s.state = 'skipped';
        break;
    }
  }
  if (execution) {
    for (const [name, v] of Object.entries(execution.steps ?? {})) {
      const s = get(name);
      if (v.status === 'failed' || v.status === 'completed' || v.status === 'skipped') s.state = v.status;
      // the server ends a cancelled or failed execution's unfinished steps as `cancelled`
      if (v.status === 'cancelled' && (s.state === 'running' || s.state === 'queued' || s.state === 'pending')) s.state = 'cancelled';
      if (v.error !== undefined && v.error !== null && s.error === undefined) s.error = v.error;
      if (v.result !== undefined && s.result === undefined) s.result = v.result;
    }
    if (execution.status === 'cancelled') {
      for (const s of steps.values()) if (s.state === 'running' || s.state === 'queued') s.state = 'cancelled';
    }
  }
  return { steps, vars };
}

/** GET /api/execution/{id}/steps: per-step counts, available before the log has loaded. */
export interface StepCounts { step: string; calls: number; started: number; done: number; errors: number; loop_total: number | null; loop_done: number }

/**
 * Step states and loop progress from the execution record and the server's counts: what the
 * page shows while a large log is still loading (calls fill in once it has).
 */
export function summaryFromCounts(counts: StepCounts[], execution: Execution): Folded {
  const steps = new Map<string, StepSummary>();
  for (const c of counts) {
    const v = execution.steps?.[c.step];
    let state: NodeState = v?.status ?? (c.calls ? 'queued' : 'pending');
    if (state === 'running' && c.started === 0) state = 'queued';
    if (execution.status === 'cancelled' && (state === 'running' || state === 'queued')) state = 'cancelled';
    const s: StepSummary = { name: c.step, state, runs: v?.runs ?? 0, calls: [] };
    if (c.loop_total !== null) s.loop = { done: state === 'completed' ? c.loop_total : c.loop_done, total: c.loop_total };
    if (v?.error !== undefined && v.error !== null) s.error = v.error;
    if (v?.result !== undefined) s.result = v.result;
    steps.set(c.step, s);
  }
  return { steps, vars: {} };
}
