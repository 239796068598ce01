/**
 * Auth references on the worker (spec "Auth reference"): `createAuthResolver(client)` gives the
 * `resolveAuth` function tools receive. Accepted forms:
 *   - a credential name (`"pg_auth"`, usually rendered from `{{ workload.pg_auth }}`),
 *   - `{type, credential: <name>}` (also `key` / `name`),
 *   - `{type, inline: {...}}` — data written in the playbook; nothing is fetched.
 * Names go to GET /api/credential/{credential_key}, with the command's lease (issue 20). The answer is normalised data: the stored
 * fields plus, for postgres, both spellings (`db_host`/`host`, `db_port`/`port` (integer),
 * `db_user`/`user`, `db_password`/`password`, `db_name`/`database`), and `credential_type`
 * when the data has no `type` of its own. Resolved data is a secret: never log it.
 * Results are cached for the resolver's lifetime (one command).
 */
import type { Json, JsonObject } from '../playbook/types.js';
import type { CredentialLease, CredentialRead } from '../client/secrets.js';
import type { ResolveAuth } from './tools/types.js';

export interface CredentialReader {
  readCredential(key: string, lease?: CredentialLease): Promise<CredentialRead>;
}

/** The lease of a claimed command, as the credential read path wants it (undefined when the command has none). */
export function leaseOf(cmd: { queue_id?: unknown; worker_id?: unknown; lease_token?: unknown }): CredentialLease | undefined {
  const q = cmd.queue_id;
  if ((typeof q !== 'string' && typeof q !== 'number') || typeof cmd.worker_id !== 'string' || typeof cmd.lease_token !== 'string' || !cmd.lease_token) return undefined;
  return { queue_id: q, worker_id: cmd.worker_id, lease_token: cmd.lease_token };
}

const isObj = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

const PG_ALIASES: Array<[string, string[]]> = [
  ['db_host', ['host', 'hostname']],
  ['db_port', ['port']],
  ['db_user', ['user', 'username']],
  ['db_password', ['password']],
  ['db_name', ['database', 'dbname']],
];

/** Postgres data in both spellings; the port as an integer. */
export function normalisePostgres(data: JsonObject): JsonObject {
  const out: JsonObject = { ...data };
  for (const [canon, alts] of PG_ALIASES) {
    const v = [canon, ...alts].map((k) => out[k]).find((x) => x !== undefined && x !== null && x !== '');
    if (v === undefined) continue;
    const value = canon === 'db_port' && typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
    out[canon] = value;
    out[alts[0]] = value;
  }
  return out;
}

export function normaliseAuth(type: string | undefined, data: JsonObject): JsonObject {
  const looksPg = type === 'postgres' || type === 'postgresql' || ('db_host' in data && 'db_user' in data);
  const out = looksPg ? normalisePostgres(data) : { ...data };
  if (type && out.type === undefined && out.credential_type === undefined) out.credential_type = type;
  return out;
}

/** The credential name an auth reference points at, or undefined for inline data. */
export function referenceName(auth: Json): string | undefined {
  if (typeof auth === 'string') return auth.trim() || undefined;
  if (isObj(auth)) for (const k of ['credential', 'key', 'name']) if (typeof auth[k] === 'string' && auth[k]) return auth[k] as string;
  return undefined;
}

/**
 * `lease`: the command this resolver serves; the server checks it (holder, and the credential's
 * scope against the command's playbook).
 */
export function createAuthResolver(client: CredentialReader, lease?: CredentialLease): ResolveAuth {
  const cache = new Map<string, Promise<CredentialRead>>();
  return async (auth: Json) => {
    if (isObj(auth) && isObj(auth.inline)) return normaliseAuth(typeof auth.type === 'string' ? auth.type : undefined, auth.inline);
    const name = referenceName(auth);
    if (!name) throw new Error('auth reference must be a credential name, {type, credential}, or {type, inline}');
    let p = cache.get(name);
    if (!p) {
      p = lease ? client.readCredential(name, lease) : client.readCredential(name);
      cache.set(name, p);
      p.catch(() => cache.delete(name));
    }
    const c = await p;
    const declared = isObj(auth) && typeof auth.type === 'string' ? auth.type : undefined;
    return normaliseAuth(declared ?? c.credential_type, c.data);
  };
}
