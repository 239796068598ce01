import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createVerify, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetchSecret, signV4, SecretProviderError } from './index.js';

interface Seen { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }
type Handler = (req: Seen) => { status: number; body: unknown };

async function server(handler: Handler): Promise<{ url: string; seen: Seen[]; close: () => Promise<void> }> {
  const seen: Seen[] = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const s = { method: req.method!, url: req.url!, headers: req.headers, body };
      seen.push(s);
      const out = handler(s);
      res.writeHead(out.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(out.body));
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, seen, close: () => new Promise((r) => srv.close(() => r())) };
}

describe('SigV4', () => {
  it('matches the AWS documentation example (IAM ListUsers)', () => {
    const headers = signV4({
      method: 'GET',
      url: 'https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8' },
      body: '',
      region: 'us-east-1',
      service: 'iam',
      accessKeyId: 'AKIDEXAMPLE',
      secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
      date: new Date('2015-08-30T12:36:00Z'),
    });
    expect(headers.authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7',
    );
    expect(headers['x-amz-date']).toBe('20150830T123600Z');
  });
});

describe('GCP Secret Manager', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  let sm: Awaited<ReturnType<typeof server>>;
  let tokens: Awaited<ReturnType<typeof server>>;
  beforeAll(async () => {
    tokens = await server((req) => {
      const p = new URLSearchParams(req.body);
      const [h, c, s] = (p.get('assertion') ?? '').split('.');
      const ok = createVerify('RSA-SHA256').update(`${h}.${c}`).verify(publicKey, Buffer.from(s, 'base64url'));
      const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
      if (!ok || p.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer' || claims.iss !== 'sa@p.iam.gserviceaccount.com') return { status: 400, body: { error: 'invalid_grant' } };
      return { status: 200, body: { access_token: 'gcp-token-from-jwt', expires_in: 3599, token_type: 'Bearer' } };
    });
    sm = await server((req) => {
      if (!['Bearer gcp-direct', 'Bearer gcp-token-from-jwt'].includes(String(req.headers.authorization))) return { status: 401, body: { error: { code: 401, message: 'unauthenticated' } } };
      const m = /^\/v1\/projects\/([^/]+)\/secrets\/([^/]+)\/versions\/([^/:]+):access$/.exec(req.url);
      if (!m) return { status: 404, body: { error: { code: 404, message: `no ${req.url}` } } };
      const value = m[2] === 'json' ? JSON.stringify({ user: 'u', password: 'CANARY-json' }) : `${m[1]}/${m[2]}@${m[3]}`;
      return { status: 200, body: { name: `projects/${m[1]}/secrets/${m[2]}/versions/${m[3]}`, payload: { data: Buffer.from(value).toString('base64') } } };
    });
  });
  afterAll(async () => {
    await sm?.close();
    await tokens?.close();
  });

  it('accesses a version with a bearer token; path forms', async () => {
    const o = { gcpBaseUrl: sm.url };
    expect(await fetchSecret('gcp', 'projects/p1/secrets/db/versions/3', { access_token: 'gcp-direct' }, o)).toBe('p1/db@3');
    expect(await fetchSecret('gcp', 'projects/p1/secrets/db', { access_token: 'gcp-direct' }, o)).toBe('p1/db@latest');
    expect(await fetchSecret('gcp', 'db', { access_token: 'gcp-direct', project_id: 'p2' }, o)).toBe('p2/db@latest');
    expect(await fetchSecret('gcp', 'db', { token: 'gcp-direct' }, { ...o, hints: { project_id: 'p3', version: '7' } })).toBe('p3/db@7');
    expect(await fetchSecret('gcp', 'projects/p/secrets/json#password', { access_token: 'gcp-direct' }, o)).toBe('CANARY-json');
  });

  it('exchanges a service account (JWT bearer grant, RS256) for a token', async () => {
    const sa = { type: 'service_account', project_id: 'sa-proj', private_key_id: 'k1', private_key: pem, client_email: 'sa@p.iam.gserviceaccount.com', token_uri: `${tokens.url}/token` };
    expect(await fetchSecret('gcp', 'api', sa, { gcpBaseUrl: sm.url })).toBe('sa-proj/api@latest');
    expect(await fetchSecret('gcp', 'api', { service_account: JSON.stringify(sa) }, { gcpBaseUrl: sm.url })).toBe('sa-proj/api@latest');
    expect(tokens.seen.length).toBe(2);
  });

  it('errors name the provider and status, never the secret', async () => {
    const e = await fetchSecret('gcp', 'projects/p/secrets/db', { access_token: 'wrong' }, { gcpBaseUrl: sm.url }).catch((x) => x);
    expect(e).toBeInstanceOf(SecretProviderError);
    expect(e.message).toBe('gcp: secret projects/p/secrets/db/versions/latest answered HTTP 401: unauthenticated');
    await expect(fetchSecret('gcp', 'db', { access_token: 'x' }, { gcpBaseUrl: sm.url })).rejects.toThrow(/needs a project/);
  });
});

