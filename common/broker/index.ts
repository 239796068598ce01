/** Broker factory: `memory` (in-process) or a NATS URL (JetStream). */
import { JetStreamBroker } from './jetstream.js';
import { MemoryBroker } from './memory.js';
import type { Broker, BrokerSettings } from './types.js';
import { type Logger } from '../logger.js';

export * from './types.js';
export { JetStreamBroker } from './jetstream.js';
export { MemoryBroker } from './memory.js';

export function createBroker(url: string, settings: Partial<BrokerSettings> = {}, logger?: Logger): Broker {
  if (url === 'memory' || url === 'memory://') return new MemoryBroker(settings, logger);
  return new JetStreamBroker({ url, ...settings, logger });
}
