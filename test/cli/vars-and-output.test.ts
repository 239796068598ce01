/**
 * `playflow vars get|set|delete`, and `-o table|json|yaml` on the catalog and execution read
 * commands, as subprocesses against a real server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { cli, ROOT, startCliServer, type CliServer } from './helpers.js';

const EXAMPLE = join(ROOT, 'examples/hello_world.yaml');

let s: CliServer;
let executionId: string;
/** An execution nothing sets variables on (started first, so `executionId` is the newest). */
let bareId: string;

beforeAll(async () => {
  s = await startCliServer('pfclivars');
  const reg = await cli(['catalog', 'register', 'playbook', EXAMPLE, ...s.auth]);
  if (reg.code !== 0) throw new Error(reg.stderr);
  const bare = await cli(['run', 'playbook', 'examples/hello_world', ...s.auth, '-o', 'json']);
  if (bare.code !== 0) throw new Error(bare.stderr);
  bareId = JSON.parse(bare.stdout).execution_id;
  const run = await cli(['run', 'playbook', 'examples/hello_world', '--payload', '{"name": "Ada"}', ...s.auth, '-o', 'json']);
  if (run.code !== 0) throw new Error(run.stderr);
  executionId = JSON.parse(run.stdout).execution_id;
});
afterAll(async () => {
  await s?.close();
});

