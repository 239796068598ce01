/**
 * Records Kubernetes Events (core/v1, which `kubectl describe` and `kubectl get events` show) on
 * the custom resources. Like client-go's recorder it aggregates: the same reason and message on
 * the same object within ten minutes bumps `count`/`lastTimestamp` of the existing Event instead
 * of creating another. Recording never throws — an Event is best effort.
 */
import { randomBytes } from 'node:crypto';
import type { KubeClients } from './kube.js';
import { mergePatchOptions } from './kube.js';
import type { Logger } from './log.js';
import { CONTROLLER_NAME } from './types.js';

export interface InvolvedObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; uid?: string; resourceVersion?: string };
}

const AGGREGATE_MS = 10 * 60_000;

export class EventRecorder {
  private readonly recent = new Map<string, { name: string; count: number; at: number }>();

  constructor(private readonly clients: KubeClients, private readonly identity: string, private readonly log: Logger) {}

  async record(obj: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const ns = obj.metadata.namespace;
    const key = `${ns}/${obj.metadata.uid ?? obj.metadata.name}/${type}/${reason}/${message}`;
    const now = new Date();
    const ts = now.toISOString().replace(/\.\d+Z$/, 'Z');
    try {
      const prev = this.recent.get(key);
      if (prev && now.getTime() - prev.at < AGGREGATE_MS) {
        prev.count += 1;
        prev.at = now.getTime();
        await this.clients.core.patchNamespacedEvent(
          { namespace: ns, name: prev.name, body: { count: prev.count, lastTimestamp: ts } }, mergePatchOptions,
        );
        return;
      }
      const name = `${obj.metadata.name}.${randomBytes(8).toString('hex')}`;
      await this.clients.core.createNamespacedEvent({
        namespace: ns,
        body: {
          metadata: { name, namespace: ns },
          involvedObject: {
            apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, namespace: ns,
            uid: obj.metadata.uid, resourceVersion: obj.metadata.resourceVersion,
          },
          reason,
          message,
          type,
          count: 1,
          firstTimestamp: now,
          lastTimestamp: now,
          source: { component: CONTROLLER_NAME },
          reportingComponent: CONTROLLER_NAME,
          reportingInstance: this.identity,
        },
      });
      this.recent.set(key, { name, count: 1, at: now.getTime() });
      if (this.recent.size > 5000) {
        for (const [k, v] of this.recent) if (now.getTime() - v.at > AGGREGATE_MS) this.recent.delete(k);
      }
    } catch (err) {
      this.recent.delete(key);
      this.log.warn({ reason, object: `${ns}/${obj.metadata.name}`, err: String(err) }, 'could not record event');
    }
  }
}
