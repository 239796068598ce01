/**
 * Leader election on a coordination.k8s.io/v1 Lease, following client-go's leaderelection:
 *
 * - every `retryPeriod` a candidate reads the Lease; it takes it when there is none, when it is
 *   free (no holder) or when the holder has not renewed for `leaseDuration` — measured on the
 *   candidate's own clock from the moment it last saw the record change, so clock skew between
 *   pods does not matter. Writes carry the resourceVersion read, so two candidates racing for the
 *   same Lease cannot both win (the second gets 409);
 * - the leader renews every `retryPeriod`; if it cannot renew within `renewDeadline` it stops
 *   leading (callbacks) before anyone else may take over (`renewDeadline < leaseDuration`);
 * - on a graceful stop the leader releases the Lease (holder cleared), so a successor need not
 *   wait for expiry.
 *
 * Defaults are client-go's: lease 15 s, renew deadline 10 s, retry 2 s.
 */
import { V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import type { KubeClients } from './kube.js';
import { isConflict, isNotFound, messageOf } from './kube.js';
import type { Logger } from './log.js';

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  onNewLeader?: (identity: string) => void;
}

/** Lease times are MicroTime (RFC 3339 with microseconds); a plain Date would serialise with millis. */
const micro = (d: Date): V1MicroTime => new V1MicroTime(d.getTime());

export class LeaderElector {
  private leading = false;
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private observed?: { holder: string; renewTime: string; resourceVersion?: string; at: number };
  private lastRenew = 0;
  private readonly leaseMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryMs: number;
  private loop?: Promise<void>;
  private wake?: () => void;

  constructor(private readonly clients: KubeClients, private readonly opts: LeaderElectionOptions, private readonly log: Logger) {
    this.leaseMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryMs = opts.retryPeriodMs ?? 2_000;
    if (!(this.renewDeadlineMs < this.leaseMs)) throw new Error('leader election: renewDeadline must be shorter than leaseDuration');
    if (!(this.retryMs < this.renewDeadlineMs)) throw new Error('leader election: retryPeriod must be shorter than renewDeadline');
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.stopped = false;
    this.loop = this.run();
  }

  /** Stops campaigning; a leader releases the Lease first. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    if (this.leading) {
      await this.release();
      this.setLeading(false);
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.tryAcquireOrRenew();
      } catch (err) {
        this.log.warn({ err: messageOf(err), lease: this.opts.name }, 'leader election: lease update failed');
      }
      if (this.leading && Date.now() - this.lastRenew > this.renewDeadlineMs) {
        this.log.warn({ lease: this.opts.name }, 'leader election: renew deadline passed; stepping down');
        this.setLeading(false);
      }
      await new Promise<void>((resolve) => {
        this.timer = setTimeout(resolve, this.retryMs * (this.leading ? 1 : 1 + Math.random() * 0.2));
        this.wake = () => {
          if (this.timer) clearTimeout(this.timer);
          resolve();
        };
      });
    }
  }

  private setLeading(v: boolean): void {
    if (this.leading === v) return;
    this.leading = v;
    this.log.info({ identity: this.opts.identity, lease: `${this.opts.namespace}/${this.opts.name}` }, v ? 'became leader' : 'stopped leading');
    if (v) this.opts.onStartedLeading();
    else this.opts.onStoppedLeading();
  }

  private spec(now: Date, acquire: Date) {
    return {
      holderIdentity: this.opts.identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(this.leaseMs / 1000)),
      acquireTime: micro(acquire),
      renewTime: micro(now),
    };
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const { namespace, name, identity } = this.opts;
    const now = new Date();
    let lease: V1Lease;
    try {
      lease = await this.clients.coordination.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.clients.coordination.createNamespacedLease({
          namespace,
          body: { metadata: { name, namespace }, spec: { ...this.spec(now, now), leaseTransitions: 0 } },
        });
      } catch (e) {
        if (isConflict(e)) return; // someone else created it first
        throw e;
      }
      this.lastRenew = Date.now();
      this.setLeading(true);
      return;
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const renewTime = spec.renewTime ? new Date(spec.renewTime as unknown as string).toISOString() : '';
    // Track when the record last changed, on our clock.
    if (!this.observed || this.observed.holder !== holder || this.observed.renewTime !== renewTime) {
      this.observed = { holder, renewTime, resourceVersion: lease.metadata?.resourceVersion, at: Date.now() };
      if (holder && holder !== identity) this.opts.onNewLeader?.(holder);
    }
    const durationMs = (spec.leaseDurationSeconds ?? Math.ceil(this.leaseMs / 1000)) * 1000;
    const expired = Date.now() > this.observed.at + durationMs;
    if (holder && holder !== identity && !expired) {
      if (this.leading) this.setLeading(false);
      return;
    }
    const taking = holder !== identity;
    const acquire = taking ? now : spec.acquireTime ? new Date(spec.acquireTime as unknown as string) : now;
    const body: V1Lease = {
      ...lease,
      spec: {
        ...spec,
        ...this.spec(now, acquire),
        leaseTransitions: (spec.leaseTransitions ?? 0) + (taking ? 1 : 0),
      },
    };
    try {
      const updated = await this.clients.coordination.replaceNamespacedLease({ namespace, name, body });
      this.observed = {
        holder: identity,
        renewTime: new Date(updated.spec?.renewTime as unknown as string).toISOString(),
        resourceVersion: updated.metadata?.resourceVersion,
        at: Date.now(),
      };
    } catch (err) {
      if (isConflict(err)) return; // lost a race; re-read next round
      throw err;
    }
    this.lastRenew = Date.now();
    this.setLeading(true);
  }

  private async release(): Promise<void> {
    const { namespace, name, identity } = this.opts;
    try {
      const lease = await this.clients.coordination.readNamespacedLease({ namespace, name });
      if (lease.spec?.holderIdentity !== identity) return;
      await this.clients.coordination.replaceNamespacedLease({
        namespace, name,
        body: { ...lease, spec: { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, renewTime: micro(new Date()) } },
      });
    } catch (err) {
      this.log.warn({ err: messageOf(err) }, 'leader election: could not release the lease');
    }
  }
}
