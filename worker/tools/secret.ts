/**
 * `secret` tool: fetches secrets from a provider (gcp, aws, azure, env, file) and keeps them in
 * the keychain — never in the step result, because results travel in events and the queue, where
 * secrets must not appear in clear text. Later steps read them as `{{ keychain.<name>.<field> }}`
 * (the worker resolves a name without a keychain def local → shared → global).
 *
 *   tool:
 *     kind: secret
 *     provider: gcp            # gcp | aws | azure | env | file
 *     name: db-password        # one secret (also `secret`, `path`, `secret_name`) → field `value`
 *     map: {user: db-user, password: db-pass}   # or several: field → secret path (`path#field` for JSON)
 *     version / project_id / region / vault_url # provider hints
 *     auth: gcp_sa             # auth reference for the provider (not needed for env/file)
 *     keychain: db             # entry name; default the step name
 *     scope: local             # local (default) | shared | global
 *     ttl_seconds: 600         # default: the scope's keychain default
 *
 * Result: `{status: 'stored', keychain_name, scope_type, cache_key, provider, fields, expires_at}`.
 * Needs the command's catalog id in the template context (`ctx.template.catalog_id`).
 */
import type { JsonObject } from '../../playbook/types.js';
import type { KeychainClient } from '../keychain.js';
import { fetchSecret, isProvider, SecretProviderError, type ProviderOptions } from '../providers/index.js';
import { registerTool } from './index.js';
import { ToolConfigError, fail, ok, type Tool, type ToolContext, type ToolOutcome, type ToolRunner } from './types.js';

export interface SecretToolOptions {
  client: Pick<KeychainClient, 'setKeychain'>;
  providerOptions?: ProviderOptions;
}

const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
const SCOPES = ['local', 'shared', 'global'] as const;

export function createSecretTool(opts: SecretToolOptions): ToolRunner {
  return async (tool: Tool, ctx: ToolContext): Promise<ToolOutcome> => {
    const provider = tool.provider;
    if (!isProvider(provider)) throw new ToolConfigError('secret tool needs provider: gcp, aws, azure, env or file');
    const map: Record<string, string> = {};
    if (tool.map && typeof tool.map === 'object' && !Array.isArray(tool.map)) {
      for (const [k, v] of Object.entries(tool.map)) if (typeof v === 'string') map[k] = v;
    }
    const single = str(tool.name) ?? str(tool.secret) ?? str(tool.path) ?? str(tool.secret_name);
    if (single) map.value ??= single;
    if (Object.keys(map).length === 0) throw new ToolConfigError('secret tool needs name (one secret) or map (field → secret path)');
    const scope = (tool.scope ?? 'local') as (typeof SCOPES)[number];
    if (!SCOPES.includes(scope)) throw new ToolConfigError(`secret tool scope must be one of ${SCOPES.join(', ')}`);
    const template = ctx.template ?? {};
    const catalogId = str(String(template.catalog_id ?? tool.catalog_id ?? ''));
    if (!catalogId) throw new ToolConfigError('secret tool needs the catalog id of the command (ctx.template.catalog_id)');
    const keychainName = str(tool.keychain) ?? ctx.step;

    const auth = tool.auth !== undefined && tool.auth !== null && tool.auth !== '' ? await ctx.resolveAuth(tool.auth) : {};
    const data: JsonObject = {};
    try {
      for (const [field, path] of Object.entries(map)) {
        data[field] = await fetchSecret(provider, path, auth, { ...opts.providerOptions, hints: tool as JsonObject, signal: ctx.signal });
      }
    } catch (err) {
      if (err instanceof SecretProviderError) return fail(err.message, { code: 'secret_error', ...(err.status ? { status: err.status } : {}) });
      throw err;
    }
    const executionId = scope === 'local' ? ctx.execution_id : scope === 'shared' ? String(template.root_execution_id ?? ctx.execution_id) : null;
    const stored = await opts.client.setKeychain(catalogId, keychainName, {
      token_data: data,
      credential_type: 'secret_manager',
      cache_type: 'secret',
      scope_type: scope,
      execution_id: executionId,
      ...(typeof tool.ttl_seconds === 'number' ? { ttl_seconds: tool.ttl_seconds } : {}),
    });
    ctx.logger.info({ keychain: keychainName, provider, fields: Object.keys(data) }, 'secret stored in keychain');
    return ok({
      status: 'stored',
      keychain_name: keychainName,
      scope_type: scope,
      cache_key: stored.cache_key,
      provider,
      fields: Object.keys(data),
      expires_at: stored.expires_at,
    });
  };
}

/** Registers the `secret` kind in the worker's tool registry (call once at worker start). */
export function registerSecretTool(opts: SecretToolOptions): void {
  registerTool('secret', createSecretTool(opts));
}
