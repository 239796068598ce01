/**
 * Provider registry and `fetchSecret`: one secret by provider name and path. A path may end in
 * `#field` to take one field of a JSON secret (`db/creds#password`).
 */
import type { Json, JsonObject } from '../../playbook/types.js';
import { awsProvider } from './aws.js';
import { azureProvider } from './azure.js';
import { gcpProvider } from './gcp.js';
import { envProvider, fileProvider } from './local.js';
import { PROVIDERS, SecretProviderError, type ProviderName, type ProviderOptions, type SecretProvider } from './types.js';

export * from './types.js';
export { signV4 } from './sigv4.js';

export const providers: Record<ProviderName, SecretProvider> = {
  gcp: gcpProvider,
  aws: awsProvider,
  azure: azureProvider,
  env: envProvider,
  file: fileProvider,
};

export function isProvider(p: unknown): p is ProviderName {
  return typeof p === 'string' && (PROVIDERS as readonly string[]).includes(p);
}

export async function fetchSecret(provider: string, path: string, auth: JsonObject, opts: ProviderOptions = {}): Promise<Json> {
  if (!isProvider(provider)) throw new SecretProviderError(String(provider), `unknown provider; use one of ${PROVIDERS.join(', ')}`);
  const hash = path.lastIndexOf('#');
  const [secretPath, field] = hash > 0 ? [path.slice(0, hash), path.slice(hash + 1)] : [path, undefined];
  const value = await providers[provider].fetch(secretPath, auth, { ...opts, env: opts.env ?? process.env });
  if (field === undefined) return value;
  let doc: unknown;
  try {
    doc = JSON.parse(value);
  } catch {
    throw new SecretProviderError(provider, `secret ${secretPath} is not JSON, cannot take field '${field}'`);
  }
  const v = doc && typeof doc === 'object' ? (doc as JsonObject)[field] : undefined;
  if (v === undefined) throw new SecretProviderError(provider, `secret ${secretPath} has no field '${field}'`);
  return v;
}
