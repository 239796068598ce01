import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHarness, type SecretsHarness } from '../../test/helpers/secrets.js';
import { PlayflowClient } from '../../client/http.js';
import { SecretsClient } from '../../client/secrets.js';
import { makeCtx } from '../testing/helpers.js';
import { createAuthResolver } from '../auth.js';
import { KeychainResolver, renderKeychain } from '../keychain.js';
import { createSecretTool } from './secret.js';
import { runTool } from './index.js';
import { registerSecretTool } from './secret.js';

let h: SecretsHarness;
let secrets: SecretsClient;
let sm: http.Server;
let smUrl: string;

beforeAll(async () => {
  h = await createHarness();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  secrets = new SecretsClient(new PlayflowClient({ baseUrl: `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}` }));
  await secrets.putCredential({ name: 'gcp_sa', type: 'service_account', data: { access_token: 'gcp-tok', project_id: 'proj' } });
  sm = http.createServer((req, res) => {
    const m = /^\/v1\/projects\/proj\/secrets\/([^/]+)\/versions\/([^/:]+):access$/.exec(req.url ?? '');
    const good = req.headers.authorization === 'Bearer gcp-tok' && m;
    res.writeHead(good ? 200 : 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify(good ? { payload: { data: Buffer.from(`CANARY-${m![1]}@${m![2]}`).toString('base64') } } : { error: { message: 'not found' } }));
  });
  await new Promise<void>((r) => sm.listen(0, '127.0.0.1', r));
  smUrl = `http://127.0.0.1:${(sm.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => sm?.close(r));
  await h?.close();
});

const ctx = (over = {}) => makeCtx({ execution_id: '8001', step: 'get_secret', resolveAuth: createAuthResolver(secrets), template: { catalog_id: '77', root_execution_id: '8000' }, ...over });

describe('secret tool', () => {
  it('fetches from the provider into the keychain; the result carries no secret', async () => {
    const run = createSecretTool({ client: secrets, providerOptions: { gcpBaseUrl: smUrl } });
    const out = await run({ kind: 'secret', provider: 'gcp', name: 'db-pass', version: '3', auth: 'gcp_sa', keychain: 'db' }, ctx());
    expect(out.error).toBeUndefined();
    expect(out.response).toMatchObject({ status: 'stored', keychain_name: 'db', scope_type: 'local', cache_key: 'db:77:8001', provider: 'gcp', fields: ['value'] });
    expect(JSON.stringify(out)).not.toContain('CANARY');
    expect(await secrets.getKeychain('77', 'db', { scope_type: 'local', execution_id: '8001' })).toMatchObject({ token_data: { value: 'CANARY-db-pass@3' }, credential_type: 'secret_manager' });
    // a later step of the same execution reads it without a keychain def
    const tool = await renderKeychain({ kind: 'http', endpoint: 'x', headers: { p: '{{ keychain.db.value }}' } },
      { catalog_id: '77', execution_id: '8001', root_execution_id: '8000', context: { keychain_defs: [] } }, new KeychainResolver({ client: secrets }));
    expect(tool.headers).toEqual({ p: 'CANARY-db-pass@3' });
  });

  it('map, shared scope (root execution), env provider; default entry name is the step', async () => {
    const run = createSecretTool({ client: secrets });
    process.env.PF_SECRET_TOOL_TEST = 'CANARY-env';
    try {
      const out = await run({ kind: 'secret', provider: 'env', map: { token: 'PF_SECRET_TOOL_TEST' }, scope: 'shared', ttl_seconds: 60 }, ctx());
      expect(out.response).toMatchObject({ keychain_name: 'get_secret', scope_type: 'shared', cache_key: 'get_secret:77:shared:8000', fields: ['token'] });
    } finally {
      delete process.env.PF_SECRET_TOOL_TEST;
    }
  });

  it('provider failures are error outcomes; bad configs are bad_config through runTool', async () => {
    const run = createSecretTool({ client: secrets, providerOptions: { gcpBaseUrl: smUrl } });
    const out = await run({ kind: 'secret', provider: 'gcp', name: 'projects/other/secrets/x', auth: 'gcp_sa' }, ctx());
    expect(out.error).toMatchObject({ code: 'secret_error', status: 404 });
    registerSecretTool({ client: secrets });
    expect((await runTool({ kind: 'secret', provider: 'vault', name: 'x' }, ctx())).error).toMatchObject({ code: 'bad_config' });
    expect((await runTool({ kind: 'secret', provider: 'env' }, ctx())).error?.message).toMatch(/needs name/);
    expect((await runTool({ kind: 'secret', provider: 'env', name: 'HOME' }, ctx({ template: {} }))).error?.message).toMatch(/catalog id/);
  });
});
