/**
 * Queue and workers: depth by state, throughput per minute, registered servers and workers (online
 * while they heartbeat; a stopped one stays listed as offline, by the server's clock).
 */
import { api } from '../api.js';
import { ErrorBox, Status, when } from '../components/Json.js';
import { usePoll } from '../hooks.js';

interface Stats { queued: number; leased: number; delayed: number; oldest_age_seconds: number }
interface Throughput { minutes: Array<{ minute: string; done: number; failed: number }> }
interface Runtime { kind: string; name: string; info?: Record<string, unknown>; registered_at: string; last_heartbeat: string; heartbeat_age_seconds: number; live: boolean }

export function QueueView() {
  const stats = usePoll((signal) => api<Stats>('/api/queue/stats', { signal }), [], 2000);
  const tp = usePoll((signal) => api<Throughput>('/api/queue/throughput?minutes=15', { signal }), [], 5000);
  const rt = usePoll((signal) => api<{ runtimes: Runtime[] }>('/api/runtime', { signal }), [], 5000);
  const max = Math.max(1, ...(tp.data?.minutes.map((m) => m.done + m.failed) ?? [1]));
  const s = stats.data;
  return (
    <section>
      <h1>Queue and workers</h1>
      <ErrorBox error={stats.error ?? tp.error ?? rt.error} />
      <div className="cards" data-testid="queue-stats">
        <div className="card"><div className="big" data-stat="queued">{s?.queued ?? '…'}</div>queued</div>
        <div className="card"><div className="big" data-stat="leased">{s?.leased ?? '…'}</div>leased</div>
        <div className="card"><div className="big" data-stat="delayed">{s?.delayed ?? '…'}</div>delayed</div>
        <div className="card"><div className="big">{s ? `${s.oldest_age_seconds.toFixed(1)} s` : '…'}</div>oldest due</div>
      </div>
      <h2>Throughput (commands finished per minute, last 15 minutes)</h2>
      <div className="bars" data-testid="throughput">
        {tp.data?.minutes.map((m) => (
          <div key={m.minute} className="bar" title={`${new Date(m.minute).toLocaleTimeString()}: ${m.done} done, ${m.failed} failed`}>
            <span className="bar-done" style={{ height: `${(m.done / max) * 100}%` }} />
            <span className="bar-failed" style={{ height: `${(m.failed / max) * 100}%` }} />
            <span className="bar-label">{m.done + m.failed}</span>
          </div>
        ))}
      </div>
      <h2>Servers and workers</h2>
      <table className="table" data-testid="runtimes">
        <thead><tr><th>Kind</th><th>Name</th><th>Status</th><th>Registered</th><th>Last heartbeat</th><th>Info</th></tr></thead>
        <tbody>
          {rt.data?.runtimes.map((r) => (
            <tr key={`${r.kind}/${r.name}`} data-runtime={r.name}>
              <td>{r.kind}</td><td>{r.name}</td>
              <td><Status status={r.live ? 'online' : 'offline'} /></td>
              <td>{when(r.registered_at)}</td>
              <td>{when(r.last_heartbeat)} <span className="muted">({Math.round(r.heartbeat_age_seconds)} s ago)</span></td>
              <td className="mono small">{r.info ? JSON.stringify(r.info) : ''}</td>
            </tr>
          ))}
          {rt.data && rt.data.runtimes.length === 0 && <tr><td colSpan={6} className="muted">No registrations.</td></tr>}
        </tbody>
      </table>
    </section>
  );
}
