/** The playbook language: types, parsing with legacy normalisation, schema, validation, templating. */
export * from './types.js';
export { parsePlaybook, parsePlaybookObject, MAX_PLAYBOOK_BYTES, MAX_REPORTED_ISSUES, type ParseOptions } from './parse.js';
export { playbookJsonSchema, playbookV1JsonSchema } from './schema.js';
export { normalizePlaybook, type NormalizeResult, type SourceMap } from './normalize.js';
export { validatePlaybook, checkWrittenDocument, entryStep, stepTargets } from './validate.js';
export { formatPath } from './issues.js';
export { MAX_NESTING } from './nesting.js';
export { LEGACY_OPERATIONS } from './legacy-operations.js';
export * from './template/index.js';
