import { describe, expect, it } from 'vitest';
import { ApiError } from '../client/http.js';
import type { ClaimNextRequest, ClaimedCommand, EventsAck, WorkerEvent } from '../common/protocol.js';
import { ReportBatcher, type ReportSender } from './report-batcher.js';

interface Call {
  events: WorkerEvent[];
  opts?: { claimNext?: ClaimNextRequest; independent?: boolean };
  answer(ack: EventsAck): void;
  fail(err: unknown): void;
}

/** A sender whose requests stay open until the test answers them. */
function heldSender(): ReportSender & { calls: Call[] } {
  const calls: Call[] = [];
  return {
    calls,
    sendEvents(events, opts) {
      return new Promise<EventsAck>((answer, fail) => calls.push({ events, opts, answer, fail }));
    },
  };
}

const ev = (q: number): WorkerEvent => ({ execution_id: '1', step: 's', name: 'call.done', queue_id: String(q), worker_id: 'w', lease_token: `t${q}`, payload: { response: q } });
const cmd = (q: number) => ({ queue_id: String(q), step: 'next' }) as unknown as ClaimedCommand;
const ack = (o: Partial<EventsAck> = {}): EventsAck => ({ status: 'ok', accepted: 1, duplicates: 0, commands: 0, ...o });
const claim: ClaimNextRequest = { worker_id: 'w' };
const tick = () => new Promise((r) => setImmediate(r));
/** An onRequest that tallies the requests and the reports they carried. */
const count = (sent: { requests: number; events: number }) => (n: number) => {
  sent.requests++;
  sent.events += n;
};

