/**
 * The execution read helpers in process: the status block shows an error's message (not its
 * raw JSON), and a wait rides out a server that cannot be reached for a while.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError, PlayflowClient } from '../../client/http.js';
import type { ExecutionView } from '../../common/protocol.js';
import { printExecution, waitForEnd } from './execution.js';

function view(status: string, extra: Partial<ExecutionView> = {}): ExecutionView {
  return {
    execution_id: '7', path: 'audit/hello', version: 1, status, created_at: '2024-01-01T00:00:00Z', finished_at: null,
    parent_execution_id: null, result: null, error: null, steps: {}, ...extra,
  } as unknown as ExecutionView;
}

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => { out.push(String(s)); return true; });
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => { err.push(String(s)); return true; });
  return { out: () => out.join(''), err: () => err.join('') };
}

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

describe('printExecution', () => {
  it("shows a failed step's error message and code, not the traceback JSON", () => {
    const error = { code: 'python_error', message: 'ValueError: boom from python', data: { type: 'ValueError', traceback: `Traceback (most recent call last):\n${'  File "x.py", line 1, in main\n'.repeat(20)}` } };
    const c = capture();
    printExecution(view('failed', { error, steps: { start: { status: 'failed', runs: 1, error } } as never }));
    expect(c.out()).toContain('    start  failed  error: ValueError: boom from python (python_error)\n');
    expect(c.out()).toContain('  error:     ValueError: boom from python (python_error)\n');
    expect(c.out()).not.toContain('Traceback');
  });

  it('an error without a message is shown as before', () => {
    const c = capture();
    printExecution(view('failed', { error: { reason: 'x' } as never, steps: { s: { status: 'failed', runs: 1, error: 'plain text' } } as never }));
    expect(c.out()).toContain('  error: plain text\n');
    expect(c.out()).toContain('  error:     {"reason":"x"}\n');
  });
});

describe('waitForEnd', () => {
  /** A real client (its awaitExecution loop) whose reads answer `read`. */
  const clientReading = (read: () => Promise<ExecutionView>) => {
    const client = new PlayflowClient({ baseUrl: 'http://playflow.test' });
    vi.spyOn(client, 'getExecution').mockImplementation(read);
    return client;
  };
  const unreachable = () => new ApiError(0, 'unreachable', 'cannot reach the Playflow server at http://x (ECONNREFUSED)');

  it('retries while the server cannot be reached, saying so once on stderr', async () => {
    const answers: (ExecutionView | ApiError)[] = [view('running'), unreachable(), unreachable(), unreachable(), view('completed')];
    const client = clientReading(async () => { const a = answers.shift()!; if (a instanceof ApiError) throw a; return a; });
    const c = capture();
    const ex = await waitForEnd(client, '7', 'table', 100, 10_000);
    expect(ex.status).toBe('completed');
    expect(process.exitCode).toBeUndefined();
    expect(c.err().match(/retrying/g)).toHaveLength(1);
    expect(c.err()).toContain('ECONNREFUSED');
    expect(c.out()).toContain('execution 7: running\n');
    expect(c.out()).toContain('execution 7: completed\n');
  });

  it('gives up after the retry window, and does not retry other errors', async () => {
    const down = clientReading(async () => { throw unreachable(); });
    capture();
    await expect(waitForEnd(down, '7', 'json', 100, 600)).rejects.toThrow(/ECONNREFUSED/);
    const notFound = clientReading(async () => { throw new ApiError(404, 'not_found', 'no execution 7'); });
    await expect(waitForEnd(notFound, '7', 'json', 100, 10_000)).rejects.toThrow(/no execution 7/);
    expect(notFound.getExecution).toHaveBeenCalledTimes(1);
  });
});
