/**
 * GCP Secret Manager: `GET {base}/v1/projects/{p}/secrets/{s}/versions/{v}:access` →
 * `{payload: {data: <base64>}}`.
 *
 * Path forms: `projects/{p}/secrets/{s}/versions/{v}`, `projects/{p}/secrets/{s}` (latest),
 * `{s}/versions/{v}`, `{s}` (project from the hints' or the credential's `project_id`).
 * Auth data: an OAuth access token (`access_token` or `token`), or a service-account document
 * (`client_email`, `private_key`, `token_uri`; also nested under `service_account` / `credentials`,
 * or as a JSON string) exchanged for a token with the JWT bearer grant (RS256, node:crypto).
 */
import { createSign } from 'node:crypto';
import type { JsonObject } from '../../playbook/types.js';
import { failure, form, httpCall, str, trimSlash } from './http.js';
import { SecretProviderError, type ProviderOptions, type SecretProvider } from './types.js';

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const DEFAULT_BASE = 'https://secretmanager.googleapis.com';
const DEFAULT_TOKEN_URI = 'https://oauth2.googleapis.com/token';

function serviceAccount(auth: JsonObject): JsonObject | undefined {
  for (const c of [auth, auth.service_account, auth.credentials, auth.service_account_json]) {
    let v: unknown = c;
    if (typeof v === 'string') {
      try {
        v = JSON.parse(v);
      } catch {
        continue;
      }
    }
    if (v && typeof v === 'object' && !Array.isArray(v) && str((v as JsonObject).private_key) && str((v as JsonObject).client_email)) return v as JsonObject;
  }
  return undefined;
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

export function signJwt(sa: JsonObject, audience: string, now: Date, scope = SCOPE): string {
  const iat = Math.floor(now.getTime() / 1000);
  const header: JsonObject = { alg: 'RS256', typ: 'JWT' };
  if (str(sa.private_key_id)) header.kid = sa.private_key_id as string;
  const claims = { iss: sa.client_email, scope, aud: audience, iat, exp: iat + 3600 };
  const unsigned = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  const sig = createSign('RSA-SHA256').update(unsigned).sign(sa.private_key as string);
  return `${unsigned}.${b64url(sig)}`;
}

export async function gcpAccessToken(auth: JsonObject, opts: ProviderOptions): Promise<string> {
  const direct = str(auth.access_token) ?? str(auth.token);
  if (direct) return direct;
  const sa = serviceAccount(auth);
  if (!sa) throw new SecretProviderError('gcp', 'auth has neither an access_token nor a service account (client_email, private_key)');
  const tokenUri = str(sa.token_uri) ?? DEFAULT_TOKEN_URI;
  const assertion = signJwt(sa, tokenUri, (opts.now ?? (() => new Date()))());
  const a = await httpCall('gcp', tokenUri, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }),
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
  });
  const token = (a.json as JsonObject | undefined)?.access_token;
  if (a.status !== 200 || typeof token !== 'string') throw failure('gcp', 'token endpoint', a);
  return token;
}

export function gcpResource(path: string, projectId: string | undefined, version: string | undefined): string {
  const p = path.replace(/^\/+/, '');
  const full = /^projects\/[^/]+\/secrets\/[^/]+/.exec(p);
  let name: string;
  if (full) name = p;
  else {
    if (!projectId) throw new SecretProviderError('gcp', `secret '${path}' needs a project: give projects/<p>/secrets/<s> or project_id`);
    name = `projects/${projectId}/secrets/${p}`;
  }
  if (!/\/versions\/[^/]+$/.test(name)) name += `/versions/${version ?? 'latest'}`;
  return name;
}

export const gcpProvider: SecretProvider = {
  async fetch(path, auth, opts) {
    const hints = opts.hints ?? {};
    const projectId = str(hints.project_id) ?? str(hints.project) ?? str(auth.project_id) ?? serviceAccount(auth)?.project_id as string | undefined;
    const resource = gcpResource(path, projectId, str(hints.version));
    const base = trimSlash(opts.gcpBaseUrl ?? str(auth.secretmanager_url) ?? opts.env?.PLAYFLOW_GCP_SECRETMANAGER_URL ?? DEFAULT_BASE);
    const token = await gcpAccessToken(auth, opts);
    const a = await httpCall('gcp', `${base}/v1/${resource.split('/').map(encodeURIComponent).join('/')}:access`, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
    });
    const data = ((a.json as JsonObject | undefined)?.payload as JsonObject | undefined)?.data;
    if (a.status !== 200 || typeof data !== 'string') throw failure('gcp', `secret ${resource}`, a);
    return Buffer.from(data, 'base64').toString('utf8');
  },
};
