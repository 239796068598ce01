/**
 * Operator at scale (issue 14): the real operator in its own process (bench/operator-child.ts)
 * against the fake Kubernetes API server (test/fake-k8s, in this process) holding N Playbooks, and
 * the stub Playflow server of the operator tests (test/operator/stub-server.ts: answers
 * registration, versions and deletes like the real server, without PostgreSQL — the figures are
 * the operator's, not the catalog's). For N = 1,000 and 10,000 it prints:
 *   - convergence: time until every Playbook is Ready at its generation (in the operator's cache);
 *   - the longest event-loop stall in the operator process (perf_hooks monitorEventLoopDelay max)
 *     during convergence, and during a full resync of the converged set;
 *   - the operator's RSS (max seen, and after the resync).
 * Usage: npm run build && node dist/bench/operator.js [N ...]   (default 1000 10000)
 *
 * The operator process gets the V8 heap it gets in the chart's pod. Node sizes V8's heap from the
 * cgroup memory limit (src/api/environment.cc, SetIsolateCreateParamsForNode → V8
 * ConfigureDefaults): the chart's 256Mi gives an old space of 256/4×2 = 128 MiB and 1 MiB
 * semi-spaces (heap_size_limit 131 MiB). Unconstrained — this host, 24 GiB — V8 allows 4 GiB and
 * collects lazily, so the RSS it shows says little about the pod: at 10,000 Playbooks it held 257 MiB
 * of heap, 70 MiB of it in use after a resync. BENCH_HEAP_MIB sets the old space (0: V8's default for the host).
 * BENCH_CHILD_PROF=<dir> writes a CPU profile of the operator process.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { FakeKubeServer, loadCrds } from '../test/fake-k8s/server.js';
import { StubPlayflowServer } from '../test/operator/stub-server.js';

interface Report {
  ready: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  heapLimit: number;
  stallMaxMs: number;
  stallP99Ms: number;
  stallsOver100: number;
}

const MiB = 1024 * 1024;
/** The old space V8 gets in the chart's 256Mi container (see the header). */
const HEAP_MIB = Number(process.env.BENCH_HEAP_MIB ?? 128);

async function run(n: number): Promise<void> {
  const kube = new FakeKubeServer({
    bookmarkIntervalMs: 5000, crds: loadCrds(new URL('../../crds/', import.meta.url)), namespaces: Array.from({ length: 20 }, (_, i) => `team-${i}`),
  });
  const stub = new StubPlayflowServer();
  await kube.start();
  await stub.start();
  for (let i = 0; i < n; i++) {
    kube.putObject('playbooks', {
      apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook',
      metadata: { name: `pb-${i}`, namespace: `team-${i % 20}` },
      spec: {
        description: `benchmark playbook ${i}`,
        workload: { index: i, region: 'eu-west-1', retries: 3 },
        workflow: [
          { step: 'start', next: 'fetch' },
          { step: 'fetch', desc: 'fetch data', tool: { kind: 'http', url: `https://api.example/items/${i}`, method: 'GET' }, next: 'end' },
          { step: 'end' },
        ],
      },
    });
  }
  const child = fork(fileURLToPath(new URL('./operator-child.js', import.meta.url)), [], {
    env: { ...process.env, BENCH_KUBE_URL: kube.url, BENCH_SERVER_URL: stub.url },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: [
      ...(HEAP_MIB > 0 ? [`--max-old-space-size=${HEAP_MIB}`, '--max-semi-space-size=1'] : []),
      ...(process.env.BENCH_CHILD_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CHILD_PROF}`] : []),
    ],
  });
  let last: Report = { ready: 0, rss: 0, heapUsed: 0, heapTotal: 0, external: 0, heapLimit: 0, stallMaxMs: 0, stallP99Ms: 0, stallsOver100: 0 };
  let maxRss = 0;
  let maxHeapTotal = 0;
  const waiters: Array<(r: Report) => void> = [];
  child.on('message', (r: Report) => {
    last = r;
    maxRss = Math.max(maxRss, r.rss);
    maxHeapTotal = Math.max(maxHeapTotal, r.heapTotal);
    for (const w of waiters.splice(0)) w(r);
  });
  const next = () => new Promise<Report>((resolve) => waiters.push(resolve));
  const started = Date.now();
  while ((await next()).ready < n) {
    if (Date.now() - started > 30 * 60_000) throw new Error(`not converged after 30 min: ${last.ready}/${n}`);
  }
  const convergeS = (Date.now() - started) / 1000;
  const statuses: Record<string, number> = {};
  for (const r of kube.requests) {
    const k = `${r.method} ${r.status}`;
    statuses[k] = (statuses[k] ?? 0) + 1;
  }
  if (process.env.BENCH_DEBUG) console.log(JSON.stringify({ requests: statuses }));
  const convergeStall = last.stallMaxMs;
  const convergeP99 = last.stallP99Ms;
  // Let the status-write echoes drain, then resync everything and watch the loop.
  await new Promise((r) => setTimeout(r, 3000));
  child.send({ cmd: 'reset' });
  const resyncAt = Date.now();
  child.send({ cmd: 'resync' });
  await new Promise((r) => setTimeout(r, Math.max(3000, n / 2)));
  child.send({ cmd: 'report' });
  const after = await next();
  console.log(JSON.stringify({
    playbooks: n,
    server: 'stub (test/operator/stub-server.ts)',
    converge_s: Number(convergeS.toFixed(1)),
    stall_max_ms_converging: Math.round(convergeStall),
    stall_p99_ms_converging: Math.round(convergeP99),
    stall_max_ms_resync: Math.round(after.stallMaxMs),
    stall_p99_ms_resync: Math.round(after.stallP99Ms),
    resync_observed_ms: Date.now() - resyncAt,
    heap_limit_mib: Math.round(after.heapLimit / MiB),
    rss_max_mib: Math.round(maxRss / MiB),
    rss_after_resync_mib: Math.round(after.rss / MiB),
    heap_used_mib: Math.round(after.heapUsed / MiB),
    heap_total_max_mib: Math.round(maxHeapTotal / MiB),
    external_mib: Math.round(after.external / MiB),
  }));
  child.send({ cmd: 'stop' });
  await new Promise((r) => child.once('exit', r));
  await stub.stop();
  await kube.stop();
}

const sizes = process.argv.slice(2).map(Number).filter((x) => x > 0);
for (const n of sizes.length ? sizes : [1000, 10_000]) await run(n);
