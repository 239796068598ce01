/** The shell: navigation, the token prompt, and the page for the current address. */
import { lazy, Suspense, useEffect, useState } from 'react';
import { api, ApiError, getToken, onUnauthorized, setToken } from './api.js';
import { Link, useLocation } from './router.js';
import { CredentialsView } from './views/Credentials.js';
import { ExecutionView } from './views/Execution.js';
import { ExecutionsView } from './views/Executions.js';
import { QueueView } from './views/Queue.js';

// The catalog pages carry the code editor (CodeMirror, its YAML/JSON modes, the diff view):
// their own chunk, so the execution page — the one opened from a link — loads and starts sooner.
const CatalogList = lazy(() => import('./views/Catalog.js').then((m) => ({ default: m.CatalogList })));
const CatalogEntryView = lazy(() => import('./views/Catalog.js').then((m) => ({ default: m.CatalogEntryView })));
const loading = <p className="muted">Loading…</p>;

function TokenPrompt({ onDone, wrong }: { onDone: () => void; wrong: boolean }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState<string>();
  const submit = async () => {
    setToken(value.trim());
    try {
      await api('/api/queue/stats');
      onDone();
    } catch (e) {
      setToken(null);
      setError(e instanceof ApiError && e.status === 401 ? 'The server refused this token.' : (e as Error).message);
    }
  };
  return (
    <div className="modal" role="dialog" aria-label="API token" data-testid="token-prompt">
      <form onSubmit={(e) => { e.preventDefault(); void submit(); }}>
        <h2>API token</h2>
        <p>This server requires a bearer token (PLAYFLOW_API_TOKEN). It is kept in this tab's session storage only.</p>
        {wrong && !error && <p className="error-box">The stored token was refused.</p>}
        <input type="password" autoFocus value={value} onChange={(e) => setValue(e.target.value)} placeholder="token" data-testid="token-input" />
        <button type="submit">Continue</button>
        {error && <div className="error-box" role="alert">{error}</div>}
      </form>
    </div>
  );
}

function Page() {
  const { path } = useLocation();
  const m = /^\/executions\/(\d+)\/?$/.exec(path);
  if (m) return <ExecutionView key={m[1]} id={m[1]} />;
  if (path === '/' || path === '/executions' || path === '/executions/') return <ExecutionsView />;
  if (path === '/catalog' || path === '/catalog/') return <Suspense fallback={loading}><CatalogList /></Suspense>;
  if (path.startsWith('/catalog/')) {
    const p = path.slice('/catalog/'.length).split('/').map(decodeURIComponent).join('/');
    return <Suspense fallback={loading}><CatalogEntryView key={p} path={p} /></Suspense>;
  }
  if (path === '/queue') return <QueueView />;
  if (path === '/credentials') return <CredentialsView />;
  return <p>No page at {path}. <Link to="/executions">Executions</Link></p>;
}

export function App() {
  const [needToken, setNeedToken] = useState(false);
  const [generation, setGeneration] = useState(0);
  const { path } = useLocation();
  useEffect(() => onUnauthorized(() => setNeedToken(true)), []);
  const nav = [['/executions', 'Executions'], ['/catalog', 'Catalog'], ['/queue', 'Queue & workers'], ['/credentials', 'Credentials']];
  return (
    <div className="app">
      <header className="top">
        <Link to="/executions" className="brand">Playflow</Link>
        <nav>
          {nav.map(([to, label]) => (
            <Link key={to} to={to} className={path.startsWith(to) || (to === '/executions' && path === '/') ? 'active' : ''}>{label}</Link>
          ))}
        </nav>
        <span className="spacer" />
        <a href="/docs">API docs</a>
        {getToken() && <button className="link" onClick={() => { setToken(null); setNeedToken(true); }}>Forget token</button>}
      </header>
      <main key={generation}>
        {needToken ? null : <Page />}
      </main>
      {needToken && <TokenPrompt wrong={Boolean(getToken())} onDone={() => { setNeedToken(false); setGeneration((g) => g + 1); }} />}
    </div>
  );
}
