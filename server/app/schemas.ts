/**
 * JSON Schemas of the HTTP API. The wire contract (worker protocol, executions, events, catalog,
 * queue, runtime) is defined once in common/contract/ as TypeBox schemas with their static types;
 * the routes use those schemas directly. Response shapes are shared schemas registered once with
 * `app.addSchema` and referenced as `{$ref: 'Name#'}` so the OpenAPI document (/docs/json) names
 * them under components.schemas. What is left here is not (yet) part of the contract modules.
 *
 * Response schemas never list `required` for optional wire fields: fast-json-stringify would turn
 * a missing optional field into a 500. IDs are `string` (decimal): a number from a service is
 * serialised as its decimal string.
 */

import { contractSchemas, EXECUTION_STATUSES, IdInput, IdParam } from '../../common/contract/index.js';

export { EXECUTION_STATUSES };

/** Any JSON value. */
export const anyJson = {} as const;
export const jsonObject = { type: 'object', additionalProperties: true } as const;
export const idString = { type: 'string', pattern: '^[0-9]+$', description: 'int64 id as a decimal string' } as const;

/** Input id: decimal string or non-negative integer (send strings above 2^53). */
export const idInput = IdInput();

/** Path parameter id (always a string on the wire). */
export const idParam = IdParam();

export const limitQuery = (dflt: number, max: number) =>
  ({ type: 'integer', minimum: 1, maximum: max, default: dflt, description: `page size, default ${dflt}, at most ${max}` }) as const;
export const offsetQuery = { type: 'integer', minimum: 0, maximum: 2147483647, default: 0, description: 'rows to skip' } as const;

export const sharedSchemas: object[] = [
  ...contractSchemas,
];

export const ref = (id: string) => ({ $ref: `${id}#` }) as const;

/** Error answers a route documents, e.g. `errors(400, 404)`. 401 is added where auth applies. */
export function errors(...codes: number[]): Record<number, { $ref: string; description: string }> {
  const text: Record<number, string> = {
    400: 'Bad request: malformed JSON or a field failing validation (details lists each)',
    401: 'Missing or wrong bearer token',
    403: 'Forbidden',
    404: 'Not found',
    409: 'Conflict',
    410: 'Gone',
    413: 'Request body larger than PLAYFLOW_MAX_BODY_BYTES',
    415: 'Unsupported Content-Type: send application/json',
    422: 'Playbook invalid: details lists every problem with its path',
    425: 'Too early',
    500: 'Internal fault',
    503: 'Unavailable',
  };
  const out: Record<number, { $ref: string; description: string }> = {};
  for (const c of [...codes, 401]) out[c] = { $ref: 'ErrorBody#', description: text[c] ?? 'Error' };
  return out;
}
