/**
 * Secret providers: fetch one secret value by path from a cloud secret manager (GCP Secret
 * Manager, AWS Secrets Manager, Azure Key Vault) or from the worker's environment / a mounted
 * file. Values are secrets: never log them, never put them in errors.
 *
 * Base URLs are settings (options, then the credential's own fields, then environment variables,
 * then the public default) so tests and private endpoints (VPC endpoints, emulators) work:
 *   GCP   PLAYFLOW_GCP_SECRETMANAGER_URL   default https://secretmanager.googleapis.com
 *   AWS   PLAYFLOW_AWS_SECRETSMANAGER_URL  default https://secretsmanager.<region>.amazonaws.com
 *   Azure vault URL from the path, the auth data (`vault_url`) or the keychain def; token authority
 *         PLAYFLOW_AZURE_AUTHORITY_URL     default https://login.microsoftonline.com
 */
import type { JsonObject } from '../../playbook/types.js';

export type ProviderName = 'gcp' | 'aws' | 'azure' | 'env' | 'file';
export const PROVIDERS: readonly ProviderName[] = ['gcp', 'aws', 'azure', 'env', 'file'];

export interface ProviderOptions {
  gcpBaseUrl?: string;
  awsEndpoint?: string;
  azureAuthorityUrl?: string;
  /** Extra fields of the request (project_id, region, vault_url, version) from the keychain def or tool. */
  hints?: JsonObject;
  env?: Record<string, string | undefined>;
  /** Root that relative file paths resolve against; default the working directory. */
  fileRoot?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Clock for request signing (tests). */
  now?: () => Date;
}

export interface SecretProvider {
  /** The secret's value as text (JSON secrets are parsed by the caller when a `#field` is asked for). */
  fetch(path: string, auth: JsonObject, opts: ProviderOptions): Promise<string>;
}

export class SecretProviderError extends Error {
  constructor(readonly provider: string, message: string, readonly status?: number) {
    super(`${provider}: ${message}`);
    this.name = 'SecretProviderError';
  }
}
