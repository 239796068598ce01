/**
 * The operator process of bench/operator.ts: starts the real operator (no leader election) against
 * the URLs it is given and reports, once a second over IPC, its RSS, heap, the event-loop delay
 * monitor's maximum and how many Playbooks its cache holds Ready at their current generation.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import * as k8s from '@kubernetes/client-node';
import { startOperator } from '../operator/main.js';
import { silentLogger } from '../operator/log.js';

const kc = new k8s.KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'fake', server: process.env.BENCH_KUBE_URL!, skipTLSVerify: true }],
  users: [{ name: 'op', token: 'bench-operator' }],
  contexts: [{ name: 'fake', cluster: 'fake', user: 'op' }],
  currentContext: 'fake',
});
const monitor = monitorEventLoopDelay({ resolution: 10 });
monitor.enable();
const op = await startOperator({
  kubeConfig: kc, serverUrl: process.env.BENCH_SERVER_URL!, identity: 'bench', leaderElection: { enabled: false },
  resyncMs: 0, log: silentLogger, workers: Number(process.env.BENCH_WORKERS ?? 0) || undefined,
});
const report = () => {
  let ready = 0;
  for (const o of op.informers[0]!.playbooks.values()) {
    if (o.status?.observedGeneration === o.metadata.generation && o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) ready += 1;
  }
  const mem = process.memoryUsage();
  process.send!({ ready, rss: mem.rss, heapUsed: mem.heapUsed, heapTotal: mem.heapTotal, external: mem.external, heapLimit: getHeapStatistics().heap_size_limit,
    stallMaxMs: monitor.max / 1e6, stallP99Ms: monitor.percentile(99) / 1e6, stallsOver100: monitor.max >= 100e6 ? 1 : 0 });
};
setInterval(report, 1000);
process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'reset') monitor.reset();
  if (m.cmd === 'resync') void op.informers[0]!.playbooks.resync();
  if (m.cmd === 'report') report();
  if (m.cmd === 'stop') void op.stop().then(() => process.exit(0));
});
