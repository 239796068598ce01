/**
 * The wire contract, defined once (issue 16): every module's schemas and types. The server
 * registers `contractSchemas` (each has an `$id`) so routes refer to them and the OpenAPI
 * document lists them under components.schemas; common/protocol.ts re-exports the types.
 */
import { ErrorBody, StatusOk } from './common.js';
import { catalogSchemas } from './catalog.js';
import { executionSchemas } from './execution.js';
import { platformSchemas } from './platform.js';
import { queueSchemas } from './queue.js';
import { secretsSchemas } from './secrets.js';
import { hookSchemas } from './hooks.js';
import { workerSchemas } from './worker.js';

export * from './common.js';
export * from './worker.js';
export * from './execution.js';
export * from './catalog.js';
export * from './queue.js';
export * from './schedule.js';
export * from './platform.js';
export * from './secrets.js';
export * from './hooks.js';

export const contractSchemas = [ErrorBody, StatusOk, ...catalogSchemas, ...executionSchemas, ...workerSchemas, ...queueSchemas, ...platformSchemas, ...secretsSchemas, ...hookSchemas];
