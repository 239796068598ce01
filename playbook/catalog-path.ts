/**
 * Catalog paths, checked the same way by `playbook validate` (metadata.path) and by registration
 * (the request's path or metadata.path), with the same message in both places. A path sent in a
 * request is never rewritten (a client that sent `/etc/passwd` must not find it stored as
 * `etc/passwd`): a leading or trailing `/` there is refused. The document's own metadata.path
 * loses such slashes with a deprecation warning (playbook/normalize.ts), since reference-era
 * playbooks write them, and validate shows that warning too.
 */
const PATH_RE = /^[A-Za-z0-9_][A-Za-z0-9_.@+-]*(\/[A-Za-z0-9_][A-Za-z0-9_.@+-]*)*$/;

/** The path as stored: surrounding whitespace removed. */
export function normalizeCatalogPath(path: string): string {
  return path.trim();
}

/** Checks a normalised catalog path: segments of letters, digits and `_.-@+` separated by single slashes. */
export function checkCatalogPath(path: string): string | null {
  if (path.length === 0) return 'path is empty';
  if (path.length > 512) return 'path is longer than 512 characters';
  if (!PATH_RE.test(path) || path.split('/').some((s) => s === '.' || s === '..')) {
    return `path '${path}' is not a catalog path: use segments of letters, digits, '_', '.', '-', '@', '+' separated by '/'`;
  }
  return null;
}
