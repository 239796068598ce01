/**
 * A worker's call.done reports, coalesced. A report goes out at once when fewer than
 * `maxInFlight` report requests are out; otherwise it waits, and the ones waiting when a request
 * comes back go together in the next, as an `independent` batch (server/app/events.ts): each
 * event handled as if it came alone, each one's outcome in `results`. A sequential chain never
 * waits (one slot, one report at a time); a loop's items, finishing many at once, cost the worker
 * and the server one HTTP request for several instead of one each.
 *
 * A report with a large result (`alone`) always goes by itself: several together could pass the
 * server's body limit, and the batch would then be refused whole and sent again.
 *
 * Each report resolves or fails as if it had been sent alone, so the caller's handling of a
 * refusal (409, 410, 413…) is the same either way. A batch refused whole (unreachable, too large)
 * is sent again one event at a time: an event the server took before is then a duplicate or a
 * 410, as for any retried report. A server that predates `independent` answers without `results`,
 * having taken every event (it fails the request on any refusal).
 */
import { ApiError } from '../client/http.js';
import type { ClaimNextRequest, ClaimedCommand, EventsAck, WorkerEvent } from '../common/protocol.js';

/** What a report came to: the commands its claim_next leased to this worker (eager dispatch). */
export interface ReportAnswer {
  claimed: ClaimedCommand[];
}

export interface ReportSender {
  sendEvents(events: WorkerEvent[], opts?: { claimNext?: ClaimNextRequest; independent?: boolean }): Promise<EventsAck>;
}

interface Waiting {
  event: WorkerEvent;
  claimNext?: ClaimNextRequest;
  resolve(a: ReportAnswer): void;
  reject(err: unknown): void;
}

export class ReportBatcher {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;

  constructor(
    private readonly sender: ReportSender,
    private readonly o: {
      maxInFlight: number;
      maxBatch: number;
      /** Reports that never share a request (a large result: several could pass the server's body limit together). */
      alone?: (event: WorkerEvent) => boolean;
      /** Each request sent, with the number of reports it carries (metrics). */
      onRequest?: (reports: number) => void;
    },
  ) {}

  send(event: WorkerEvent, claimNext?: ClaimNextRequest): Promise<ReportAnswer> {
    // a request free and nothing waiting (a sequential chain: always): it goes at once, alone
    if (this.waiting.length === 0 && this.inFlight < this.o.maxInFlight) {
      this.inFlight++;
      this.o.onRequest?.(1);
      const sent = this.sender.sendEvents([event], claimNext ? { claimNext } : undefined);
      const after = () => {
        this.inFlight--;
        this.pump();
      };
      sent.then(after, after);
      return sent.then((ack) => ({ claimed: ack?.claimed ?? [] }));
    }
    return new Promise<ReportAnswer>((resolve, reject) => {
      this.waiting.push({ event, claimNext, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.o.maxInFlight && this.waiting.length > 0) {
      const first = this.waiting.shift()!;
      const batch = [first];
      if (!this.isAlone(first)) {
        // One request asks one claim_next: the reports that go together all ask it, or none does.
        const wantsClaim = first.claimNext !== undefined;
        for (let i = 0; i < this.waiting.length && batch.length < this.o.maxBatch;) {
          const w = this.waiting[i]!;
          if ((w.claimNext !== undefined) === wantsClaim && !this.isAlone(w)) batch.push(...this.waiting.splice(i, 1));
          else i++;
        }
      }
      this.inFlight++;
      void this.dispatch(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private isAlone(w: Waiting): boolean {
    return this.o.alone?.(w.event) ?? false;
  }

  private async dispatch(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) return this.sendAlone(batch[0]);
    // one claim_next for all; `resent` if any of them is (it acts only on a report taken before)
    const claimNext = batch[0].claimNext && batch.some((w) => w.claimNext?.resent) ? { ...batch[0].claimNext, resent: true } : batch[0].claimNext;
    let ack: EventsAck;
    try {
      this.o.onRequest?.(batch.length);
      ack = await this.sender.sendEvents(batch.map((w) => w.event), { ...(claimNext ? { claimNext } : {}), independent: true });
    } catch (err) {
      // no answer (or a 5xx): the server may have taken the batch, and the answer was lost, so
      // each goes again marked resent; a refusal (413…) took nothing
      const lost = !(err instanceof ApiError) || err.status === 0 || err.status >= 500;
      await Promise.all(batch.map((w) => this.sendAlone(lost && w.claimNext ? { ...w, claimNext: { ...w.claimNext, resent: true } } : w)));
      return;
    }
    const results = ack.results;
    if (!results || results.length !== batch.length) {
      // A server that predates `independent` took the batch whole: every event, in order, and the
      // claims of the last one's decision (a refusal would have failed the request).
      batch.forEach((w, i) => w.resolve({ claimed: i === 0 ? ack.claimed ?? [] : [] }));
      return;
    }
    batch.forEach((w, i) => {
      const r = results[i];
      if (r.status === 200) w.resolve({ claimed: r.claimed ?? [] });
      else w.reject(new ApiError(r.status, r.error?.code ?? `http_${r.status}`, r.error?.message ?? `event refused (${r.status})`, r.error?.details));
    });
  }

  private async sendAlone(w: Waiting): Promise<void> {
    try {
      this.o.onRequest?.(1);
      const ack = await this.sender.sendEvents([w.event], w.claimNext ? { claimNext: w.claimNext } : undefined);
      w.resolve({ claimed: ack?.claimed ?? [] });
    } catch (err) {
      w.reject(err);
    }
  }
}
