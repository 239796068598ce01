/**
 * Catalog: playbooks (latest version of each path); for one path its versions, the YAML of a
 * version, a diff against another version, the graph preview, and Run with a JSON payload editor
 * (the server's validation errors are shown as it answers them).
 */
import { useState } from 'react';
import { api, ApiError, encodePath, q } from '../api.js';
import { CodeView, DiffView } from '../components/Code.js';
import { WorkflowGraph } from '../components/Graph.js';
import { ErrorBox, when } from '../components/Json.js';
import { usePoll } from '../hooks.js';
import { Link, navigate, useLocation } from '../router.js';
import type { CatalogEntry, CatalogSummary } from '../types.js';

export function CatalogList() {
  const { data, error } = usePoll((signal) => api<{ playbooks: CatalogSummary[] }>('/api/catalog/playbooks?limit=1000', { signal }), [], 5000);
  return (
    <section>
      <h1>Catalog</h1>
      <ErrorBox error={error} />
      <table className="table" data-testid="catalog">
        <thead><tr><th>Path</th><th>Name</th><th>Latest version</th><th>Registered</th><th>Description</th></tr></thead>
        <tbody>
          {data?.playbooks.map((p) => (
            <tr key={p.path} data-path={p.path}>
              <td><Link to={`/catalog/${encodePath(p.path)}`}>{p.path}</Link></td>
              <td>{p.name}</td>
              <td>{p.version}</td>
              <td>{when(p.created_at)}</td>
              <td className="muted">{p.description ?? ''}</td>
            </tr>
          ))}
          {data && data.playbooks.length === 0 && <tr><td colSpan={5} className="muted">No playbooks registered (playflow catalog register playbook &lt;file&gt;).</td></tr>}
        </tbody>
      </table>
    </section>
  );
}

interface Versions { path: string; versions: Array<{ catalog_id: string; version: number; created_at: string }> }

function RunPanel({ entry }: { entry: CatalogEntry }) {
  const [text, setText] = useState('{}');
  const [error, setError] = useState<string>();
  const [details, setDetails] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const run = async () => {
    setError(undefined);
    setDetails(undefined);
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch (e) {
      setError(`payload is not valid JSON: ${(e as Error).message}`);
      return;
    }
    setBusy(true);
    try {
      const r = await api<{ execution_id: string }>('/api/run/playbook', { method: 'POST', body: { path: entry.path, version: entry.version, payload } });
      navigate(`/executions/${r.execution_id}`);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
      if (e instanceof ApiError) setDetails(e.details);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="run-panel" data-testid="run-panel">
      <h2>Run v{entry.version}</h2>
      <p className="muted">Payload (a JSON object; merged over the playbook's workload):</p>
      <CodeView value={text} language="json" editable onChange={setText} testId="payload-editor" />
      <button onClick={run} disabled={busy} data-testid="run">Run</button>
      {error && <div className="error-box" role="alert" data-testid="run-error">{error}</div>}
      {Array.isArray(details) && details.length > 0 && (
        <ul className="problems">{details.map((d, i) => <li key={i}>{typeof d === 'object' && d ? `${(d as { field?: string }).field ?? ''}: ${(d as { message?: string }).message ?? JSON.stringify(d)}` : String(d)}</li>)}</ul>
      )}
    </div>
  );
}

export function CatalogEntryView({ path }: { path: string }) {
  const { search } = useLocation();
  const version = search.get('version') ? Number(search.get('version')) : undefined;
  const diffWith = search.get('diff') ? Number(search.get('diff')) : undefined;
  const versions = usePoll((signal) => api<Versions>(`/api/catalog/versions/${encodePath(path)}`, { signal }), [path]);
  const entry = usePoll((signal) => api<CatalogEntry>(`/api/catalog/playbook/${encodePath(path)}${q({ version })}`, { signal }), [path, version]);
  const other = usePoll(
    async (signal) => (diffWith ? api<CatalogEntry>(`/api/catalog/playbook/${encodePath(path)}${q({ version: diffWith })}`, { signal }) : undefined),
    [path, diffWith],
  );
  const [tab, setTab] = useState<'yaml' | 'graph' | 'diff'>(diffWith ? 'diff' : 'yaml');
  const go = (v: { version?: number; diff?: number }) => navigate(`/catalog/${encodePath(path)}${q(v)}`);
  const e = entry.data;
  return (
    <section className="catalog-entry">
      <h1>{path} {e && <span className="muted">v{e.version}</span>}</h1>
      <ErrorBox error={entry.error ?? versions.error} />
      <div className="cat-grid">
        <aside className="versions" data-testid="versions">
          <h2>Versions</h2>
          <ul>
            {versions.data?.versions.map((v) => (
              <li key={v.version} className={v.version === e?.version ? 'active' : ''}>
                <a href="#" onClick={(ev) => { ev.preventDefault(); go({ version: v.version, diff: diffWith }); }}>v{v.version}</a>
                <span className="muted"> {when(v.created_at)}</span>
              </li>
            ))}
          </ul>
          <Link to={`/executions${q({ path })}`}>Executions of this path</Link>
        </aside>
        <div className="cat-main">
          <nav className="tabs">
            <button className={tab === 'yaml' ? 'active' : ''} onClick={() => setTab('yaml')} data-tab="yaml">YAML</button>
            <button className={tab === 'graph' ? 'active' : ''} onClick={() => setTab('graph')} data-tab="graph">Graph</button>
            <button className={tab === 'diff' ? 'active' : ''} onClick={() => setTab('diff')} data-tab="diff">Diff</button>
          </nav>
          {e && tab === 'yaml' && <CodeView value={e.content} language="yaml" testId="yaml" />}
          {e?.playbook && tab === 'graph' && <WorkflowGraph playbook={e.playbook} />}
          {e && tab === 'diff' && (
            <div>
              <label>Compare v{e.version} with{' '}
                <select value={diffWith ?? ''} onChange={(ev) => go({ version: e.version, diff: Number(ev.target.value) || undefined })} data-testid="diff-with">
                  <option value="">choose a version</option>
                  {versions.data?.versions.filter((v) => v.version !== e.version).map((v) => <option key={v.version} value={v.version}>v{v.version}</option>)}
                </select>
              </label>
              {other.data && <><p className="muted">left: v{other.data.version} · right: v{e.version}</p><DiffView left={other.data.content} right={e.content} /></>}
            </div>
          )}
        </div>
        {e && <RunPanel entry={e} />}
      </div>
    </section>
  );
}
