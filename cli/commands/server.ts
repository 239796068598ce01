/**
 * `playflow server start [--port N] [--host H]`: the API server (settings: server/config.ts).
 * Exits non-zero with one line naming the problem when a setting is malformed or the database
 * or port is unavailable.
 */
import type { Command } from 'commander';
import { applyInterruptBudget, interruptBudget } from '../../common/v8-tiering.js';
import { ConfigError, loadConfig, parsePort } from '../../server/config.js';

export function register(program: Command): void {
  const server = program.command('server').description('The Playflow API server');
  server
    .command('start')
    .description('Start the API server (env: DATABASE_URL, BROKER_URL, PORT, PLAYFLOW_API_TOKEN, …)')
    .option('--port <port>', 'listening port (env PORT, default 8082)')
    .option('--host <host>', 'listening address (env HOST, default 0.0.0.0)')
    .action(async (opts: { port?: string; host?: string }) => {
      try {
        const overrides: { port?: number; host?: string } = {};
        if (opts.port !== undefined) overrides.port = parsePort(opts.port, '--port');
        if (opts.host !== undefined) overrides.host = opts.host;
        const env = { ...process.env };
        if (overrides.port !== undefined) env.PORT = String(overrides.port); // keeps the default serverUrl on the chosen port
        const config = loadConfig(env, overrides);
        const budget = interruptBudget(env); // a malformed value fails before anything starts
        const { startServer } = await import('../../server/main.js');
        await startServer({ config });
        applyInterruptBudget(budget); // once listening: see common/v8-tiering.ts
      } catch (err) {
        const message = err instanceof ConfigError ? `invalid setting ${err.message}` : err instanceof Error ? err.message : String(err);
        process.stderr.write(`error: cannot start the server: ${message}\n`);
        process.exit(1);
      }
    });
}
