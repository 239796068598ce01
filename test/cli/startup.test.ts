/**
 * What a CLI start loads. Every `playflow` invocation (help, an API call, a test that spawns one)
 * pays for the modules the command files import at the top, so the heavy ones — the TypeBox
 * contract, the playbook language (ajv, nunjucks), the database driver — are imported inside the
 * actions that need them. test/helpers/loaded-modules.ts records every module a start resolves.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI } from './helpers.js';
import { loadedModules } from '../helpers/loaded-modules.js';

/** The file URLs of the modules `playflow <args>` loaded. */
const loaded = (args: string[]) => loadedModules([CLI, ...args], { ...process.env, SERVER_API_URL: '', PLAYFLOW_API_TOKEN: '' });

const HEAVY = [/\/node_modules\/@sinclair\/typebox\//, /\/node_modules\/ajv\//, /\/node_modules\/nunjucks\//, /\/node_modules\/pg\//, /\/dist\/playbook\/index\.js$/, /\/dist\/common\/contract\/index\.js$/];

describe('CLI start', () => {
  it.each([
    [['--help']],
    [['execution', 'status', '--help']],
    // an API command fails to connect after loading everything its action needs
    [['execution', 'status', '1', '--server', 'http://127.0.0.1:9']],
  ])('playflow %j loads no schema library, playbook language or database driver', async (args) => {
    const urls = await loaded(args);
    expect(urls.some((u) => u.endsWith('/dist/cli/commands/index.js'))).toBe(true);
    for (const heavy of HEAVY) expect(urls.filter((u) => heavy.test(u))).toEqual([]);
  });

  it('loads the playbook language for the commands that parse one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pf-cli-start-'));
    const file = join(dir, 'p.yaml');
    await writeFile(file, 'apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: { name: p, path: p }\nworkflow:\n  - step: start\n    tool: { kind: python, code: "result = 1" }\n');
    const urls = await loaded(['playbook', 'validate', file]).finally(() => rm(dir, { recursive: true, force: true }));
    expect(urls.some((u) => u.endsWith('/dist/playbook/index.js'))).toBe(true);
  });
});
