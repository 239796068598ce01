/**
 * Test helpers for the execution core (used by *.test.ts beside it; no test framework inside):
 * a core on a fresh database and a scripted worker that does what the real worker does through the
 * services — pull a notification, claim, "run" the tool with a script, report call.done, ack.
 */
import type { ClaimedCommand, WorkerEvent } from '../../common/protocol.js';
import type { Json, JsonObject } from '../../playbook/types.js';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/pg.js';
import type { Broker, BrokerMessage } from '../../common/broker/types.js';
import { createServerCore, type ServerCore, type ServerCoreConfig } from '../core.js';
import { AppError } from '../errors.js';

/** Queries of the core's own timers (the admitter of concurrency limits, the schedule ticker, the server's registration), for recordQueries to leave out. */
export const CORE_TIMER_QUERIES = /waiting_paths|FROM schedule|INTO runtime|FROM runtime/;

export async function testDatabase(prefix: string): Promise<TestDatabase> {
  return createTestDatabase(prefix);
}

export async function testCore(url: string, cfg: Partial<ServerCoreConfig> = {}): Promise<ServerCore> {
  const core = await createServerCore({
    databaseUrl: url,
    brokerUrl: 'memory',
    serverUrl: 'http://playflow.test',
    sweeper: false,
    poolSize: 5,
    ...cfg,
  });
  await core.start();
  return core;
}

export type Reply = { response: Json } | { error: Json } | 'crash' | 'hang';
export type Script = (cmd: ClaimedCommand) => Reply | Promise<Reply>;

export interface WorkerRun {
  claimed: ClaimedCommand[];
  refused: Array<{ queue_id: string; code: string }>;
}

/**
 * Handles notifications until `until()` is true or `timeoutMs` passes. 'crash' claims and never
 * reports (the lease will expire); 'hang' likewise but naks the notification.
 */
export async function runWorker(core: ServerCore, script: Script, opts: {
  until: () => Promise<boolean>; timeoutMs?: number; broker?: Broker; workerId?: string; leaseSeconds?: number;
  /** Start children of `playbook` commands like the real worker does. */
  children?: boolean;
}): Promise<WorkerRun> {
  const broker = opts.broker ?? core.broker;
  const out: WorkerRun = { claimed: [], refused: [] };
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  const workerId = opts.workerId ?? 'w1';
  while (!(await opts.until())) {
    if (Date.now() > deadline) throw new Error(`scripted worker timed out; claimed ${out.claimed.map((c) => `${c.step}#${c.command_id}`).join(', ')}`);
    const msgs = await broker.fetch({ max: 4, expiresMs: 200 });
    for (const m of msgs) await handleOne(core, m, script, workerId, out, opts);
  }
  return out;
}

async function handleOne(core: ServerCore, m: BrokerMessage, script: Script, workerId: string, out: WorkerRun, opts: { leaseSeconds?: number; children?: boolean }) {
  const ex = core.deps.executions;
  let cmd: ClaimedCommand;
  try {
    cmd = await ex.claim(m.data.queue_id, { worker_id: workerId, lease_seconds: opts.leaseSeconds });
  } catch (err) {
    if (err instanceof AppError) {
      out.refused.push({ queue_id: m.data.queue_id, code: err.code });
      m.ack();
      return;
    }
    throw err;
  }
  out.claimed.push(cmd);
  if (cmd.tool.kind === 'playbook' && opts.children !== false && cmd.child) {
    await ex.start({ path: cmd.child.path, payload: cmd.child.payload, parent_execution_id: cmd.execution_id, parent_queue_id: cmd.queue_id, worker_id: cmd.worker_id, lease_token: cmd.lease_token });
    m.ack();
    return;
  }
  const reply = await script(cmd);
  if (reply === 'crash') {
    m.ack();
    return;
  }
  if (reply === 'hang') {
    m.nak();
    return;
  }
  const ev: WorkerEvent = {
    execution_id: cmd.execution_id, step: cmd.step, name: 'call.done', queue_id: cmd.queue_id, worker_id: workerId, lease_token: cmd.lease_token,
    payload: { ...(reply as JsonObject), meta: { duration_ms: 1, attempt: cmd.attempt, iteration: cmd.iteration } },
  };
  await ex.handleEvents([ev]);
  m.ack();
}

/** The call.done a lease holder sends for its command. */
export function callDone(cmd: ClaimedCommand, payload: JsonObject): WorkerEvent {
  return { execution_id: cmd.execution_id, step: cmd.step, name: 'call.done', queue_id: cmd.queue_id, worker_id: cmd.worker_id, lease_token: cmd.lease_token, payload };
}

export async function terminal(core: ServerCore, id: string): Promise<boolean> {
  const r = await core.deps.executions.get(id);
  return !!r && ['completed', 'failed', 'cancelled'].includes(r.status);
}

/** One async loop step `items` over `in` (a template), at most `maxInFlight` at once, each a python call whose result is its item. */
export function loopPlaybook(path: string, items: string, maxInFlight: number, iterator = 'n'): string {
  return `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: ${path.split('/').pop()}, path: ${path} }
workflow:
  - step: items
    loop: { in: "${items}", iterator: ${iterator}, mode: async, max_in_flight: ${maxInFlight} }
    tool: { kind: python, code: "result = ${iterator}", args: { ${iterator}: "{{ ${iterator} }}" } }
`;
}

/** A chain of `n` steps s1 → s2 → … → sn, each a python call whose args carry the previous result. */
export function chainPlaybook(path: string, n: number): string {
  const steps: string[] = [];
  for (let i = 1; i <= n; i++) {
    steps.push(`  - step: s${i}
    tool:
      kind: python
      code: "result = {'i': i}"
      args:
        i: ${i}
        prev: "{{ args.prev | default(0) }}"${i < n ? `
    next:
      - step: s${i + 1}
        args:
          prev: "{{ s${i}.i }}"` : ''}`);
  }
  return `apiVersion: playflow.io/v2
kind: Playbook
metadata:
  name: ${path.split('/').pop()}
  path: ${path}
workflow:
${steps.join('\n')}
`;
}
