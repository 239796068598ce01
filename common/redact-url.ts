/**
 * URL redaction for logs, events and error messages (issue 20). A URL may carry a credential in
 * its userinfo (`https://user:pass@host`), its query string (`?api_key=…`) or its fragment
 * (`#access_token=…`). The one form used everywhere:
 *
 *   https://user:pass@host:8443/path?api_key=k&page=2#t   →   https://***@host:8443/path?api_key=***&page=***#***
 *
 * Scheme, host, port and path stay (what is needed to tell which call failed); userinfo becomes
 * `***`, every query value `***` (parameter names stay; a bare parameter without `=` is `***`),
 * a fragment `#***`. Shared by server and worker (common/, the layer both import).
 */

const MASK = '***';
/** Absolute URLs inside free text (error messages, log lines). */
/** The `scheme://` an absolute URL starts with (RFC 3986 scheme). */
export const URL_SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi;

function redactQuery(query: string): string {
  return query
    .split('&')
    .map((part) => {
      if (part === '') return part;
      const eq = part.indexOf('=');
      return eq < 0 ? MASK : `${part.slice(0, eq)}=${MASK}`;
    })
    .join('&');
}

/**
 * One URL (absolute, or a path with a query such as a request's `req.url`), redacted. Works on
 * the text, not through `new URL`, so what is shown is what was written (no normalisation) and a
 * malformed URL is still redacted.
 */
export function redactUrl(url: string): string {
  let rest = url;
  let fragment = '';
  const hash = rest.indexOf('#');
  if (hash >= 0) {
    fragment = hash === rest.length - 1 ? '#' : `#${MASK}`;
    rest = rest.slice(0, hash);
  }
  let query = '';
  const q = rest.indexOf('?');
  if (q >= 0) {
    query = `?${redactQuery(rest.slice(q + 1))}`;
    rest = rest.slice(0, q);
  }
  const scheme = URL_SCHEME.exec(rest);
  if (scheme) {
    const afterScheme = rest.slice(scheme[0].length);
    const slash = afterScheme.indexOf('/');
    const authority = slash < 0 ? afterScheme : afterScheme.slice(0, slash);
    const path = slash < 0 ? '' : afterScheme.slice(slash);
    const at = authority.lastIndexOf('@');
    if (at >= 0) rest = `${scheme[0]}${MASK}@${authority.slice(at + 1)}${path}`;
  }
  return rest + query + fragment;
}

/** Every absolute URL in a text, redacted; text without `://` is returned as is (cheap). */
export function redactUrlsIn(text: string): string {
  if (!text.includes('://')) return text;
  return text.replace(URL_IN_TEXT, (m) => {
    // Punctuation that ends a sentence is not part of the URL.
    const trail = /[.,;:)\]}]+$/.exec(m)?.[0] ?? '';
    return redactUrl(trail ? m.slice(0, -trail.length) : m) + trail;
  });
}

/**
 * A log record's fields with URLs redacted in its strings, to `depth` levels of nesting (pino's
 * logMethod hook, see common/logger.ts). Objects without a URL-bearing string are returned as is.
 */
export function redactUrlsDeep<T>(value: T, depth = 3): T {
  if (typeof value === 'string') return redactUrlsIn(value) as T;
  if (depth <= 0 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) {
    const msg = redactUrlsIn(value.message);
    if (msg === value.message) return value;
    const copy = new Error(msg) as Error & Record<string, unknown>;
    copy.name = value.name;
    for (const [k, v] of Object.entries(value)) copy[k] = redactUrlsDeep(v, depth - 1);
    if (value.stack) copy.stack = redactUrlsIn(value.stack);
    return copy as T;
  }
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((v) => {
      const r = redactUrlsDeep(v, depth - 1);
      if (r !== v) changed = true;
      return r;
    });
    return (changed ? out : value) as T;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) return value;
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const r = redactUrlsDeep(v, depth - 1);
    if (r !== v) {
      out ??= { ...(value as Record<string, unknown>) };
      out[k] = r;
    }
  }
  return (out ?? value) as T;
}
