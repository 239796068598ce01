import type { Json as J } from '../types.js';

export function Json({ value, testId }: { value: J | undefined; testId?: string }) {
  if (value === undefined) return <pre className="json muted" data-testid={testId}>—</pre>;
  return <pre className="json" data-testid={testId}>{JSON.stringify(value, null, 2)}</pre>;
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  return <div className="error-box" role="alert">{message}</div>;
}

export function Status({ status, label }: { status: string; label?: string }) {
  return <span className={`badge status-${status}`} data-status={status}>{label ?? status}</span>;
}

export function duration(start?: string | null, end?: string | null): string {
  if (!start) return '';
  const ms = (end ? Date.parse(end) : Date.now()) - Date.parse(start);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function when(ts?: string | null): string {
  return ts ? new Date(ts).toLocaleString() : '';
}
