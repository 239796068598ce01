/**
 * Every numeric option of the CLI refuses what is not a whole number (or is below its minimum),
 * naming the option, before any request: `Number.parseInt` read `--limit 2x` as 2 and `--after abc`
 * as NaN, which the client then dropped or sent. The built CLI as users run it, pointed at a port
 * where nothing listens, so any request would fail with a different message.
 */
import { describe, expect, it } from 'vitest';
import { cli } from './helpers.js';

const NOWHERE = ['--server', 'http://127.0.0.1:9'];

const cases: Array<[string[], string]> = [
  [['run', 'playbook', 'p', '--version', '2x'], '--version must be a whole number of at least 1, got "2x"'],
  [['execution', 'status', '1', '--watch', '--interval', '0'], '--interval must be a whole number of at least 1, got "0"'],
  [['execution', 'events', '1', '--after', 'abc'], '--after must be a whole number, got "abc"'],
  [['execution', 'events', '1', '--limit', '1.5'], '--limit must be a whole number of at least 1, got "1.5"'],
  [['catalog', 'get', 'playbook', 'p', '--version', '0'], '--version must be a whole number of at least 1, got "0"'],
  [['catalog', 'list', '--limit', '-3'], '--limit must be a whole number of at least 1, got "-3"'],
  [['credential', 'list', '--limit', '10x'], '--limit must be a whole number of at least 1, got "10x"'],
  [['credential', 'list', '--offset', 'next'], '--offset must be a whole number, got "next"'],
  [['schedule', 'set', 's', '--cron', '* * * * *', '--path', 'p', '--version', '1e3'], '--version must be a whole number of at least 1, got "1e3"'],
  [['schedule', 'set', 's', '--cron', '* * * * *', '--path', 'p', '--starting-deadline', '30s'], '--starting-deadline must be a whole number, got "30s"'],
  [['schedule', 'ticks', 's', '--limit', '0'], '--limit must be a whole number of at least 1, got "0"'],
  [['hook', 'set', 'h', '--path', 'p', '--insecure', '--version', 'latest'], '--version must be a whole number of at least 1, got "latest"'],
];

describe('numeric CLI options', () => {
  it.each(cases)('%j is refused naming the option, before any request', async (args, message) => {
    const r = await cli([...args, ...NOWHERE]);
    expect(r.stderr).toBe(`error: ${message}\n`);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
  });

  it('with -o json the refusal is the JSON error', async () => {
    const r = await cli(['catalog', 'list', '--limit', 'abc', '-o', 'json', ...NOWHERE]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stderr)).toEqual({ error: { code: 'cli_error', message: '--limit must be a whole number of at least 1, got "abc"' } });
  });

  it('credentials rotate-key refuses a bad --batch-size before it connects to the database', async () => {
    const r = await cli(['credentials', 'rotate-key', '--batch-size', '0', '--database-url', 'postgres://nobody@127.0.0.1:9/none']);
    expect(r.stderr).toBe('error: --batch-size must be a whole number of at least 1, got "0"\n');
    expect(r.code).toBe(1);
  });

  it.each([
    [['--concurrency', '1e1'], '--concurrency must be a whole number of at least 1, got "1e1"'],
    [['--concurrency', '0x10'], '--concurrency must be a whole number of at least 1, got "0x10"'],
    [['--concurrency', '0'], '--concurrency must be a whole number of at least 1, got "0"'],
    [['--grace', '30s'], '--grace must be a whole number, got "30s"'],
  ])('worker start %j is refused naming the option, before it connects anywhere', async (args, message) => {
    const r = await cli(['worker', 'start', ...args, '--broker', 'nats://127.0.0.1:9', '--server', 'http://127.0.0.1:9']);
    expect(r.stderr).toBe(`error: cannot start the worker: ${message}\n`);
    expect(r.code).toBe(1);
  });

  it('operator start refuses a --metrics-port that is not a port', async () => {
    const r = await cli(['operator', 'start', '--metrics-port', '80a']);
    expect(r.stderr).toContain('--metrics-port: expected a port number 0-65535, got "80a"');
    expect(r.code).toBe(1);
  });

  it.each([
    [['server', 'start', '--host', '127.0.0.1', '--port', '9'], 'server'],
    [['worker', 'start', '--broker', 'nats://127.0.0.1:9', '--server', 'http://127.0.0.1:9'], 'worker'],
  ])('%j refuses a PLAYFLOW_V8_INTERRUPT_BUDGET that is not bytes, naming it, before it connects anywhere', async (args, what) => {
    const r = await cli(args, { PLAYFLOW_V8_INTERRUPT_BUDGET: '8k', DATABASE_URL: 'postgres://nobody@127.0.0.1:9/none' });
    expect(r.stderr).toBe(`error: cannot start the ${what}: invalid setting PLAYFLOW_V8_INTERRUPT_BUDGET: expected bytes of bytecode from 1024 to 100000000, or "default" for V8's own, got "8k"\n`);
    expect(r.code).toBe(1);
  });
});
