/** Executions: newest first, filters by status and path, server-side pages, refreshed every 2 s. */
import { useState } from 'react';
import { api, q } from '../api.js';
import { duration, ErrorBox, Status, when } from '../components/Json.js';
import { usePoll } from '../hooks.js';
import { Link, navigate, useLocation } from '../router.js';
import type { Execution } from '../types.js';

const STATUSES = ['', 'started', 'running', 'completed', 'failed', 'cancelled'];
const PAGE = 50;

export function ExecutionsView() {
  const { search } = useLocation();
  const status = search.get('status') ?? '';
  const path = search.get('path') ?? '';
  const page = Math.max(0, Number(search.get('page') ?? 0) || 0);
  const [pathInput, setPathInput] = useState(path);
  const set = (patch: Record<string, string | number>) => {
    const next = { status, path, page, ...patch };
    navigate(`/executions${q(next.page ? next : { ...next, page: undefined })}`);
  };
  const { data, error } = usePoll(
    (signal) => api<{ executions: Execution[]; count: number }>(`/api/executions${q({ status, path, limit: PAGE, offset: page * PAGE, view: 'summary' })}`, { signal }),
    [status, path, page],
    2000,
  );
  return (
    <section>
      <h1>Executions</h1>
      <form className="filters" onSubmit={(e) => { e.preventDefault(); set({ path: pathInput.trim(), page: 0 }); }}>
        <label>Status{' '}
          <select value={status} onChange={(e) => set({ status: e.target.value, page: 0 })} data-testid="filter-status">
            {STATUSES.map((s) => <option key={s} value={s}>{s || 'any'}</option>)}
          </select>
        </label>
        <label>Path{' '}
          <input value={pathInput} onChange={(e) => setPathInput(e.target.value)} placeholder="catalog path" data-testid="filter-path" />
        </label>
        <button type="submit">Filter</button>
      </form>
      <ErrorBox error={error} />
      <table className="table" data-testid="executions">
        <thead><tr><th>ID</th><th>Status</th><th>Path</th><th>Version</th><th>Started</th><th>Duration</th><th>Parent</th></tr></thead>
        <tbody>
          {data?.executions.map((x) => (
            <tr key={x.execution_id} data-execution={x.execution_id}>
              <td><Link to={`/executions/${x.execution_id}`}>{x.execution_id}</Link></td>
              <td><Status status={x.status} /></td>
              <td>{x.path}</td>
              <td>{x.version}</td>
              <td>{when(x.created_at)}</td>
              <td>{duration(x.created_at, x.finished_at)}</td>
              <td>{x.parent_execution_id ? <Link to={`/executions/${x.parent_execution_id}`}>{x.parent_execution_id}</Link> : ''}</td>
            </tr>
          ))}
          {data && data.executions.length === 0 && <tr><td colSpan={7} className="muted">No executions{status || path ? ' match these filters' : ' yet'}.</td></tr>}
        </tbody>
      </table>
      <div className="pager">
        <button disabled={page === 0} onClick={() => set({ page: page - 1 })}>← Newer</button>
        <span>page {page + 1}</span>
        <button disabled={!data || data.count < PAGE} onClick={() => set({ page: page + 1 })}>Older →</button>
      </div>
    </section>
  );
}
