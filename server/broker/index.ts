/** Broker factory: `memory` (in-process) or a NATS URL (JetStream). */
import { JetStreamBroker } from './jetstream.js';
import { MemoryBroker } from './memory.js';
import type { Broker, BrokerLogger, BrokerSettings } from './types.js';

export * from './types.js';
export { JetStreamBroker } from './jetstream.js';
export { MemoryBroker } from './memory.js';

export function createBroker(url: string, settings: Partial<BrokerSettings> = {}, logger?: BrokerLogger): Broker {
  if (url === 'memory' || url === 'memory://') return new MemoryBroker(settings, logger);
  return new JetStreamBroker({ url, ...settings, logger });
}
