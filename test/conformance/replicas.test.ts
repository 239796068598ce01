/**
 * Server processes, for real: two server processes on one database and one JetStream stream, each
 * with its own worker process, drive the same executions under concurrent load — no command runs
 * twice and no event is lost; then a server process is killed (SIGKILL) in the middle of a
 * 20-step execution and started again, and the execution completes with every step run once.
 * Every python call appends `<execution>:<step>:<item>` to a marker file, so duplicates show.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startHarness, type Harness } from './harness.js';
import { freePort } from '../../cli/dev/embedded-db.js';

let h: Harness;
let serverB: ChildProcess | undefined;
let urlB: string;
let portB: number;

const marker = () => path.join(h.tmp, 'runs.txt');
const pythonMark = `
      code: |
        def main(marker, execution, step, item):
            with open(marker, "a") as f:
                f.write(f"{execution}:{step}:{item}\\n")
            return item`;

function fanout(): string {
  return `apiVersion: playflow.io/v2
kind: Playbook
metadata: { name: fanout, path: replicas/fanout }
workflow:
  - step: start
    loop: { in: "{{ range(12) | list }}", iterator: i, mode: async }
    tool:
      kind: python${pythonMark}
      args: { marker: "{{ workload.marker }}", execution: "{{ execution_id }}", step: start, item: "{{ i }}" }
    next: done
  - step: done
    tool:
      kind: python${pythonMark}
      args: { marker: "{{ workload.marker }}", execution: "{{ execution_id }}", step: done, item: 0 }
`;
}

function chain(n: number): string {
  const steps = Array.from({ length: n }, (_, i) => `  - step: ${i === 0 ? 'start' : `s${i + 1}`}
    tool:
      kind: python${pythonMark}
      args: { marker: "{{ workload.marker }}", execution: "{{ execution_id }}", step: s${i + 1}, item: 0 }${i + 1 < n ? `\n    next: s${i + 2}` : ''}`);
  return `apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: { name: chain, path: replicas/chain }\nworkflow:\n${steps.join('\n')}\n`;
}

const startServerB = () => h.startServer(portB);

async function cliJson(args: string[]) {
  const r = await h.cli([...args, '--output', 'json']);
  if (r.code !== 0 && !r.stdout) throw new Error(`${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function waitEnd(id: string, server: string, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const x = await (await fetch(`${server}/api/execution/${id}`)).json() as { status: string };
      if (['completed', 'failed', 'cancelled'].includes(x.status)) return x;
    } catch {
      // a server being restarted
    }
    if (Date.now() > deadline) throw new Error(`execution ${id} did not end`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function runsOf(prefix: string): string[] {
  if (!existsSync(marker())) return [];
  return readFileSync(marker(), 'utf8').split('\n').filter((l) => l.startsWith(`${prefix}:`));
}

beforeAll(async () => {
  h = await startHarness({ workers: 0 });
  portB = await freePort();
  urlB = `http://127.0.0.1:${portB}`;
  serverB = await startServerB();
  writeFileSync(marker(), '');
  chmodSync(marker(), 0o666); // python steps run as another user (WORKER_PYTHON_USER) and append to it
  for (const [name, text] of [['fanout.yaml', fanout()], ['chain.yaml', chain(20)]]) {
    const file = path.join(h.tmp, name);
    writeFileSync(file, text);
    const r = await h.cli(['catalog', 'register', 'playbook', file]);
    expect(r.code, r.stderr).toBe(0);
  }
  await h.startWorker({ SERVER_API_URL: h.url });
  await h.startWorker({ SERVER_API_URL: urlB });
}, 180_000);

afterAll(async () => {
  serverB?.kill('SIGKILL');
  await h?.close();
});

describe('server replicas (processes)', () => {
  it('two server processes drive the same executions concurrently: no duplicate command, no lost event', async () => {
    const starts = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      fetch(`${i % 2 ? urlB : h.url}/api/run/playbook`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ path: 'replicas/fanout', payload: { marker: marker() } }),
      }).then((r) => r.json() as Promise<{ execution_id: string }>)));
    for (const { execution_id: id } of starts) {
      const x = await waitEnd(id, h.url);
      expect(x.status).toBe('completed');
      const lines = runsOf(id);
      expect(lines.length, `execution ${id} ran ${lines.length} calls`).toBe(13);
      expect(new Set(lines).size).toBe(13);
      const { events } = await cliJson(['execution', 'events', id]) as { events: Array<{ seq: number; name: string; command_id: number | null }> };
      expect(events.map((e) => e.seq)).toEqual(events.map((_, k) => k + 1));
      const done = events.filter((e) => e.name === 'call.done').map((e) => e.command_id);
      expect(done.length).toBe(13);
      expect(new Set(done).size).toBe(13);
    }
  }, 240_000);

  it('a server process killed in the middle of a 20-step execution and started again finishes it, every step run once', async () => {
    const start = await (await fetch(`${urlB}/api/run/playbook`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ path: 'replicas/chain', payload: { marker: marker() } }),
    })).json() as { execution_id: string };
    const id = start.execution_id;
    const deadline = Date.now() + 60_000;
    while (runsOf(id).length < 5) {
      if (Date.now() > deadline) throw new Error('the chain did not get going');
      await new Promise((r) => setTimeout(r, 20));
    }
    serverB!.kill('SIGKILL');
    await new Promise((r) => serverB!.once('exit', r));
    serverB = await startServerB();
    const x = await waitEnd(id, urlB, 180_000);
    expect(x.status).toBe('completed');
    const lines = runsOf(id);
    expect(new Set(lines).size).toBe(20);
    expect(lines.length).toBe(20);
  }, 240_000);
});
