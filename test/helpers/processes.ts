import type { ChildProcess } from 'node:child_process';

/**
 * Stops child processes as an operator would: SIGTERM, then SIGKILL for any still running after
 * `graceMs`. Resolves when every one has exited; one that already exited counts at once.
 */
export function stopProcesses(procs: ChildProcess[], graceMs = 5000): Promise<void> {
  return Promise.all(procs.map((p) => new Promise<void>((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve();
    p.once('exit', () => resolve());
    p.kill('SIGTERM');
    setTimeout(() => p.kill('SIGKILL'), graceMs).unref();
  }))).then(() => undefined);
}
