/**
 * AWS Secrets Manager: `POST {endpoint}/` with `X-Amz-Target: secretsmanager.GetSecretValue`,
 * `Content-Type: application/x-amz-json-1.1`, body `{SecretId, VersionId?, VersionStage?}`,
 * SigV4-signed (service `secretsmanager`). Answer `SecretString` (or `SecretBinary`, base64).
 *
 * Auth data: `access_key_id` / `aws_access_key_id`, `secret_access_key` / `aws_secret_access_key`,
 * optional `session_token`, `region` (or the hints' region, or AWS_REGION).
 */
import type { JsonObject } from '../../playbook/types.js';
import { signV4 } from './sigv4.js';
import { failure, httpCall, str, trimSlash } from './http.js';
import { SecretProviderError, type SecretProvider } from './types.js';

export const awsProvider: SecretProvider = {
  async fetch(path, auth, opts) {
    const hints = opts.hints ?? {};
    const accessKeyId = str(auth.access_key_id) ?? str(auth.aws_access_key_id) ?? str(auth.AccessKeyId);
    const secretAccessKey = str(auth.secret_access_key) ?? str(auth.aws_secret_access_key) ?? str(auth.SecretAccessKey);
    if (!accessKeyId || !secretAccessKey) throw new SecretProviderError('aws', 'auth needs access_key_id and secret_access_key');
    const region = str(hints.region) ?? str(auth.region) ?? opts.env?.AWS_REGION ?? opts.env?.AWS_DEFAULT_REGION;
    if (!region) throw new SecretProviderError('aws', 'no region: set region on the keychain entry or the credential');
    const endpoint = trimSlash(opts.awsEndpoint ?? str(auth.endpoint_url) ?? opts.env?.PLAYFLOW_AWS_SECRETSMANAGER_URL ?? `https://secretsmanager.${region}.amazonaws.com`);
    const body: JsonObject = { SecretId: path };
    if (str(hints.version_id)) body.VersionId = hints.version_id as string;
    if (str(hints.version_stage) ?? str(hints.version)) body.VersionStage = (str(hints.version_stage) ?? str(hints.version)) as string;
    const payload = JSON.stringify(body);
    const headers = signV4({
      method: 'POST',
      url: `${endpoint}/`,
      headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'secretsmanager.GetSecretValue' },
      body: payload,
      region,
      service: 'secretsmanager',
      accessKeyId,
      secretAccessKey,
      sessionToken: str(auth.session_token) ?? str(auth.aws_session_token),
      date: (opts.now ?? (() => new Date()))(),
    });
    const a = await httpCall('aws', `${endpoint}/`, { method: 'POST', headers, body: payload, timeoutMs: opts.timeoutMs, signal: opts.signal });
    const j = a.json as JsonObject | undefined;
    if (a.status !== 200 || !j) throw failure('aws', `secret ${path}`, a);
    if (typeof j.SecretString === 'string') return j.SecretString;
    if (typeof j.SecretBinary === 'string') return Buffer.from(j.SecretBinary, 'base64').toString('utf8');
    throw new SecretProviderError('aws', `secret ${path} has neither SecretString nor SecretBinary`);
  },
};
