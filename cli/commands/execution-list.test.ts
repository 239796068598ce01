/**
 * `playflow execution list` with --parent, --offset and --limit:
 * - as users run it: the built CLI (dist/, `npx tsc -p .`) spawned against a real server on a
 *   fresh PostgreSQL database (no worker: every execution stays `started`);
 * - in process, what it asks the client for: `view: 'summary'` for the table only.
 */
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { PlayflowClient } from '../../client/http.js';
import type { ExecutionList } from '../../common/protocol.js';
import { cli, ROOT, startCliServer, type CliServer } from '../../test/cli/helpers.js';
import { register } from './execution.js';

const EXAMPLE = join(ROOT, 'examples/hello_world.yaml');

describe('playflow execution list (subprocess, real server)', () => {
  let s: CliServer;
  /** Oldest first. */
  const top: string[] = [];
  const childrenOf: Record<string, string[]> = {};

  const run = async (parent?: string): Promise<string> => {
    const r = await s.api<{ execution_id: string }>('POST', '/api/run/playbook', {
      path: 'examples/hello_world', ...(parent ? { parent_execution_id: parent } : {}),
    });
    return r.execution_id;
  };
  /** The execution ids of a table (first column), in order. */
  const ids = (stdout: string) => stdout.trimEnd().split('\n').slice(1).map((l) => l.split(/\s+/)[0]);

  beforeAll(async () => {
    s = await startCliServer('pfcliexlist');
    const reg = await cli(['catalog', 'register', 'playbook', EXAMPLE, ...s.auth]);
    if (reg.code !== 0) throw new Error(reg.stderr);
    for (let i = 0; i < 3; i++) top.push(await run());
    childrenOf[top[0]!] = [await run(top[0]), await run(top[0])];
    childrenOf[top[1]!] = [await run(top[1])];
  });
  afterAll(async () => {
    await s?.close();
  });

  it('--parent lists exactly the children of that execution, newest first (table and json)', async () => {
    const t = await cli(['execution', 'list', '--parent', top[0]!, ...s.auth]);
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout.split('\n')[0]).toMatch(/^EXECUTION_ID\s+STATUS\s+PLAYBOOK\s+VERSION\s+STARTED\s+FINISHED$/);
    expect(ids(t.stdout)).toEqual([...childrenOf[top[0]!]!].reverse());

    const j = await cli(['execution', 'list', '--parent', top[1]!, ...s.auth, '-o', 'json']);
    expect(j.code, j.stderr).toBe(0);
    const body = JSON.parse(j.stdout) as ExecutionList;
    expect(body.executions.map((e) => [e.execution_id, e.parent_execution_id])).toEqual([[childrenOf[top[1]!]![0], top[1]]]);

    const none = await cli(['execution', 'list', '--parent', top[2]!, ...s.auth]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toBe('No executions found.\n');
  });

  it('--offset 1 skips the newest; with --limit it pages', async () => {
    const all = ids((await cli(['execution', 'list', ...s.auth])).stdout);
    expect(all).toHaveLength(6);
    const r = await cli(['execution', 'list', '--offset', '1', ...s.auth]);
    expect(r.code, r.stderr).toBe(0);
    expect(ids(r.stdout)).toEqual(all.slice(1));
    const page = await cli(['execution', 'list', '--offset', '2', '--limit', '2', ...s.auth, '-o', 'json']);
    expect(page.code, page.stderr).toBe(0);
    const body = JSON.parse(page.stdout) as ExecutionList;
    expect(body.executions.map((e) => e.execution_id)).toEqual(all.slice(2, 4));
    expect(body).toMatchObject({ offset: 2, limit: 2, count: 2 });
  });

  it('-o json keeps the full records (payload included)', async () => {
    const j = await cli(['execution', 'list', '--limit', '1', ...s.auth, '-o', 'json']);
    expect(j.code, j.stderr).toBe(0);
    const [e] = (JSON.parse(j.stdout) as ExecutionList).executions;
    expect(e).toHaveProperty('payload');
    expect(e).toHaveProperty('steps');
  });

  it('a bad --offset, --limit or --parent is refused naming the option, before any request', async () => {
    const cases: Array<[string[], string]> = [
      [['--offset', 'abc'], 'error: --offset must be a whole number, got "abc"\n'],
      [['--offset', '-1'], 'error: --offset must be a whole number, got "-1"\n'],
      [['--offset', '1.5'], 'error: --offset must be a whole number, got "1.5"\n'],
      [['--limit', '2x'], 'error: --limit must be a whole number of at least 1, got "2x"\n'],
      [['--limit', '0'], 'error: --limit must be a whole number of at least 1, got "0"\n'],
      [['--parent', 'x12'], 'error: --parent must be an execution id (a decimal integer), got "x12"\n'],
    ];
    for (const [args, message] of cases) {
      // a server that is not there: the refusal comes first
      const r = await cli(['execution', 'list', ...args, '--server', 'http://127.0.0.1:9']);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(message);
      expect(r.stdout).toBe('');
    }
    const j = await cli(['execution', 'list', '--offset', 'abc', ...s.auth, '-o', 'json']);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.stderr)).toEqual({ error: { code: 'cli_error', message: '--offset must be a whole number, got "abc"' } });
  });
});

describe('playflow execution list (in process): what it asks for', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    process.exitCode = undefined;
  });

  async function list(...args: string[]) {
    vi.restoreAllMocks();
    const empty: ExecutionList = { executions: [], count: 0, limit: 50, offset: 0 };
    const spy = vi.spyOn(PlayflowClient.prototype, 'listExecutions').mockResolvedValue(empty);
    vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const program = new Command().exitOverride();
    register(program);
    await program.parseAsync(['execution', 'list', '--server', 'http://playflow.test', ...args], { from: 'user' });
    expect(process.exitCode).toBeUndefined();
    expect(spy).toHaveBeenCalledTimes(1);
    return spy.mock.calls[0]![0];
  }

  it("the table asks for view 'summary', with parent, offset and limit", async () => {
    expect(await list('--parent', '12', '--offset', '3', '--limit', '5', '--status', 'running')).toEqual({
      status: 'running', path: undefined, parent: '12', limit: 5, offset: 3, view: 'summary',
    });
  });

  it('-o json and -o yaml do not pass view (the full records)', async () => {
    for (const format of ['json', 'yaml']) {
      const q = await list('--offset', '1', '-o', format);
      expect(q).not.toHaveProperty('view');
      expect(q).toMatchObject({ offset: 1 });
    }
  });
});