describe('AWS Secrets Manager', () => {
  let srv: Awaited<ReturnType<typeof server>>;
  const auth = { access_key_id: 'AKIDTEST', secret_access_key: 'secret/key+1', region: 'eu-west-1', session_token: 'sess' };
  beforeAll(async () => {
    srv = await server((req) => {
      // Verify the signature by re-signing what was received with the known secret.
      const h = req.headers;
      const date = String(h['x-amz-date']);
      const d = new Date(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`);
      const expected = signV4({
        method: req.method, url: `http://${h.host}${req.url}`, body: req.body, region: 'eu-west-1', service: 'secretsmanager',
        headers: { 'content-type': String(h['content-type']), 'x-amz-target': String(h['x-amz-target']) },
        accessKeyId: 'AKIDTEST', secretAccessKey: 'secret/key+1', sessionToken: String(h['x-amz-security-token']), date: d,
      });
      if (h.authorization !== expected.authorization) return { status: 403, body: { __type: 'InvalidSignatureException', message: 'signature mismatch' } };
      if (h['x-amz-target'] !== 'secretsmanager.GetSecretValue' || h['content-type'] !== 'application/x-amz-json-1.1') return { status: 400, body: { __type: 'BadTarget' } };
      const b = JSON.parse(req.body);
      if (b.SecretId === 'bin') return { status: 200, body: { Name: 'bin', SecretBinary: Buffer.from('binary-value').toString('base64') } };
      if (b.SecretId === 'missing') return { status: 400, body: { __type: 'ResourceNotFoundException', Message: "Secrets Manager can't find the specified secret." } };
      return { status: 200, body: { ARN: 'arn:x', Name: b.SecretId, SecretString: `${b.SecretId}:${b.VersionStage ?? 'AWSCURRENT'}`, VersionId: 'v' } };
    });
  });
  afterAll(async () => srv?.close());

  it('GetSecretValue with SigV4 (session token), SecretString and SecretBinary', async () => {
    expect(await fetchSecret('aws', 'prod/db', auth, { awsEndpoint: srv.url })).toBe('prod/db:AWSCURRENT');
    expect(await fetchSecret('aws', 'prod/db', auth, { awsEndpoint: srv.url, hints: { version_stage: 'AWSPREVIOUS' } })).toBe('prod/db:AWSPREVIOUS');
    expect(await fetchSecret('aws', 'bin', auth, { awsEndpoint: srv.url })).toBe('binary-value');
    expect(srv.seen[0].headers['x-amz-security-token']).toBe('sess');
    expect(srv.seen[0].headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDTEST\/\d{8}\/eu-west-1\/secretsmanager\/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature=[0-9a-f]{64}$/);
  });

  it('a wrong key is refused by the signature check; errors carry the AWS message', async () => {
    await expect(fetchSecret('aws', 'prod/db', { ...auth, secret_access_key: 'nope' }, { awsEndpoint: srv.url })).rejects.toThrow('aws: secret prod/db answered HTTP 403: signature mismatch');
    await expect(fetchSecret('aws', 'missing', auth, { awsEndpoint: srv.url })).rejects.toThrow("Secrets Manager can't find the specified secret.");
    await expect(fetchSecret('aws', 'x', { access_key_id: 'a' }, { awsEndpoint: srv.url })).rejects.toThrow(/needs access_key_id and secret_access_key/);
  });
});

