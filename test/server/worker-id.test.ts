/**
 * A worker checks its configured id with the plain rule (common/contract/worker-id.ts), without the
 * schema library; the server validates claims with the schema built from it. The two must agree,
 * or a worker would start with an id every claim of it is refused for.
 */
import { describe, expect, it } from 'vitest';
import { Type } from '../../common/contract/common.js';
import { WorkerId } from '../../common/contract/worker.js';
import { WORKER_ID_MESSAGE, workerIdProblem } from '../../common/contract/worker-id.js';
import { validatorCompiler } from '../../server/app/support.js';

const validate = validatorCompiler({ schema: Type.Object({ worker_id: WorkerId() }), httpPart: 'body' });

const ids = [
  'w-0', 'vm-18807', 'x', ' w', 'w ', 'execution', 'executions:1', 'Execution:1', 'a execution:1',
  '', ' ', '\t\n', 'execution:', 'execution:12',
  'w'.repeat(200), 'w'.repeat(201),
  // 200 and 201 code points that are 400 and 402 UTF-16 units: the server counts code points
  '😀'.repeat(200), '😀'.repeat(201), 'é'.repeat(200),
];

describe('worker id rule', () => {
  it.each(ids.map((id) => [JSON.stringify(id).slice(0, 40), id]))('agrees with the server on %s', (_label, id) => {
    const serverAccepts = validate({ worker_id: id }) === true;
    expect(workerIdProblem(id) === undefined).toBe(serverAccepts);
  });

  it('names the rule when it refuses', () => {
    expect(workerIdProblem('execution:1')).toBe(WORKER_ID_MESSAGE);
    expect(workerIdProblem('w-1')).toBeUndefined();
  });
});