describe('vars set', () => {
  it('sets several variables; values are JSON when they parse, else strings', async () => {
    const r = await cli(['vars', 'set', executionId, 'greeting=hello world', 'n=3', 'ok=true', 'o={"region": "eu"}', 'code="007"', 'eq=a=b', ...s.auth]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`set 6 variables on execution ${executionId}: greeting, n, ok, o, code, eq\n`);
    const api = await s.api('GET', `/api/vars/${executionId}`);
    expect(Object.fromEntries(Object.entries(api.variables).map(([k, v]) => [k, (v as { value: unknown }).value]))).toEqual({
      greeting: 'hello world', n: 3, ok: true, o: { region: 'eu' }, code: '007', eq: 'a=b',
    });
    expect(api.variables.n.type).toBe('user_defined');
  });

  it('--type and --source-step; -o json is the API body', async () => {
    const r = await cli(['vars', 'set', executionId, 'total=42', '--type', 'step_result', '--source-step', 'start', ...s.auth, '-o', 'json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ execution_id: executionId, variables_set: 1, var_names: ['total'] });
    expect(await s.api('GET', `/api/vars/${executionId}/total`)).toMatchObject({ type: 'step_result', source_step: 'start', value: 42 });
  });

  it('bad input: a missing =, an unknown --type, a malformed execution id (exit 1)', async () => {
    const noEq = await cli(['vars', 'set', executionId, 'novalue', ...s.auth]);
    expect(noEq.code).toBe(1);
    expect(noEq.stderr).toContain('vars set expects key=value, got "novalue"');
    const badType = await cli(['vars', 'set', executionId, 'a=1', '--type', 'magic', ...s.auth]);
    expect(badType.code).toBe(1);
    expect(badType.stderr).toContain('--type must be one of user_defined, step_result, computed, iterator_state');
    const badId = await cli(['vars', 'set', 'x1', 'a=1', ...s.auth]);
    expect(badId.code).toBe(1);
    expect(badId.stderr).toContain('execution id must be a decimal integer, got "x1"');
  });
});

describe('vars get', () => {
  it('all variables: an aligned table; json and yaml are the API body', async () => {
    const r = await cli(['vars', 'get', executionId, ...s.auth]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME +TYPE +SOURCE_STEP +VALUE$/);
    expect(lines).toContainEqual(expect.stringMatching(/^greeting +user_defined +hello world$/));
    expect(lines).toContainEqual(expect.stringMatching(/^o +user_defined +\{"region":"eu"\}$/));
    expect(lines).toContainEqual(expect.stringMatching(/^total +step_result +start +42$/));
    const valueAt = lines[0]!.indexOf('VALUE');
    for (const l of lines.slice(1)) expect(l[valueAt - 1]).toBe(' ');

    const api = await s.api('GET', `/api/vars/${executionId}`);
    expect(JSON.parse((await cli(['vars', 'get', executionId, ...s.auth, '-o', 'json'])).stdout)).toEqual(api);
    expect(parseYaml((await cli(['vars', 'get', executionId, ...s.auth, '-o', 'yaml'])).stdout)).toEqual(api);
  });

  it('one variable: a block with the value; each read counts an access', async () => {
    const r = await cli(['vars', 'get', executionId, 'o', ...s.auth]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^Execution: +${executionId}\nName: +o\nType: +user_defined\n`));
    expect(r.stdout).toContain('Access count:  1\n');
    expect(r.stdout).toContain('Value:\n  {\n    "region": "eu"\n  }\n');
    const json = JSON.parse((await cli(['vars', 'get', executionId, 'o', ...s.auth, '-o', 'json'])).stdout);
    expect(json).toMatchObject({ execution_id: executionId, var_name: 'o', value: { region: 'eu' }, access_count: 2 });
  });

  it('an execution without variables; an unknown execution or variable (404)', async () => {
    const empty = await cli(['vars', 'get', bareId, ...s.auth]);
    expect(empty.code).toBe(0);
    expect(empty.stdout).toBe(`No variables in execution ${bareId}.\n`);
    const unknown = await cli(['vars', 'get', '987654', ...s.auth]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('error: not found (404): execution 987654 not found\n');
    const missing = await cli(['vars', 'get', executionId, 'nope', ...s.auth]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`error: not found (404): variable 'nope' not found in execution ${executionId}\n`);
  });
});

describe('vars delete', () => {
  it('deletes; deleting again exits 1 saying not found', async () => {
    const r = await cli(['vars', 'delete', executionId, 'greeting', ...s.auth]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`variable greeting deleted from execution ${executionId}\n`);
    const api = await s.api('GET', `/api/vars/${executionId}`);
    expect(api.variables).not.toHaveProperty('greeting');
    const again = await cli(['vars', 'delete', executionId, 'greeting', ...s.auth, '-o', 'json']);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stdout)).toEqual({ execution_id: executionId, var_name: 'greeting', deleted: false });
    expect(JSON.parse(again.stderr).error.message).toBe(`variable 'greeting' not found in execution ${executionId}`);
  });
});

describe('--output on the catalog and execution read commands', () => {
  it('catalog list: aligned table; json and yaml are the API body', async () => {
    const r = await cli(['catalog', 'list', ...s.auth]);
    expect(r.code).toBe(0);
    const [header, row] = r.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^PATH +VERSION +NAME +CATALOG_ID +CREATED$/);
    expect(row).toMatch(/^examples\/hello_world +1 +hello_world +\d+ +\d{4}-/);
    expect(row!.indexOf(' hello_world ') + 1).toBe(header!.indexOf('NAME'));
    const api = await s.api('GET', '/api/catalog/playbooks');
    expect(JSON.parse((await cli(['catalog', 'list', ...s.auth, '-o', 'json'])).stdout)).toEqual(api);
    expect(parseYaml((await cli(['catalog', 'list', ...s.auth, '-o', 'yaml'])).stdout)).toEqual(api);
    expect((await cli(['catalog', 'list', '--prefix', 'none/', ...s.auth])).stdout).toBe('No playbooks found.\n');
  });

  it('catalog get: the readable header + YAML; yaml is the API body', async () => {
    const r = await cli(['catalog', 'get', 'playbook', 'examples/hello_world', ...s.auth]);
    expect(r.stdout).toMatch(/^# examples\/hello_world version 1 \(catalog_id \d+, /);
    const yaml = parseYaml((await cli(['catalog', 'get', 'playbook', 'examples/hello_world', ...s.auth, '-o', 'yaml'])).stdout);
    expect(yaml).toEqual(await s.api('GET', '/api/catalog/playbook/examples/hello_world'));
  });

  it('execution list: aligned table; execution status and events as yaml', async () => {
    const r = await cli(['execution', 'list', ...s.auth]);
    expect(r.code).toBe(0);
    const [header, row] = r.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^EXECUTION_ID +STATUS +PLAYBOOK +VERSION +STARTED +FINISHED$/);
    expect(row).toMatch(new RegExp(`^${executionId} +\\w+ +examples/hello_world +1 +\\d{4}-`));
    expect(row!.indexOf('examples/')).toBe(header!.indexOf('PLAYBOOK'));
    expect(parseYaml((await cli(['execution', 'list', ...s.auth, '-o', 'yaml'])).stdout)).toEqual(await s.api('GET', '/api/executions'));
    expect((await cli(['execution', 'list', '--status', 'failed', ...s.auth])).stdout).toBe('No executions found.\n');

    const status = parseYaml((await cli(['execution', 'status', executionId, ...s.auth, '-o', 'yaml'])).stdout);
    expect(status).toEqual(await s.api('GET', `/api/execution/${executionId}`));
    const events = parseYaml((await cli(['execution', 'events', executionId, ...s.auth, '-o', 'yaml'])).stdout);
    const page = await s.api('GET', `/api/events/${executionId}`);
    expect(events).toEqual({ execution_id: executionId, events: page.events });
    const none = await cli(['execution', 'events', executionId, '--after', '1000', ...s.auth]);
    expect(none.stdout).toBe('No events after seq 1000.\n');
  });

  it('`-o text` (the earlier default) is still the table; an unknown format names the allowed ones', async () => {
    const text = await cli(['execution', 'list', ...s.auth, '-o', 'text']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^EXECUTION_ID /);
    for (const args of [['catalog', 'list'], ['execution', 'status', executionId], ['credential', 'list'], ['vars', 'get', executionId]]) {
      const r = await cli([...args, ...s.auth, '-o', 'xml']);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('unknown output format "xml"; allowed: table, json, yaml');
    }
  });
});
