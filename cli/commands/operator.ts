/**
 * `playflow operator start`: the Kubernetes controllers (Playbook, Credential, WorkerPool). Runs
 * until SIGTERM/SIGINT, then releases the leader lease and exits.
 */
import type { Command } from 'commander';

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
      if (cmd.metricsPort !== undefined) config.metricsPort = Number(cmd.metricsPort);
      if (cmd.leaderElect === false) config.leaderElection = { ...config.leaderElection, enabled: false };
      const op = await startOperator({ ...config, kubeConfig: loadKubeConfig() });
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
      });
      await op.stop();
    });
}
