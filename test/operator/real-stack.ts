/**
 * The real Playflow server (PostgreSQL, in-process broker, bearer token) behind a fault proxy, and
 * the fake API server with the CRDs, for operator acceptance tests that start their own operators.
 */
import { randomBytes } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { PlayflowClient } from '../../client/http.js';
import { SecretsClient } from '../../client/secrets.js';
import { loadConfig } from '../../server/config.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createLogger } from '../../common/logger.js';
import { startOperator, type OperatorOptions, type RunningOperator } from '../../operator/main.js';
import { silentLogger } from '../../operator/log.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pg.js';
import { FakeKubeServer, loadCrds } from '../fake-k8s/server.js';
import { FaultProxy } from './fault-proxy.js';

export const G = { group: 'playflow.io', version: 'v1alpha1' };

export interface RealStack {
  kube: FakeKubeServer;
  proxy: FaultProxy;
  client: PlayflowClient;
  secrets: SecretsClient;
  custom: k8s.CustomObjectsApi;
  core: k8s.CoreV1Api;
  operator(identity: string, extra?: Partial<OperatorOptions>): Promise<RunningOperator>;
  stopOperators(): Promise<void>;
  close(): Promise<void>;
}

/** `namespaces`: the namespaces the test writes to (creating into a missing one is 404, as on a cluster). */
export async function startRealStack(namespaces: string[] = []): Promise<RealStack> {
  const token = `op-${randomBytes(8).toString('hex')}`;
  const db: TestDatabase = await createTestDatabase('pften');
  const config = loadConfig({
    DATABASE_URL: db.url, BROKER_URL: 'memory', PORT: '0', HOST: '127.0.0.1',
    PLAYFLOW_ENCRYPTION_KEY: randomBytes(32).toString('base64'), PLAYFLOW_API_TOKEN: token, LOG_LEVEL: 'silent',
  });
  const server: RunningServer = await startServer({ config, handleSignals: false, logger: createLogger({ level: 'silent' }) });
  const proxy = new FaultProxy(server.address);
  await proxy.start();
  const kube = new FakeKubeServer({ bookmarkIntervalMs: 300, crds: loadCrds(), namespaces });
  await kube.start();
  const client = new PlayflowClient({ baseUrl: server.address, token });
  const kc = kube.kubeConfig('kubectl');
  const running: RunningOperator[] = [];
  return {
    kube, proxy, client,
    secrets: new SecretsClient(client),
    custom: kc.makeApiClient(k8s.CustomObjectsApi),
    core: kc.makeApiClient(k8s.CoreV1Api),
    async operator(identity, extra = {}) {
      const op = await startOperator({
        kubeConfig: kube.kubeConfig(identity), serverUrl: proxy.url, apiToken: token, identity,
        leaderElection: { enabled: false }, baseBackoffMs: 50, maxBackoffMs: 300, informerBackoffMs: 50, resyncMs: 0,
        log: silentLogger, ...extra,
      });
      running.push(op);
      return op;
    },
    async stopOperators() {
      while (running.length) await running.pop()!.stop();
      proxy.down = false;
      proxy.failing.clear();
    },
    async close() {
      while (running.length) await running.pop()!.stop();
      await proxy.stop();
      await kube.stop();
      await server.stop();
      await db.drop();
    },
  };
}
