/** QueueService (stats for the WorkerPool controller and /metrics) and RuntimeService. */
import type { QueueStats, QueueThroughput } from '../../common/protocol.js';
import { badRequest } from '../errors.js';
import type { Db, QueueService, RuntimeRegistration, RuntimeService } from '../services.js';
import * as queue from '../store/queue.js';
import * as runtime from '../store/runtime.js';

export class PgQueueService implements QueueService {
  constructor(private readonly db: Db) {}
  stats(pool?: string): Promise<QueueStats> {
    return queue.stats(this.db.pool, pool);
  }

  async throughput(minutes: number): Promise<QueueThroughput> {
    if (!Number.isInteger(minutes) || minutes < 1 || minutes > 1440) throw badRequest('minutes must be an integer 1-1440');
    return { minutes: await queue.throughput(this.db.pool, minutes) };
  }
}

const KINDS = ['server', 'worker'];

export class PgRuntimeService implements RuntimeService {
  constructor(private readonly db: Db) {}

  async register(reg: RuntimeRegistration): Promise<void> {
    check(reg?.kind, reg?.name);
    if (reg.info !== undefined && (reg.info === null || typeof reg.info !== 'object' || Array.isArray(reg.info))) throw badRequest('info must be an object');
    await runtime.register(this.db.pool, reg);
  }

  async heartbeat(kind: RuntimeRegistration['kind'], name: string): Promise<void> {
    check(kind, name);
    await runtime.heartbeat(this.db.pool, kind, name);
  }

  list() {
    return runtime.list(this.db.pool);
  }
}

function check(kind: unknown, name: unknown) {
  if (typeof kind !== 'string' || !KINDS.includes(kind)) throw badRequest(`kind must be one of ${KINDS.join(', ')}`);
  if (typeof name !== 'string' || name.trim() === '' || name.length > 255) throw badRequest('name must be a non-empty string of at most 255 characters');
}
