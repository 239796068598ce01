/**
 * The Schedule resource through the fake Kubernetes API server (real client-node, CRD schema
 * applied) and the real Playflow server (its ticker on): the operator declares the schedule in the
 * server, mirrors next/last run into the status, reports a bad cron, and removes it on deletion.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { ApiError, PlayflowClient } from '../../client/http.js';
import { loadConfig } from '../../server/config.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createLogger } from '../../common/logger.js';
import { startOperator, type RunningOperator } from '../../operator/main.js';
import { silentLogger } from '../../operator/log.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { FakeKubeServer, loadCrds } from '../fake-k8s/server.js';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { kubectl } from '../helpers/kubectl.js';
import { ROOT } from '../release/render.js';
import { condition, eventually } from './helpers.js';

const TOKEN = `op-${randomBytes(8).toString('hex')}`;
const G = { group: 'playflow.io', version: 'v1alpha1', plural: 'schedules' };

describe('Schedule resource', { timeout: 120_000 }, () => {
  const kube = new FakeKubeServer({ bookmarkIntervalMs: 300, crds: loadCrds(), namespaces: ['team-s'] });
  let db: TestDatabase;
  let server: RunningServer;
  let op: RunningOperator;
  let client: PlayflowClient;
  let custom: k8s.CustomObjectsApi;

  beforeAll(async () => {
    db = await createTestDatabase('pfsched');
    const config = loadConfig({
      DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1', PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      PLAYFLOW_API_TOKEN: TOKEN, LOG_LEVEL: 'silent',
    });
    server = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'silent' }) });
    await kube.start();
    client = new PlayflowClient({ baseUrl: server.address, token: TOKEN });
    await client.registerPlaybook('apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: noop, path: sched/noop}\nworkflow:\n  - step: start\n', 'sched/noop');
    custom = kube.kubeConfig('kubectl').makeApiClient(k8s.CustomObjectsApi);
    op = await startOperator({
      kubeConfig: kube.kubeConfig('operator'), serverUrl: server.address, apiToken: TOKEN, identity: 'op-1',
      leaderElection: { enabled: false }, baseBackoffMs: 50, maxBackoffMs: 500, informerBackoffMs: 50, resyncMs: 0,
      metricsPort: 0, metricsHost: '127.0.0.1', log: silentLogger, scheduleStatusRefreshMs: 1000,
    });
  });
  afterAll(async () => {
    await op?.stop();
    await kube.stop();
    await server?.stop();
    await db?.drop();
  });

  it('apply → server schedule + Ready with next/last run; bad cron → Invalid; delete → gone', async () => {
    const ns = 'team-s';
    await custom.createNamespacedCustomObject({
      ...G, namespace: ns,
      body: { apiVersion: 'playflow.io/v1alpha1', kind: 'Schedule', metadata: { name: 'tick' }, spec: { cron: '* * * * * *', path: 'sched/noop', payload: { x: 1 }, concurrencyPolicy: 'Forbid' } },
    });
    const ready = await eventually(() => {
      const obj = kube.getObject('schedules', ns, 'tick');
      expect(condition(obj, 'Ready')).toMatchObject({ status: 'True', reason: 'Scheduled' });
      return obj!;
    });
    expect(ready.status.scheduleName).toBe('k8s:team-s:tick');
    expect(ready.status.nextRun).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(ready.metadata.finalizers).toContain('playflow.io/cleanup');
    // defaults from the CRD schema reached the server
    expect(await client.getSchedule('k8s:team-s:tick')).toMatchObject({
      source: 'kubernetes', cron: '* * * * * *', timezone: 'UTC', path: 'sched/noop', payload: { x: 1 }, concurrency_policy: 'Forbid', missed_runs: 'RunOnce',
    });
    // the server fires it; the status follows (requeue at the next run)
    const fired = await eventually(() => {
      const obj = kube.getObject('schedules', ns, 'tick');
      expect(obj?.status?.lastExecutionId).toMatch(/^\d+$/);
      return obj!;
    }, 30_000);
    const ex = await client.getExecution(fired.status.lastExecutionId);
    expect(ex).toMatchObject({ path: 'sched/noop', payload: { x: 1 } });
    expect(ex.schedule_tick).toBeTruthy();
    // the API cannot take over the name
    await expect(client.putSchedule('k8s:team-s:tick', { cron: '* * * * *', path: 'sched/noop' })).rejects.toMatchObject({ status: 409 });

    // the CRD schema refuses a bad enum before the operator sees it
    await expect(custom.createNamespacedCustomObject({
      ...G, namespace: ns, body: { apiVersion: 'playflow.io/v1alpha1', kind: 'Schedule', metadata: { name: 'bad' }, spec: { cron: '* * * * *', path: 'x', concurrencyPolicy: 'Sometimes' } },
    })).rejects.toMatchObject({ code: 422 });

    // a cron the server refuses: Ready=False Invalid, naming the field
    const cur = await custom.getNamespacedCustomObject({ ...G, namespace: ns, name: 'tick' });
    await custom.replaceNamespacedCustomObject({ ...G, namespace: ns, name: 'tick', body: { ...cur, spec: { ...cur.spec, cron: '99 * * * *', suspend: true } } });
    await eventually(() => {
      const c = condition(kube.getObject('schedules', ns, 'tick'), 'Ready');
      expect(c).toMatchObject({ status: 'False', reason: 'Invalid' });
      expect(c!.message).toContain('cron');
    });

    await custom.deleteNamespacedCustomObject({ ...G, namespace: ns, name: 'tick' });
    await eventually(() => expect(kube.getObject('schedules', ns, 'tick')).toBeUndefined());
    await expect(client.getSchedule('k8s:team-s:tick')).rejects.toBeInstanceOf(ApiError);
  });
  it('examples/k8s/schedule.yaml with the real kubectl: apply, wait Ready, printer columns, delete', async () => {
    const ns = 'team-s';
    const file = `${ROOT}/examples/k8s/schedule.yaml`;
    const spec = parseYaml(readFileSync(file, 'utf8')).spec;
    await client.registerPlaybook('apiVersion: playflow.io/v2\nkind: Playbook\nmetadata: {name: weather, path: examples/weather-report}\nworkflow:\n  - step: start\n', 'examples/weather-report');
    const kubeconfig = kube.writeKubeconfig('kubectl', ns);
    expect(await kubectl(['-n', ns, 'apply', '-f', file], { kubeconfig })).toContain('schedule.playflow.io/weather-report-morning created');
    await kubectl(['-n', ns, 'wait', '--for=condition=Ready', 'schedule/weather-report-morning', '--timeout=60s'], { kubeconfig });
    // the server holds what the file declares
    const declared = await client.getSchedule('k8s:team-s:weather-report-morning');
    expect(declared).toMatchObject({
      source: 'kubernetes', cron: spec.cron, timezone: spec.timezone, path: spec.path, concurrency_policy: spec.concurrencyPolicy,
      missed_runs: spec.missedRuns, starting_deadline_seconds: spec.startingDeadlineSeconds, suspend: false,
    });
    // `kubectl get pfsched`: the CRD's printer columns, the next run mirrored from the server
    const table = await eventually(async () => {
      const out = await kubectl(['-n', ns, 'get', 'pfsched'], { kubeconfig });
      const [header, row] = out.trim().split('\n');
      expect(header.split(/\s{2,}/)).toEqual(expect.arrayContaining(['NAME', 'READY', 'CRON', 'PATH', 'SUSPEND', 'NEXT']));
      expect(row).toContain(declared.next_run!.replace('.000Z', 'Z'));
      return row;
    }, 30_000);
    expect(table).toMatch(/^weather-report-morning\s+True\s+0 30 6 \* \* \*\s+examples\/weather-report\s+false/);
    expect(await kubectl(['-n', ns, 'delete', '-f', file, '--wait=true'], { kubeconfig })).toContain('deleted');
    await expect(client.getSchedule('k8s:team-s:weather-report-morning')).rejects.toBeInstanceOf(ApiError);
  });
});
