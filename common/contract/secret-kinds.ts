/**
 * The enumerations of the secrets contract (common/contract/secrets.ts): plain constants with no
 * schema library behind them, so a CLI command can list them in its help without building the
 * TypeBox schemas (see common/contract/limits.ts for the same reason).
 */

export const CREDENTIAL_TYPES = ['postgres', 'oauth2', 'bearer', 'basic', 'api_key', 'service_account', 'warehouse', 'custom'] as const;
/** Where a keychain entry lives: one execution (local), the playbook (global), an execution tree (shared). */
export const SCOPE_TYPES = ['local', 'global', 'shared'] as const;
export const CACHE_TYPES = ['secret', 'token'] as const;
export const VAR_TYPES = ['user_defined', 'step_result', 'computed', 'iterator_state'] as const;
