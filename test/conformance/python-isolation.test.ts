/**
 * Python isolation with a real worker process (issue 20 items 1 and 8): the worker runs with an
 * API token and a broker URL with credentials in its environment; a python step looks for them in
 * its own environment and in every /proc/<pid>/environ it can open (its parent's first) and finds
 * nothing. A worker killed with SIGKILL during a call leaves no interpreter and no process the
 * step started.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startHarness, type Harness } from './harness.js';

const TOKEN = 'tok-isolation-7f3a9c2e';
let h: Harness;

async function until<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Running (a zombie waiting for a reaper that never comes in a container counts as gone). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
};

async function register(name: string, yaml: string) {
  const file = path.join(h.tmp, `${name}.yaml`);
  writeFileSync(file, yaml);
  expect((await h.cli(['catalog', 'register', 'playbook', file])).code).toBe(0);
}

async function runAndWait(pbPath: string, payload: object) {
  const r = await h.cli(['run', 'playbook', pbPath, '--payload', JSON.stringify(payload), '--wait', '--output', 'json']);
  return JSON.parse(r.stdout);
}

beforeAll(async () => {
  h = await startHarness({ workers: 0 });
}, 120_000);

afterAll(async () => {
  await h?.close();
});

describe('python isolation', () => {
  it('a python step finds no token or broker URL in os.environ nor in /proc/$PPID/environ (or any other it can open)', async () => {
    // the broker URL with credentials the worker has in its environment (nats-server ignores them)
    const brokerUrl = h.env.BROKER_URL!.replace('nats://', 'nats://pfuser:pfsecret9@');
    await h.startWorker({ PLAYFLOW_API_TOKEN: TOKEN, BROKER_URL: brokerUrl });
    await register('snoop', `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: snoop, path: isolation/snoop }
workflow:
  - step: snoop
    tool:
      kind: python
      code: |
        import os
        def main():
            needles = ["${TOKEN}", "pfsecret9"]
            found = [k for k, v in os.environ.items() if any(n in v for n in needles)]
            readable = []
            ppid = os.getppid()
            pids = [str(ppid)] + [p for p in os.listdir("/proc") if p.isdigit() and p != str(ppid)]
            for pid in pids:
                try:
                    with open("/proc/%s/environ" % pid, "rb") as f:
                        data = f.read().decode("utf-8", "replace")
                except OSError:
                    continue
                readable.append(pid)
                if any(n in data for n in needles):
                    found.append("/proc/%s/environ" % pid)
            parent = "unreadable"
            try:
                open("/proc/%d/environ" % ppid, "rb").read()
                parent = "readable"
            except OSError as e:
                parent = type(e).__name__
            return {"found": found, "parent_environ": parent, "uid": os.getuid()}
`);
    const done = await runAndWait('isolation/snoop', {});
    expect(done.status).toBe('completed');
    expect(done.result.found).toEqual([]);
    expect(done.result.parent_environ).toBe('PermissionError');
    if (process.getuid?.() === 0) expect(done.result.uid).not.toBe(0);
  }, 120_000);

  it('a SIGKILLed worker leaves no interpreter and no process its step started', async () => {
    for (const w of h.workers) if (w.exitCode === null) w.kill('SIGKILL');
    const worker = await h.startWorker();
    const marker = path.join(h.tmp, 'spawned.txt');
    await register('spawner', `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: spawner, path: isolation/spawner }
workflow:
  - step: spawn
    tool:
      kind: python
      code: |
        import os, subprocess, time
        def main(marker):
            child = subprocess.Popen(["sleep", "300"])
            with open(marker, "w") as f:
                f.write("%d %d\\n" % (os.getpid(), child.pid))
            time.sleep(300)
      args: { marker: "{{ workload.marker }}" }
`);
    const run = await h.cli(['run', 'playbook', 'isolation/spawner', '--payload', JSON.stringify({ marker }), '--output', 'json']);
    expect(run.code).toBe(0);
    const [interpreter, sleeper] = await until('the step to start its process', () =>
      existsSync(marker) && readFileSync(marker, 'utf8').trim().split(' ').length === 2 && readFileSync(marker, 'utf8').trim().split(' ').map(Number));
    expect(alive(interpreter) && alive(sleeper)).toBe(true);
    worker.kill('SIGKILL');
    await until('the interpreter and the process it started to be gone', () => !alive(interpreter) && !alive(sleeper), 15_000);
  }, 120_000);
});
