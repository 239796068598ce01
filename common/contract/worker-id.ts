/**
 * A worker's id, the lease holder's name, as plain values: `execution:<id>` is how a queue row held
 * by a child execution is marked, so a worker may not take such a name. `WorkerId` (worker.ts)
 * builds the schema the server validates with from these, and a worker checks its configured id
 * with `workerIdProblem` without loading the schema library (worker/config.ts).
 */
import { charLength } from '../char-length.js';

export const WORKER_ID_MAX = 200;
export const WORKER_ID_PATTERN = '^(?!execution:)(?!\\s*$)';
export const WORKER_ID_MESSAGE = `must be 1 to ${WORKER_ID_MAX} characters, not blank, and not start with 'execution:'`;

// as the server's JSON Schema validator reads the pattern (ajv: a unicode RegExp)
const pattern = new RegExp(WORKER_ID_PATTERN, 'u');

/**
 * Why `id` cannot be a worker's id (every claim would be refused with a 400), or undefined. Lengths
 * are in code points, as the server's validator counts them.
 */
export function workerIdProblem(id: string): string | undefined {
  const length = charLength(id);
  return length >= 1 && length <= WORKER_ID_MAX && pattern.test(id) ? undefined : WORKER_ID_MESSAGE;
}
