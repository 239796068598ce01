import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';

export const BROKER_URL = process.env.BROKER_URL ?? 'nats://127.0.0.1:4222';

/**
 * Stream, subject and consumer names unique to one suite (DESIGN.md §7). The subject is outside
 * `flow.commands.>`: a `playflow server start` with the defaults against the machine's NATS
 * leaves the stream FLOW_COMMANDS on it, which takes every subject under `flow.commands`, and a
 * stream of a suite whose subject overlapped it could not be created (every NATS suite failed).
 */
export function uniqueBrokerNames(prefix = 'T') {
  const id = `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`.toUpperCase();
  return {
    stream: `FLOW_COMMANDS_${id}`,
    subject: `playflow-test.${id.toLowerCase()}`,
    consumer: `worker-pool-${id.toLowerCase()}`,
  };
}

/**
 * Deletes a stream of uniqueBrokerNames once its suite is done: the streams are file-backed on
 * the machine's NATS, which CI shares with later runs, and one left per suite added up to
 * hundreds. A stream already gone, or a broker that is down, is not an error here.
 */
export async function deleteStream(stream: string): Promise<void> {
  const nc = await connect({ servers: BROKER_URL }).catch(() => null);
  if (!nc) return;
  try {
    await (await jetstreamManager(nc)).streams.delete(stream);
  } catch {
    // already gone
  } finally {
    await nc.close();
  }
}