describe('Azure Key Vault', () => {
  let vault: Awaited<ReturnType<typeof server>>;
  let aad: Awaited<ReturnType<typeof server>>;
  beforeAll(async () => {
    aad = await server((req) => {
      const p = new URLSearchParams(req.body);
      if (req.url !== '/tenant-1/oauth2/v2.0/token' || p.get('grant_type') !== 'client_credentials' || p.get('client_secret') !== 'cs' || p.get('scope') !== 'https://vault.azure.net/.default') return { status: 401, body: { error: 'invalid_client', error_description: 'bad client' } };
      return { status: 200, body: { access_token: 'az-token', expires_in: 3599 } };
    });
    vault = await server((req) => {
      if (req.headers.authorization !== 'Bearer az-token') return { status: 401, body: { error: { code: 'Unauthorized', message: 'no token' } } };
      const m = /^\/secrets\/([^/?]+)(?:\/([^/?]+))?\?api-version=7\.4$/.exec(req.url);
      if (!m) return { status: 404, body: { error: { code: 'SecretNotFound', message: 'nope' } } };
      return { status: 200, body: { value: `${m[1]}@${m[2] ?? 'latest'}`, id: `${vault.url}/secrets/${m[1]}/${m[2] ?? 'abc'}` } };
    });
  });
  afterAll(async () => {
    await vault?.close();
    await aad?.close();
  });

  it('service principal → token → GET {vault}/secrets/{name}/{version}?api-version=7.4', async () => {
    const auth = { tenant_id: 'tenant-1', client_id: 'app', client_secret: 'cs', vault_url: vault.url };
    const o = { azureAuthorityUrl: aad.url };
    expect(await fetchSecret('azure', 'db-pass', auth, o)).toBe('db-pass@latest');
    expect(await fetchSecret('azure', 'db-pass/v2', auth, o)).toBe('db-pass@v2');
    expect(await fetchSecret('azure', `${vault.url}/secrets/other/v9`, { access_token: 'az-token' }, {})).toBe('other@v9');
    expect(await fetchSecret('azure', 'x', { access_token: 'az-token' }, { hints: { vault_url: vault.url, version: 'v3' } })).toBe('x@v3');
    await expect(fetchSecret('azure', 'db-pass', { ...auth, client_secret: 'bad' }, o)).rejects.toThrow('azure: token endpoint answered HTTP 401: bad client');
  });
});

describe('env and file', () => {
  it('reads environment variables and files; `#field` takes a JSON field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pf-sec-'));
    try {
      writeFileSync(join(dir, 'token'), 'file-secret\n');
      writeFileSync(join(dir, 'creds.json'), JSON.stringify({ password: 'pw' }));
      expect(await fetchSecret('env', 'MY_SECRET', {}, { env: { MY_SECRET: 'from-env' } })).toBe('from-env');
      expect(await fetchSecret('file', join(dir, 'token'), {})).toBe('file-secret');
      expect(await fetchSecret('file', 'creds.json#password', {}, { fileRoot: dir })).toBe('pw');
      await expect(fetchSecret('env', 'NOPE_NOT_SET', {}, { env: {} })).rejects.toThrow('env: environment variable NOPE_NOT_SET is not set');
      await expect(fetchSecret('file', join(dir, 'missing'), {})).rejects.toThrow(/ENOENT/);
      await expect(fetchSecret('vault', 'x', {})).rejects.toThrow(/unknown provider/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses the worker's own settings and process files, links followed", async () => {
    const env = { PLAYFLOW_API_TOKEN: 'tok', BROKER_URL: 'nats://u:p@nats', WORKER_ID: 'w', DATABASE_URL: 'postgres://x', APP_TOKEN: 'mine' };
    for (const name of ['PLAYFLOW_API_TOKEN', 'BROKER_URL', 'WORKER_ID', 'DATABASE_URL']) {
      await expect(fetchSecret('env', name, {}, { env })).rejects.toThrow(`env: environment variable ${name} is one of the worker's own settings, which a playbook cannot read`);
    }
    expect(await fetchSecret('env', 'APP_TOKEN', {}, { env })).toBe('mine');
    const dir = mkdtempSync(join(tmpdir(), 'pf-sec-'));
    try {
      symlinkSync('/proc/self/environ', join(dir, 'innocent'));
      for (const path of ['/proc/self/environ', `/proc/${process.pid}/environ`, join(dir, 'innocent'), '/var/run/secrets/kubernetes.io/serviceaccount/token']) {
        await expect(fetchSecret('file', path, {}), path).rejects.toThrow(/the worker's process files and service-account token are not a playbook's to read/);
      }
      await expect(fetchSecret('file', 'innocent', {}, { fileRoot: dir })).rejects.toThrow(/not a playbook's to read/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
