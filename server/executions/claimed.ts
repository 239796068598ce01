/**
 * What a worker gets for a queue row it now holds (a claim, or an eager claim with call.done), and
 * what a claim of a row it cannot have is answered.
 */
import type { ClaimedCommand } from '../../common/protocol.js';
import type { JsonObject, Playbook } from '../../playbook/types.js';
import { effectiveWorkload } from '../engine/context.js';
import { AppError, conflict, gone } from '../errors.js';
import type { ExecutionRow } from '../store/executions.js';
import type { QueueRow } from '../store/queue.js';

/** The command with everything the worker needs in one answer: rendered tool, args, template context. */
export function claimedCommand(pb: Playbook, row: ExecutionRow, claimed: QueueRow, vars: JsonObject): ClaimedCommand {
  const cmd = claimed.command;
  const out: ClaimedCommand = {
    queue_id: claimed.queue_id,
    execution_id: row.execution_id,
    catalog_id: row.catalog_id,
    parent_execution_id: row.parent_execution_id,
    root_execution_id: row.root_execution_id,
    path: row.path,
    step: claimed.step,
    command_id: claimed.command_id,
    attempt: cmd.attempt ?? 1,
    iteration: cmd.iteration ?? null,
    tool: cmd.tool,
    args: cmd.args ?? {},
    context: {
      // what templates see: the playbook's workload with the run payload merged over it
      workload: effectiveWorkload(pb, row.payload ?? {}),
      vars,
      execution_id: row.execution_id,
      keychain_defs: (pb.keychain ?? []) as unknown as JsonObject[],
    },
    lease_until: claimed.lease_until!.toISOString(),
    worker_id: claimed.worker_id!,
    lease_token: claimed.lease_token ?? '',
  };
  if (cmd.child) out.child = cmd.child;
  if (cmd.tool?.kind === 'workbook') out.workbook = (pb.workbook ?? []) as unknown as JsonObject[];
  return out;
}

/** 409 leased, 425 not due, 410 finished. */
export function claimRefusal(row: QueueRow, workerId: string): AppError {
  switch (row.status) {
    case 'leased':
      return conflict('already_claimed', row.worker_id === workerId
        ? `queue entry ${row.queue_id} is already claimed by this worker`
        : `queue entry ${row.queue_id} is claimed by another worker`, { worker_id: row.worker_id, lease_until: row.lease_until?.toISOString?.() ?? null });
    case 'queued':
      return new AppError(425, 'not_due', `queue entry ${row.queue_id} is not due before ${row.available_at.toISOString()}`, { available_at: row.available_at.toISOString() });
    default:
      return gone('finished', `queue entry ${row.queue_id} is ${row.status}`, { status: row.status });
  }
}
