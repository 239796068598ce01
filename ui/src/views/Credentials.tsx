/**
 * Credentials and keychain: metadata only. The list endpoints never carry credential data or
 * token values, and the console calls no endpoint that does.
 */
import { useState } from 'react';
import { api } from '../api.js';
import { ErrorBox, when } from '../components/Json.js';
import { usePoll } from '../hooks.js';
import type { CatalogSummary } from '../types.js';

interface Credential { id: number; name: string; type: string; description?: string | null; tags?: string[]; created_at: string; updated_at: string }
interface KeychainEntry { keychain_name: string; cache_key: string; scope_type: string; credential_type: string; expires_at?: string; auto_renew?: boolean; access_count?: number }

export function CredentialsView() {
  const creds = usePoll((signal) => api<{ credentials: Credential[]; total?: number }>('/api/credentials?limit=500', { signal }), [], 10_000);
  const catalog = usePoll((signal) => api<{ playbooks: CatalogSummary[] }>('/api/catalog/playbooks?limit=1000', { signal }), []);
  const [catalogId, setCatalogId] = useState('');
  const kc = usePoll(
    async (signal) => (catalogId ? api<{ entries: KeychainEntry[] }>(`/api/keychain/catalog/${catalogId}`, { signal }) : undefined),
    [catalogId],
  );
  return (
    <section>
      <h1>Credentials</h1>
      <p className="muted">Metadata only: credential data never leaves the server for the browser.</p>
      <ErrorBox error={creds.error} />
      <table className="table" data-testid="credentials">
        <thead><tr><th>Name</th><th>Type</th><th>Tags</th><th>Description</th><th>Created</th><th>Updated</th></tr></thead>
        <tbody>
          {creds.data?.credentials.map((c) => (
            <tr key={c.name} data-credential={c.name}>
              <td>{c.name}</td><td>{c.type}</td><td>{(c.tags ?? []).map((t) => <span key={t} className="tag">{t}</span>)}</td>
              <td className="muted">{c.description ?? ''}</td><td>{when(c.created_at)}</td><td>{when(c.updated_at)}</td>
            </tr>
          ))}
          {creds.data && creds.data.credentials.length === 0 && <tr><td colSpan={6} className="muted">No credentials.</td></tr>}
        </tbody>
      </table>
      <h1>Keychain</h1>
      <label>Playbook{' '}
        <select value={catalogId} onChange={(e) => setCatalogId(e.target.value)} data-testid="keychain-playbook">
          <option value="">choose a playbook</option>
          {catalog.data?.playbooks.map((p) => <option key={p.catalog_id} value={p.catalog_id}>{p.path} v{p.version}</option>)}
        </select>
      </label>
      <ErrorBox error={kc.error} />
      {catalogId && (
        <table className="table" data-testid="keychain">
          <thead><tr><th>Name</th><th>Scope</th><th>Type</th><th>Expires</th><th>Auto-renew</th><th>Reads</th></tr></thead>
          <tbody>
            {kc.data?.entries.map((k) => (
              <tr key={k.cache_key}><td>{k.keychain_name}</td><td>{k.scope_type}</td><td>{k.credential_type}</td><td>{when(k.expires_at)}</td><td>{k.auto_renew ? 'yes' : 'no'}</td><td>{k.access_count ?? ''}</td></tr>
            ))}
            {kc.data && kc.data.entries.length === 0 && <tr><td colSpan={6} className="muted">No keychain entries for this playbook version.</td></tr>}
          </tbody>
        </table>
      )}
    </section>
  );
}
