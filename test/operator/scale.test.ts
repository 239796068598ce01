/**
 * Scale (issue 14): 3,000 Playbooks against the fake API server and the stub Playflow server. Once
 * they are registered, a full resync — every object reconciled again, all of them in sync — must
 * never block the event loop for 100 ms or more. Sampled with perf_hooks.monitorEventLoopDelay and a
 * 10 ms timer that also reads the process's CPU time: the assertion is on a count of stalled turns
 * (work holding the loop ≥ 100 ms), not on a wall time. Before the indexes, the memoised spec hash
 * and the yielding workers, this resync blocked the loop ~1.8 s.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeServer, loadCrds } from '../fake-k8s/server.js';
import { startOperator, type RunningOperator } from '../../operator/main.js';
import { silentLogger } from '../../operator/log.js';
import { StubPlayflowServer } from './stub-server.js';
import { eventually } from './helpers.js';

const N = 3000;
const STALL_MS = 100;

/** Loop turns ≥ STALL_MS apart (10 ms timer), with the CPU time this process spent meanwhile. */
class LoopTurns {
  readonly late: Array<{ wallMs: number; cpuMs: number }> = [];
  private timer?: NodeJS.Timeout;
  private last = 0;
  private lastCpu = 0;
  start() {
    const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
    this.last = performance.now();
    this.lastCpu = cpu();
    const tick = () => {
      const now = performance.now();
      const c = cpu();
      if (now - this.last >= STALL_MS) this.late.push({ wallMs: Math.round(now - this.last), cpuMs: Math.round(c - this.lastCpu) });
      this.last = now;
      this.lastCpu = c;
      this.timer = setTimeout(tick, 10);
    };
    this.timer = setTimeout(tick, 10);
  }
  stop() {
    clearTimeout(this.timer);
  }
}

describe('operator at 3,000 Playbooks', { timeout: 300_000 }, () => {
  const kube = new FakeKubeServer({ bookmarkIntervalMs: 1000, crds: loadCrds(), namespaces: Array.from({ length: 10 }, (_, i) => `team-${i}`) });
  const stub = new StubPlayflowServer();
  let op: RunningOperator | undefined;

  beforeAll(async () => {
    await kube.start();
    await stub.start();
    for (let i = 0; i < N; i++) {
      kube.putObject('playbooks', {
        apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook',
        metadata: { name: `pb-${i}`, namespace: `team-${i % 10}` },
        spec: { workload: { i }, workflow: [{ step: 'start', next: 'work' }, { step: 'work', desc: `step of ${i}`, next: 'end' }, { step: 'end' }] },
      });
    }
  });
  afterAll(async () => {
    await op?.stop();
    await stub.stop();
    await kube.stop();
  });

  const reconciled = async (o: RunningOperator) =>
    (await o.metrics.reconciles.get()).values.filter((v) => v.labels.controller === 'playbook').reduce((n, v) => n + v.value, 0);

  it('a resync of every in-sync Playbook never stalls the event loop for 100 ms', async () => {
    op = await startOperator({
      kubeConfig: kube.kubeConfig('op-scale'), serverUrl: stub.url, identity: 'op-scale',
      leaderElection: { enabled: false }, resyncMs: 0, log: silentLogger,
    });
    const running = op;
    await eventually(() => {
      let ready = 0;
      for (const o of running.informers[0]!.playbooks.values()) {
        if (o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') && o.status.observedGeneration === o.metadata.generation) ready += 1;
      }
      expect(ready).toBe(N);
    }, 240_000, 250);
    expect(stub.catalog.size).toBe(N);
    const posts = stub.calls.length;
    await eventually(async () => {
      const a = await reconciled(running);
      await new Promise((r) => setTimeout(r, 300));
      expect(await reconciled(running)).toBe(a); // the queue has drained
    }, 30_000, 0);

    const before = await reconciled(running);
    const monitor = monitorEventLoopDelay({ resolution: 10 });
    const turns = new LoopTurns();
    monitor.enable();
    turns.start();
    running.informers[0]!.playbooks.resync();
    await eventually(async () => expect(await reconciled(running)).toBeGreaterThanOrEqual(before + N), 60_000, 20);
    // A slice that blocked the loop is recorded by the monitor's next timer tick: keep it on for a
    // few ticks after the last reconcile, or a fast resync ends before any sample is taken.
    await new Promise((r) => setTimeout(r, 50));
    monitor.disable();
    turns.stop();

    // A stall is a loop turn that kept the loop ≥ 100 ms (the monitor's delay) while this process
    // spent ≥ 100 ms of CPU in it: the work blocked the loop. A turn as late with little CPU spent
    // is the OS giving the CPU to other processes (a loaded CI machine), not a blocked loop.
    const stalls = turns.late.filter((t) => t.cpuMs >= STALL_MS);
    expect({ stalls: stalls.length, samples: monitor.count > 0 }, JSON.stringify({ monitorMaxMs: Math.round(monitor.max / 1e6), late: turns.late }))
      .toEqual({ stalls: 0, samples: true });
    expect(stub.calls.length).toBe(posts); // in sync: the resync called the server for nothing
  });
});