describe('ReportBatcher', () => {
  it('sends a lone report at once, as one event, with its claim_next', async () => {
    const s = heldSender();
    const b = new ReportBatcher(s, { maxInFlight: 1, maxBatch: 8 });
    const p = b.send(ev(1), claim);
    expect(s.calls).toHaveLength(1);
    expect(s.calls[0].events).toEqual([ev(1)]);
    expect(s.calls[0].opts).toEqual({ claimNext: claim });
    s.calls[0].answer(ack({ claimed: [cmd(2)] }));
    expect(await p).toEqual({ claimed: [cmd(2)] });
  });

  it('reports that come while requests are out go together in one independent batch; each gets its own outcome', async () => {
    const s = heldSender();
    const sent = { requests: 0, events: 0 };
    const b = new ReportBatcher(s, { maxInFlight: 1, maxBatch: 8, onRequest: count(sent) });
    const first = b.send(ev(1), claim);
    const waiting = [b.send(ev(2), claim), b.send(ev(3), claim), b.send(ev(4), claim)];
    const settled = Promise.allSettled(waiting);
    expect(s.calls).toHaveLength(1); // the three wait for the first request
    s.calls[0].answer(ack());
    await first;
    await tick();
    expect(s.calls).toHaveLength(2);
    expect(s.calls[1].events).toEqual([ev(2), ev(3), ev(4)]);
    expect(s.calls[1].opts).toEqual({ claimNext: claim, independent: true });
    s.calls[1].answer(ack({
      accepted: 2,
      results: [
        { status: 200, duplicate: false, commands: 1, claimed: [cmd(20)] },
        { status: 409, error: { code: 'not_lease_holder', message: 'not yours' } },
        { status: 200, duplicate: true, commands: 0 },
      ],
    }));
    const [a, r, c] = await settled;
    expect(a).toEqual({ status: 'fulfilled', value: { claimed: [cmd(20)] } });
    expect(r.status).toBe('rejected');
    const err = (r as PromiseRejectedResult).reason;
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 409, code: 'not_lease_holder', message: 'not yours' });
    expect(c).toEqual({ status: 'fulfilled', value: { claimed: [] } });
    expect(sent).toEqual({ requests: 2, events: 4 });
  });

  it('keeps up to maxInFlight requests out, and at most maxBatch events in one', async () => {
    const s = heldSender();
    const b = new ReportBatcher(s, { maxInFlight: 2, maxBatch: 2 });
    const all = [1, 2, 3, 4, 5].map((q) => b.send(ev(q)));
    expect(s.calls.map((c) => c.events.length)).toEqual([1, 1]);
    s.calls[0].answer(ack());
    await tick();
    expect(s.calls.map((c) => c.events.map((e) => e.queue_id))).toEqual([['1'], ['2'], ['3', '4']]);
    s.calls[1].answer(ack());
    await tick();
    expect(s.calls[3].events.map((e) => e.queue_id)).toEqual(['5']);
    expect(s.calls[3].opts).toBeUndefined(); // alone again: the plain form
    s.calls[2].answer(ack({ results: [{ status: 200 }, { status: 200 }] }));
    s.calls[3].answer(ack());
    await Promise.all(all);
  });

  it('a batch refused whole goes again one event at a time, each answered on its own', async () => {
    const s = heldSender();
    const b = new ReportBatcher(s, { maxInFlight: 1, maxBatch: 8 });
    const first = b.send(ev(1), claim);
    const p2 = b.send(ev(2), claim);
    const p3 = b.send(ev(3), claim).catch((e: unknown) => e);
    s.calls[0].answer(ack());
    await first;
    await tick();
    s.calls[1].fail(new ApiError(413, 'payload_too_large', 'request body is larger than the server takes'));
    await tick();
    expect(s.calls.slice(2).map((c) => [c.events.map((e) => e.queue_id), c.opts])).toEqual([[['2'], { claimNext: claim }], [['3'], { claimNext: claim }]]);
    s.calls[2].answer(ack({ claimed: [cmd(9)] }));
    s.calls[3].fail(new ApiError(413, 'payload_too_large', 'still too large'));
    expect(await p2).toEqual({ claimed: [cmd(9)] });
    expect(await p3).toMatchObject({ status: 413, message: 'still too large' });
  });

  it('a batch that got no answer goes again one event at a time marked resent (it may have been taken); so does a batch with one resent report', async () => {
    const s = heldSender();
    const b = new ReportBatcher(s, { maxInFlight: 1, maxBatch: 8 });
    const first = b.send(ev(1), claim);
    const rest = [b.send(ev(2), claim), b.send(ev(3), claim)];
    s.calls[0].answer(ack());
    await first;
    await tick();
    s.calls[1].fail(new ApiError(0, 'unreachable', 'socket hang up'));
    await tick();
    expect(s.calls.slice(2).map((c) => [c.events.map((e) => e.queue_id), c.opts])).toEqual([
      [['2'], { claimNext: { ...claim, resent: true } }], [['3'], { claimNext: { ...claim, resent: true } }],
    ]);
    s.calls[2].answer(ack());
    s.calls[3].answer(ack());
    await Promise.all(rest);
    await tick();

    const more = [b.send(ev(4), claim)];
    more.push(b.send(ev(5), claim), b.send(ev(6), { ...claim, resent: true }));
    s.calls[4].answer(ack());
    await tick();
    expect(s.calls[5].opts).toEqual({ claimNext: { ...claim, resent: true }, independent: true });
    s.calls[5].answer(ack({ results: [{ status: 200 }, { status: 200 }] }));
    await Promise.all(more);
  });

  it('an answer without results (a server before `independent`) took every event: the claims go to the first', async () => {
    const s = heldSender();
    const b = new ReportBatcher(s, { maxInFlight: 1, maxBatch: 8 });
    const first = b.send(ev(1), claim);
    const later = [b.send(ev(2), claim), b.send(ev(3), claim)];
    s.calls[0].answer(ack());
    await first;
    await tick();
    s.calls[1].answer(ack({ accepted: 2, claimed: [cmd(7)] }));
    expect(await Promise.all(later)).toEqual([{ claimed: [cmd(7)] }, { claimed: [] }]);
  });

  it('a report the alone rule picks goes in a request of its own; the others still go together', async () => {
    const s = heldSender();
    const big = (q: number): WorkerEvent => ({ ...ev(q), payload: { response: 'big' } });
    const sent = { requests: 0, events: 0 };
    const b = new ReportBatcher(s, { maxInFlight: 1, maxBatch: 8, alone: (e) => e.payload?.response === 'big', onRequest: count(sent) });
    const first = b.send(ev(1), claim);
    const rest = [b.send(big(2), claim), b.send(ev(3), claim), b.send(big(4), claim), b.send(ev(5), claim)];
    s.calls[0].answer(ack());
    await first;
    for (const expected of [['2'], ['3', '5'], ['4']]) {
      await tick();
      const call = s.calls[s.calls.length - 1];
      expect(call.events.map((e) => e.queue_id)).toEqual(expected);
      call.answer(expected.length > 1 ? ack({ results: expected.map(() => ({ status: 200 })) }) : ack());
    }
    await Promise.all(rest);
    expect(sent).toEqual({ requests: 4, events: 5 });
  });

  it('reports with and without claim_next never share a request', async () => {
    const s = heldSender();
    const b = new ReportBatcher(s, { maxInFlight: 1, maxBatch: 8 });
    const first = b.send(ev(1), claim);
    const rest = [b.send(ev(2)), b.send(ev(3), claim), b.send(ev(4))];
    s.calls[0].answer(ack());
    await first;
    await tick();
    expect(s.calls[1].events.map((e) => e.queue_id)).toEqual(['2', '4']);
    expect(s.calls[1].opts).toEqual({ independent: true });
    s.calls[1].answer(ack({ results: [{ status: 200 }, { status: 200 }] }));
    await tick();
    expect(s.calls[2].events.map((e) => e.queue_id)).toEqual(['3']);
    s.calls[2].answer(ack());
    await Promise.all(rest);
  });
});
