/**
 * `playflow credential create|list|get|delete` (and the `credentials` key commands beside them)
 * as subprocesses against a real server. The secret values below must never reach stdout or
 * stderr unless `--include-data` is given.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { cli, ENCRYPTION_KEY, startCliServer, type CliServer } from './helpers.js';

const PG_PASSWORD = 'pg-secret-Zq81';
const API_KEY = 'sk_live_Ux4c9';

let s: CliServer;
let tmp: string;

beforeAll(async () => {
  s = await startCliServer('pfclicred');
  tmp = mkdtempSync(join(tmpdir(), 'pf-cli-cred-'));
});
afterAll(async () => {
  await s?.close();
});

function noSecrets(...texts: string[]): void {
  for (const t of texts) {
    expect(t).not.toContain(PG_PASSWORD);
    expect(t).not.toContain(API_KEY);
  }
}

describe('credential create', () => {
  it('creates from --data @file plus --from-literal, with tags and a description; again: updated', async () => {
    const file = join(tmp, 'pg.json');
    writeFileSync(file, JSON.stringify({ db_host: 'db.internal', db_port: 5432, db_user: 'etl' }));
    const args = ['credential', 'create', 'pg_prod', '--type', 'postgres', '--data', `@${file}`, '--from-literal', `db_password=${PG_PASSWORD}`,
      '--tag', 'prod', '--tag', 'billing', '--description', 'Billing warehouse', ...s.auth];
    const r = await cli(args);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^credential pg_prod created \(id \d+, type postgres\)\n$/);
    noSecrets(r.stdout);

    // What the server stored: the file's fields plus the literal (a string), under the tags.
    const stored = await s.api('GET', '/api/credentials/pg_prod?include_data=true');
    expect(stored).toMatchObject({ type: 'postgres', tags: ['prod', 'billing'], description: 'Billing warehouse' });
    expect(stored.data).toEqual({ db_host: 'db.internal', db_port: 5432, db_user: 'etl', db_password: PG_PASSWORD });

    const again = await cli(args);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^credential pg_prod updated \(id \d+, type postgres\)\n$/);
  });

  it('--scope-path / --scope-namespace restrict the playbooks; an update without them keeps the scope; --no-scope removes it', async () => {
    const base = ['credential', 'create', 'scoped_api', '--type', 'bearer', '--from-literal', 'access_token=t', ...s.auth];
    expect((await cli([...base, '--scope-path', 'team-a/**', '--scope-namespace', 'team-a'])).code).toBe(0);
    expect((await s.api('GET', '/api/credentials/scoped_api')).scope).toEqual({ paths: ['team-a/**'], namespaces: ['team-a'] });
    expect((await cli(base)).code).toBe(0);
    const shown = await cli(['credential', 'get', 'scoped_api', ...s.auth]);
    expect(shown.stdout).toMatch(/Scope:\s+paths team-a\/\*\*; namespaces team-a/);
    const bad = await cli([...base, '--scope-path', '/abs']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("scope.paths[0] '/abs' must not start with '/'");
    expect((await cli([...base, '--no-scope'])).code).toBe(0);
    expect((await s.api('GET', '/api/credentials/scoped_api')).scope).toBeNull();
    await s.api('DELETE', '/api/credentials/scoped_api'); // the list tests below count the others
  });

  it('-o json prints the API body: metadata, no data', async () => {
    const r = await cli(['credential', 'create', 'stripe', '--type', 'api_key', '--from-literal', `api_key=${API_KEY}`, '--from-literal', 'api_secret=a=b', ...s.auth, '-o', 'json']);
    expect(r.code).toBe(0);
    const body = JSON.parse(r.stdout);
    expect(body).toMatchObject({ id: expect.any(Number), name: 'stripe', type: 'api_key', tags: [] });
    expect(body).not.toHaveProperty('data');
    noSecrets(r.stdout, r.stderr);
    // `key=value` splits at the first `=` only.
    expect((await s.api('GET', '/api/credentials/stripe?include_data=true')).data).toEqual({ api_key: API_KEY, api_secret: 'a=b' });
  });

  it('a schema validation failure (400) prints every message and exits 1', async () => {
    const schema = JSON.stringify({ required: ['user', 'password'], types: { port: 'integer' }, fields: ['user', 'password', 'port'] });
    const r = await cli(['credential', 'create', 'svc', '--type', 'custom', '--data', '{"port": "5432", "extra": 1}', '--schema', schema, ...s.auth]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('Credential validation failed (400):');
    expect(r.stderr).toContain('  - Missing required field: user\n');
    expect(r.stderr).toContain('  - Missing required field: password\n');
    expect(r.stderr).toContain("  - Field 'port' must be integer, got string\n");
    expect(r.stderr).toContain('  - Unexpected fields: extra');
    expect((await cli(['credential', 'get', 'svc', ...s.auth])).code).toBe(1);

    const json = await cli(['credential', 'create', 'svc', '--type', 'custom', '--data', '{}', '--schema', schema, ...s.auth, '-o', 'json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr).error).toMatchObject({ code: 'validation_failed', status: 400, details: ['Missing required field: user', 'Missing required field: password'] });

    const ok = await cli(['credential', 'create', 'svc', '--type', 'custom', '--data', '{"user": "u", "password": "p", "port": 1}', '--schema', schema, ...s.auth]);
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('bad input exits 1 before any request: no data, bad JSON, missing file, bad literal, no --type', async () => {
    const none = await cli(['credential', 'create', 'x', '--type', 'custom', ...s.auth]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no data: give --data <json|@file> and/or --from-literal key=value');
    const bad = await cli(['credential', 'create', 'x', '--type', 'custom', '--data', '{"a":', ...s.auth]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--data is not valid JSON');
    const missing = await cli(['credential', 'create', 'x', '--type', 'custom', '--data', `@${join(tmp, 'nope.json')}`, ...s.auth]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read --data file '.*nope\.json': no such file/);
    const schema = await cli(['credential', 'create', 'x', '--type', 'custom', '--data', '{}', '--schema', '[1]', ...s.auth]);
    expect(schema.code).toBe(1);
    expect(schema.stderr).toContain('--schema must be a JSON object');
    const lit = await cli(['credential', 'create', 'x', '--type', 'custom', '--from-literal', 'novalue', ...s.auth]);
    expect(lit.code).toBe(1);
    expect(lit.stderr).toContain('--from-literal expects key=value, got "novalue"');
    const noType = await cli(['credential', 'create', 'x', '--data', '{}', ...s.auth]);
    expect(noType.code).toBe(1);
    expect(noType.stderr).toContain("required option '--type <type>' not specified");
    const badType = await cli(['credential', 'create', 'x', '--type', 'ldap', '--data', '{}', ...s.auth]);
    expect(badType.code).toBe(1);
    expect(badType.stderr).toBe('error: --type must be one of postgres, oauth2, bearer, basic, api_key, service_account, warehouse, custom, got "ldap"\n');
  });
});

describe('credential list', () => {
  it('a table with headers, aligned, metadata only; filters by type, tag and search', async () => {
    const r = await cli(['credential', 'list', ...s.auth]);
    expect(r.code).toBe(0);
    noSecrets(r.stdout);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID +NAME +TYPE +TAGS +DESCRIPTION +UPDATED$/);
    const pg = lines.find((l) => l.includes('pg_prod'))!;
    expect(pg).toMatch(/^\d+ +pg_prod +postgres +prod,billing +Billing warehouse +\d{4}-\d\d-\d\dT/);
    // Aligned: every row's NAME column starts where the header's does.
    const at = lines[0]!.indexOf('NAME');
    for (const l of lines.slice(1)) expect(l.slice(at - 2, at)).toBe('  ');
    expect(lines.slice(1).map((l) => l.split(/ {2,}/)[1]).sort()).toEqual(['pg_prod', 'stripe', 'svc']);

    const byType = await cli(['credential', 'list', '--type', 'api_key', ...s.auth, '-o', 'json']);
    expect(JSON.parse(byType.stdout).credentials.map((c: { name: string }) => c.name)).toEqual(['stripe']);
    const byTag = await cli(['credential', 'list', '--tag', 'billing', ...s.auth, '-o', 'json']);
    expect(JSON.parse(byTag.stdout).credentials.map((c: { name: string }) => c.name)).toEqual(['pg_prod']);
    const search = await cli(['credential', 'list', '--search', 'warehouse', ...s.auth]);
    expect(search.stdout, search.stderr).toContain('pg_prod');
    expect(search.stdout).not.toContain('stripe');
    const nothing = await cli(['credential', 'list', '--type', 'oauth2', ...s.auth]);
    expect(nothing.code).toBe(0);
    expect(nothing.stdout).toBe('No credentials found.\n');
  });

  it('-o json is the API body exactly; -o yaml the same as YAML', async () => {
    const api = await s.api('GET', '/api/credentials');
    const json = await cli(['credential', 'list', ...s.auth, '-o', 'json']);
    expect(JSON.parse(json.stdout)).toEqual(api);
    const yaml = await cli(['credential', 'list', ...s.auth, '--output', 'yaml']);
    expect(yaml.code).toBe(0);
    expect(parseYaml(yaml.stdout)).toEqual(api);
    noSecrets(json.stdout, yaml.stdout);
  });
});

describe('credential get', () => {
  it('by name or id: metadata only unless --include-data, in every format', async () => {
    const table = await cli(['credential', 'get', 'pg_prod', ...s.auth]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^Name: +pg_prod\nID: +\d+\nType: +postgres\nDescription: +Billing warehouse\nTags: +prod, billing\n/);
    expect(table.stdout).not.toContain('Data:');
    for (const o of ['json', 'yaml']) {
      const r = await cli(['credential', 'get', 'pg_prod', ...s.auth, '-o', o]);
      expect(r.code).toBe(0);
      const body = o === 'json' ? JSON.parse(r.stdout) : parseYaml(r.stdout);
      expect(body).toEqual(await s.api('GET', '/api/credentials/pg_prod'));
      expect(body).not.toHaveProperty('data');
      noSecrets(r.stdout);
    }
    noSecrets(table.stdout);

    const id = String((await s.api('GET', '/api/credentials/pg_prod')).id);
    const withData = await cli(['credential', 'get', id, '--include-data', ...s.auth]);
    expect(withData.code).toBe(0);
    expect(withData.stdout).toMatch(/^Name: +pg_prod\n/);
    expect(withData.stdout).toContain(`Data:\n  {\n    "db_host": "db.internal",`);
    expect(withData.stdout).toContain(`"db_password": "${PG_PASSWORD}"`);
    const json = JSON.parse((await cli(['credential', 'get', 'pg_prod', '--include-data', ...s.auth, '-o', 'json'])).stdout);
    expect(json.data.db_password).toBe(PG_PASSWORD);
  });

  it('an unknown credential: exit 1, not found (404)', async () => {
    const r = await cli(['credential', 'get', 'nope', ...s.auth]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("error: not found (404): credential 'nope' not found\n");
  });
});

describe('credential delete', () => {
  it('deletes by name; then get and delete answer 404', async () => {
    await cli(['credential', 'create', 'tmp_cred', '--type', 'basic', '--from-literal', 'username=u', ...s.auth]);
    const r = await cli(['credential', 'delete', 'tmp_cred', ...s.auth]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^credential tmp_cred deleted \(id \d+\)\n$/);
    expect((await cli(['credential', 'get', 'tmp_cred', ...s.auth])).stderr).toContain('not found (404)');
    const again = await cli(['credential', 'delete', 'tmp_cred', ...s.auth, '-o', 'json']);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr).error).toMatchObject({ code: 'not_found', status: 404 });
  });
});

describe('credentials (key maintenance) beside credential', () => {
  it('credentials verify-key still runs against the database; --help lists rotate-key', async () => {
    const r = await cli(['credentials', 'verify-key', '--database-url', s.db.url], { PLAYFLOW_ENCRYPTION_KEY: ENCRYPTION_KEY });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ok: current key \S+\n {2}credential: \S+ \(current\): 3\n/);
    const yaml = await cli(['credentials', 'verify-key', '--database-url', s.db.url, '-o', 'yaml'], { PLAYFLOW_ENCRYPTION_KEY: ENCRYPTION_KEY });
    expect(parseYaml(yaml.stdout)).toMatchObject({ key_id: expect.any(String), rows: { credential: expect.any(Object) } });
    const help = await cli(['credentials', '--help']);
    expect(help.stdout).toContain('rotate-key');
    expect(help.stdout).toContain('verify-key');
  });

  it('credentials rotate-key re-encrypts under a new key (the old one as previous); verify-key then passes with the new key alone', async () => {
    const newKey = Buffer.alloc(32, 9).toString('base64');
    const noPrevious = await cli(['credentials', 'rotate-key', '--database-url', s.db.url], { PLAYFLOW_ENCRYPTION_KEY: newKey });
    expect(noPrevious.code).toBe(1);
    expect(noPrevious.stderr).toContain('set PLAYFLOW_ENCRYPTION_KEY_PREVIOUS to the old key');
    const r = await cli(['credentials', 'rotate-key', '--database-url', s.db.url], { PLAYFLOW_ENCRYPTION_KEY: newKey, PLAYFLOW_ENCRYPTION_KEY_PREVIOUS: ENCRYPTION_KEY });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/rotated \d+ rows to key \S+ \(credential 3, /);
    noSecrets(r.stdout);
    const verify = await cli(['credentials', 'verify-key', '--database-url', s.db.url, '-o', 'json'], { PLAYFLOW_ENCRYPTION_KEY: newKey });
    expect(verify.code, verify.stderr).toBe(0);
    const status = JSON.parse(verify.stdout);
    expect(status.rows.credential).toEqual({ [status.key_id]: 3 });
  });
});
