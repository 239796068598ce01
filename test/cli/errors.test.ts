/**
 * The CLI's failures as users meet them: one clear message on stderr and a non-zero exit, for a
 * missing file, invalid YAML, an invalid playbook (with paths), a bad --payload, an unreachable
 * server, an unknown execution id and a wrong token. Subprocesses against a real server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, closedPort, ROOT, startCliServer, TOKEN, type CliServer } from './helpers.js';

const EXAMPLE = join(ROOT, 'examples/hello_world.yaml');

let s: CliServer;
let tmp: string;

beforeAll(async () => {
  s = await startCliServer('pfclierr');
  tmp = mkdtempSync(join(tmpdir(), 'pf-cli-err-'));
  const reg = await cli(['catalog', 'register', 'playbook', EXAMPLE, ...s.auth]);
  if (reg.code !== 0) throw new Error(reg.stderr);
});
afterAll(async () => {
  await s?.close();
});

describe('files', () => {
  it('a missing file or a directory: exit 1 naming it (register and validate)', async () => {
    const missing = join(tmp, 'nope.yaml');
    const r = await cli(['catalog', 'register', 'playbook', missing, ...s.auth]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error: cannot read playbook file '${missing}': no such file\n`);
    const dir = await cli(['catalog', 'register', 'playbook', tmp, ...s.auth]);
    expect(dir.code).toBe(1);
    expect(dir.stderr).toContain('is a directory');
    const v = await cli(['playbook', 'validate', missing]);
    expect(v.code).toBe(1);
    expect(v.stdout + v.stderr).toContain(`cannot read playbook file '${missing}': no such file`);
  });

  it('invalid YAML: exit 1 saying so, from the server (register) and offline (validate)', async () => {
    const file = join(tmp, 'broken.yaml');
    writeFileSync(file, 'apiVersion: playflow.io/v2\nkind: Playbook\nworkflow: [\n  - step: start\n');
    const r = await cli(['catalog', 'register', 'playbook', file, ...s.auth]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^error: playbook invalid \(422\): /);
    expect(r.stderr).toMatch(/\n {2}- \(document\): invalid YAML at line \d+, column \d+: /);
    const v = await cli(['playbook', 'validate', file]);
    expect(v.code).toBe(1);
    expect(v.stdout + v.stderr).toMatch(/yaml/i);
  });

  it('an invalid playbook: exit 1 listing each problem with its path (register and validate)', async () => {
    const file = join(tmp, 'invalid.yaml');
    writeFileSync(file, [
      'apiVersion: playflow.io/v2', 'kind: Playbook', 'metadata:', '  name: bad', '  path: cli/bad', 'workflow:',
      '  - step: start', '    tool:', '      kind: python', '      code: "def main(): return 1"', '    next:', '      - step: nowhere', '',
    ].join('\n'));
    const r = await cli(['catalog', 'register', 'playbook', file, ...s.auth]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('playbook invalid (422)');
    expect(r.stderr).toMatch(/\n {2}- workflow\[0\]\.next\[0\]\S*: .*nowhere/);
    const v = await cli(['playbook', 'validate', file]);
    expect(v.code).toBe(1);
    expect(v.stdout + v.stderr).toMatch(/workflow\[0\]\.next\[0\]\S*: error: .*nowhere/);
  });
});

describe('--payload', () => {
  it('bad JSON, not an object, a missing @file: exit 1 before any request', async () => {
    const bad = await cli(['run', 'playbook', 'examples/hello_world', '--payload', '{"name": Ada}', ...s.auth]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error: --payload is not valid JSON: /);
    const arr = await cli(['run', 'playbook', 'examples/hello_world', '--payload', '"Ada"', ...s.auth]);
    expect(arr.code).toBe(1);
    expect(arr.stderr).toContain('--payload must be a JSON object');
    const missing = await cli(['run', 'playbook', 'examples/hello_world', '--payload', `@${join(tmp, 'in.json')}`, ...s.auth]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`error: cannot read --payload file '${join(tmp, 'in.json')}': no such file\n`);
    // Nothing was started by the three attempts.
    expect((await s.api('GET', '/api/executions')).executions).toHaveLength(0);
  });
});

describe('the server', () => {
  it('unreachable: exit 1 naming the address and how to set it, on every API command', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    for (const args of [['catalog', 'list'], ['execution', 'status', '1'], ['credential', 'list'], ['vars', 'get', '1'], ['run', 'playbook', 'x']]) {
      const r = await cli([...args, '--server', url]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain(`cannot reach the Playflow server at ${url}`);
      expect(r.stderr).toContain('is the server running? (set --server or SERVER_API_URL');
    }
    const viaEnv = await cli(['execution', 'list'], { SERVER_API_URL: url });
    expect(viaEnv.code).toBe(1);
    expect(viaEnv.stderr).toContain(`cannot reach the Playflow server at ${url}`);
  });

  it('a wrong or missing token: exit 1, unauthorized (401), naming PLAYFLOW_API_TOKEN', async () => {
    for (const args of [['catalog', 'list'], ['execution', 'list'], ['credential', 'list'], ['vars', 'get', '1'], ['credential', 'create', 'x', '--type', 'custom', '--data', '{}']]) {
      const r = await cli([...args, '--server', s.url, '--token', 'wrong']);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain('unauthorized (401)');
      expect(r.stderr).toContain('pass --token or set PLAYFLOW_API_TOKEN');
    }
    const none = await cli(['credential', 'list', '--server', s.url]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('unauthorized (401)');
    const fromEnv = await cli(['credential', 'list'], { SERVER_API_URL: s.url, PLAYFLOW_API_TOKEN: TOKEN });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
  });
});

describe('execution ids', () => {
  it('an unknown id: exit 1, not found (404), for status, events and cancel', async () => {
    for (const cmd of ['status', 'events', 'cancel']) {
      const r = await cli(['execution', cmd, '424242', ...s.auth]);
      expect(r.code, cmd).toBe(1);
      expect(r.stderr, cmd).toContain('not found (404): execution 424242 not found');
    }
    const json = await cli(['execution', 'events', '424242', ...s.auth, '-o', 'json']);
    expect(json.code).toBe(1);
    expect(json.stdout).toBe('');
    expect(JSON.parse(json.stderr).error).toMatchObject({ code: 'not_found', status: 404 });
  });

  it('a malformed id: exit 1 before any request', async () => {
    for (const args of [['execution', 'status', '12a'], ['execution', 'events', 'last'], ['vars', 'get', 'abc'], ['vars', 'delete', '1.5', 'x']]) {
      const r = await cli([...args, '--server', 'http://127.0.0.1:1']);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain('execution id must be a decimal integer');
    }
  });
});
