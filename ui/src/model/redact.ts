/**
 * Values of keys that name a secret are shown as "••••" (tool configs, args). The server never
 * sends credential data, and rendered commands keep secret references for the worker; this is the
 * second line, for a password someone typed into a playbook.
 */
const SECRET_KEY = /pass(word|wd)?$|secret|token|api[-_]?key|authorization|private[-_]?key|credential_data|^auth$|cookie|client[-_]?secret/i;
export const REDACTED = '••••';

export function redact<T>(v: T, depth = 0): T {
  if (depth > 20 || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x) => redact(x, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    out[k] = SECRET_KEY.test(k) && x !== null && typeof x !== 'object' && !isTemplate(x) ? REDACTED : redact(x, depth + 1);
  }
  return out as T;
}

/** `{{ secret.x }}` is a reference, not the secret: shown as written. */
function isTemplate(x: unknown): boolean {
  return typeof x === 'string' && /^\s*\{\{[^}]*\}\}\s*$/.test(x);
}
