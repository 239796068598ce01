/**
 * The secret values one command's tool was given (keychain entries rendered into its config,
 * credentials its auth resolved to), masked in what the worker reports and logs about the call:
 * its error, its log and the worker's own log lines. A tool's error text is written by a driver
 * or a library that knows nothing of secrets: `GET http://api/v1/<token>/items failed`, `role
 * "<user>" does not exist`; URL redaction (common/redact-url.ts) keeps the path, so a token in a
 * path, a header echoed in an error body or a user name in a driver message went into the event
 * log and the worker's log as they were. Masking by value is what CI systems do for the same
 * reason: the text's author cannot be made to know which parts are secret.
 *
 * A successful call's response is the tool's data and is not rewritten.
 */

const MASK = '***';

/**
 * Values shorter than this are not masked: replacing every `on` or `v1` would garble messages
 * and hide nothing (a secret that short is guessed, not read).
 */
const MIN_LENGTH = 4;

/**
 * Fields of credential and keychain data that say where or what, not the secret itself: masking a
 * host or a token type would make the error unreadable (`connect ECONNREFUSED ***:5432`).
 */
const DESCRIPTIVE = new Set([
  'type', 'credential_type', 'token_type', 'scope', 'host', 'hostname', 'db_host', 'port', 'db_port',
  'database', 'dbname', 'db_name', 'sslmode', 'region', 'schema', 'expires_in', 'expires_at',
]);

export class SecretMask {
  private values: string[] = [];

  /** Every string leaf of `value` (a credential's data, a keychain entry's token data), except descriptive fields. */
  add(value: unknown, depth = 0): void {
    if (typeof value === 'string') {
      if (value.length >= MIN_LENGTH && !this.values.includes(value)) {
        this.values.push(value);
        // longest first: a secret containing another is masked whole
        this.values.sort((a, b) => b.length - a.length);
      }
    } else if (Array.isArray(value) && depth < 8) {
      for (const v of value) this.add(v, depth + 1);
    } else if (value !== null && typeof value === 'object' && depth < 8) {
      for (const [k, v] of Object.entries(value)) if (!DESCRIPTIVE.has(k)) this.add(v, depth + 1);
    }
  }

  get empty(): boolean {
    return this.values.length === 0;
  }

  /** The text with every known secret value replaced by `***`. */
  text(s: string): string {
    let out = s;
    for (const v of this.values) if (out.includes(v)) out = out.split(v).join(MASK);
    return out;
  }

  /** A JSON value with `text` applied to every string in it (keys included), at any depth. */
  deep<T>(value: T): T {
    if (this.empty) return value;
    return this.walk(value) as T;
  }

  private walk(value: unknown): unknown {
    if (typeof value === 'string') return this.text(value);
    if (Array.isArray(value)) return value.map((v) => this.walk(v));
    // an Error's message is not an own enumerable property: kept as text, masked
    if (value instanceof Error) return { name: value.name, message: this.text(value.message) };
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [this.text(k), this.walk(v)]));
    }
    return value;
  }
}
