/** Small pure helpers of the execution service, and the lock statements every transaction starts with. */
import * as crypto from 'node:crypto';
import { createHash, randomBytes } from 'node:crypto';
import { sessionStatement, type SessionStatement } from '../db.js';
import type { JsonObject } from '../../playbook/types.js';
import { TERMINAL_STATUSES, type ExecutionStatus } from '../engine/contract.js';
import { idLiteral } from '../store/sql.js';
import type { TxCtx } from './tx-types.js';

export const isTerminal = (s: ExecutionStatus) => TERMINAL_STATUSES.includes(s);
export const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);
export const RETRYABLE = new Set(['40P01', '40001']); // deadlock, serialization failure
/**
 * Lease tokens (18 random bytes, base64url) are cut from a pool filled by one randomBytes call per
 * 256 tokens: one call per token was 2 % of the server's CPU per step.
 */
export const TOKEN_BYTES = 18;
let tokenPool = Buffer.alloc(0);
let tokenAt = 0;
export const newLeaseToken = (): string => {
  if (tokenAt + TOKEN_BYTES > tokenPool.length) {
    tokenPool = randomBytes(TOKEN_BYTES * 256);
    tokenAt = 0;
  }
  tokenAt += TOKEN_BYTES;
  return tokenPool.toString('base64url', tokenAt - TOKEN_BYTES, tokenAt);
};

/**
 * The lease token of a command leased at insertion to the worker whose call.done issued it (eager
 * dispatch): derived from that call's own token, so the same call.done sent again after its answer
 * was lost names exactly the leases that answer held (Leases.releaseLostAnswer). As unguessable as
 * the call's token, which only its worker and the server know; as long as a random one.
 */
export const eagerLeaseToken = (callToken: string, queueId: string): string => sha256(`${callToken}\0${queueId}`).slice(0, 24);

/**
 * sha256 in base64url. Node's one-shot `hash` (20.12 and later) where there is one: a Hash object
 * a step cost about 28 µs on the 2-core bench VM, most of it its constructor, a sixth of what the
 * engine spends on the step.
 */
const sha256: (text: string) => string = typeof crypto.hash === 'function'
  ? (text) => crypto.hash('sha256', text, 'base64url')
  : (text) => createHash('sha256').update(text).digest('base64url');

/** The execution's lock, as a session statement (planned once per connection, see db.ts). */
export const LOCK_STATEMENT = sessionStatement('playflow_lock', ['bigint'], 'SELECT pg_advisory_xact_lock($1)');
const LAST_SEQ_STATEMENT = sessionStatement('playflow_last_seq', ['bigint'], 'SELECT max(seq) AS last_seq FROM event WHERE execution_id = $1');

/** The session statements lockPrelude EXECUTEs. */
export const LOCK_PRELUDE_STATEMENTS: readonly SessionStatement[] = [LOCK_STATEMENT, LAST_SEQ_STATEMENT];

/** The execution lock and the log's last seq, sent with BEGIN in one round trip (lockAndLoad). */
export function lockPrelude(executionId: string): string {
  const id = idLiteral(executionId);
  return `${LOCK_STATEMENT.execute(id)}; ${LAST_SEQ_STATEMENT.execute(id)}`;
}

export { lockExecution as lock } from '../store/executions.js';

/** A transaction's empty context (tx-types.ts TxCtx). */
export const newCtx = (): TxCtx => ({ toPublish: [], queueRows: [], claimed: [], terminated: [], cache: new Map(), counts: [] });
