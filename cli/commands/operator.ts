/**
 * `playflow operator start`: the Kubernetes controllers (Playbook, Credential, WorkerPool). Runs
 * until SIGTERM/SIGINT, then releases the leader lease and exits.
 *
 * `playflow operator ensure-secrets --namespace NS --spec JSON`: creates the Secrets the chart
 * needs generated (encryption key, PostgreSQL password, API token) when they are absent, and never
 * changes an existing value (operator/ensure-secrets.ts; the chart's pre-install/pre-upgrade Job).
 */
import type { Command } from 'commander';
import { parsePort } from '../../common/config.js';
import { action, CliError, println } from './common.js';

export function register(program: Command): void {
  const operator = program.command('operator').description('Kubernetes operator (Playbook, Credential and WorkerPool resources)');
  operator
    .command('start')
    .description('Run the controllers: Playbook → catalog, Credential + Secret → credential store, WorkerPool → StatefulSet scale')
    .option('--namespaces <list>', 'comma-separated namespaces to watch (default WATCH_NAMESPACES; empty = all)')
    .option('--metrics-port <port>', 'port of /metrics, /healthz and /readyz (default OPERATOR_METRICS_PORT or 8081)')
    .option('--no-leader-elect', 'run without leader election (a single replica only)')
    .action(async (cmd: { namespaces?: string; metricsPort?: string; leaderElect?: boolean }) => {
      const { loadKubeConfig, operatorConfigFromEnv, startOperator } = await import('../../operator/main.js');
      const config = operatorConfigFromEnv();
      if (cmd.namespaces !== undefined) config.namespaces = cmd.namespaces.split(',').map((s) => s.trim()).filter(Boolean);
      if (cmd.metricsPort !== undefined) config.metricsPort = parsePort(cmd.metricsPort, '--metrics-port');
      if (cmd.leaderElect === false) config.leaderElection = { ...config.leaderElection, enabled: false };
      const op = await startOperator({ ...config, kubeConfig: loadKubeConfig() });
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
      });
      await op.stop();
    });

  operator
    .command('ensure-secrets')
    .description('Create generated Secrets (random keys, passwords, tokens) when absent; existing values are never changed')
    .requiredOption('--spec <json>', 'JSON array of {name, labels?, annotations?, keys: {key: {random: base64, bytes} | {random: alphanumeric, length} | {template}}}')
    .option('--namespace <ns>', 'namespace of the Secrets (default POD_NAMESPACE, else the kubeconfig context\'s)')
    .action(action(async (cmd: { spec: string; namespace?: string }) => {
      const k8s = await import('@kubernetes/client-node');
      const { ensureSecret, parseSecretSpecs, SecretSpecError } = await import('../../operator/ensure-secrets.js');
      const { loadKubeConfig } = await import('../../operator/main.js');
      const { messageOf } = await import('../../operator/kube.js');
      let specs;
      try {
        specs = parseSecretSpecs(cmd.spec);
      } catch (err) {
        if (err instanceof SecretSpecError) throw new CliError(err.message, 2);
        throw err;
      }
      const kc = loadKubeConfig();
      const namespace = cmd.namespace || process.env.POD_NAMESPACE || kc.getContextObject(kc.getCurrentContext())?.namespace || 'default';
      const core = kc.makeApiClient(k8s.CoreV1Api);
      for (const spec of specs) {
        try {
          const r = await ensureSecret(core, namespace, spec);
          // Names only: the values never reach the output.
          println(`${r.action} secret ${namespace}/${r.name}${r.keys.length ? ` (keys: ${r.keys.join(', ')})` : ''}`);
        } catch (err) {
          throw new CliError(`secret ${namespace}/${spec.name}: ${messageOf(err)}`, 1);
        }
      }
    }));
}
