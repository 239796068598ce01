/**
 * A small history router: the console's pages have real addresses under /ui (the server answers
 * index.html for any of them), so a link to an execution can be shared and reloaded.
 */
import { useEffect, useState, type MouseEvent, type ReactNode } from 'react';

export const BASE = '/ui';

function current(): string {
  const p = window.location.pathname;
  return p.startsWith(BASE) ? p.slice(BASE.length) || '/' : '/';
}

export function navigate(to: string): void {
  window.history.pushState(null, '', BASE + to);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

export function useLocation(): { path: string; search: URLSearchParams } {
  const [state, setState] = useState(() => ({ path: current(), search: new URLSearchParams(window.location.search) }));
  useEffect(() => {
    const on = () => setState({ path: current(), search: new URLSearchParams(window.location.search) });
    window.addEventListener('popstate', on);
    return () => window.removeEventListener('popstate', on);
  }, []);
  return state;
}

export function Link({ to, children, className, title }: { to: string; children: ReactNode; className?: string; title?: string }) {
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return <a href={BASE + to} onClick={onClick} className={className} title={title}>{children}</a>;
}
