import { randomBytes } from 'node:crypto';

export const BROKER_URL = process.env.BROKER_URL ?? 'nats://127.0.0.1:4222';

/** Stream, subject and consumer names unique to one suite (DESIGN.md §7). */
export function uniqueBrokerNames(prefix = 'T') {
  const id = `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`.toUpperCase();
  return {
    stream: `FLOW_COMMANDS_${id}`,
    subject: `flow.commands.${id.toLowerCase()}`,
    consumer: `worker-pool-${id.toLowerCase()}`,
  };
}
