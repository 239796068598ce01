/**
 * Azure Key Vault: `GET {vault}/secrets/{name}/{version}?api-version=7.4` → `{value}`.
 *
 * Path forms: `name`, `name/version`, or a full secret URL `https://<vault>/secrets/<name>[/<version>]`.
 * Vault URL: from a full path, the hints' `vault_url`, or the credential's `vault_url`.
 * Auth data: `access_token` / `token`, or a service principal (`tenant_id`, `client_id`,
 * `client_secret`) exchanged with the client-credentials grant at
 * `{authority}/{tenant}/oauth2/v2.0/token` for scope `https://vault.azure.net/.default`.
 */
import type { JsonObject } from '../../playbook/types.js';
import { failure, form, httpCall, str, trimSlash } from './http.js';
import { SecretProviderError, type ProviderOptions, type SecretProvider } from './types.js';

const API_VERSION = '7.4';

export async function azureAccessToken(auth: JsonObject, opts: ProviderOptions): Promise<string> {
  const direct = str(auth.access_token) ?? str(auth.token);
  if (direct) return direct;
  const tenant = str(auth.tenant_id) ?? str(auth.tenant);
  const clientId = str(auth.client_id);
  const clientSecret = str(auth.client_secret);
  if (!tenant || !clientId || !clientSecret) throw new SecretProviderError('azure', 'auth needs an access_token or tenant_id, client_id and client_secret');
  const authority = trimSlash(opts.azureAuthorityUrl ?? str(auth.authority_url) ?? opts.env?.PLAYFLOW_AZURE_AUTHORITY_URL ?? 'https://login.microsoftonline.com');
  const a = await httpCall('azure', `${authority}/${encodeURIComponent(tenant)}/oauth2/v2.0/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret, scope: str(auth.scope) ?? 'https://vault.azure.net/.default' }),
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
  });
  const token = (a.json as JsonObject | undefined)?.access_token;
  if (a.status !== 200 || typeof token !== 'string') throw failure('azure', 'token endpoint', a);
  return token;
}

export function azureSecretUrl(path: string, vaultUrl: string | undefined, version?: string): string {
  let vault = vaultUrl;
  let rest = path.replace(/^\/+/, '');
  const full = /^(https?:\/\/[^/]+)\/secrets\/(.+)$/.exec(path);
  if (full) {
    vault = full[1];
    rest = full[2];
  }
  if (!vault) throw new SecretProviderError('azure', `secret '${path}' needs a vault: give vault_url or a full secret URL`);
  const [name, ver] = rest.split('/');
  const v = ver ?? version;
  return `${trimSlash(vault)}/secrets/${encodeURIComponent(name)}${v ? `/${encodeURIComponent(v)}` : ''}?api-version=${API_VERSION}`;
}

export const azureProvider: SecretProvider = {
  async fetch(path, auth, opts) {
    const hints = opts.hints ?? {};
    const url = azureSecretUrl(path, str(hints.vault_url) ?? str(auth.vault_url), str(hints.version));
    const token = await azureAccessToken(auth, opts);
    const a = await httpCall('azure', url, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' }, timeoutMs: opts.timeoutMs, signal: opts.signal });
    const value = (a.json as JsonObject | undefined)?.value;
    if (a.status !== 200 || typeof value !== 'string') throw failure('azure', `secret ${path}`, a);
    return value;
  },
};
