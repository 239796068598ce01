/**
 * Reading a tool's `auth` field. Three forms (credentials spec "Auth reference"):
 *   - a credential name string (possibly rendered from `{{ workload.<name> }}`),
 *   - `{type, credential: <name>}`,
 *   - `{type, inline: {...}}` (data given in the playbook; read directly, never sent anywhere).
 * Everything but inline goes through `ctx.resolveAuth`. The result is the credential's data plus
 * its type when known. Resolved data is a secret: callers must never log it.
 */
import type { Json, JsonObject } from '../../playbook/types.js';
import { isObject } from './json.js';
import { ToolConfigError, type ToolContext } from './types.js';

export interface LoadedAuth {
  type?: string;
  data: JsonObject;
}

export async function loadAuth(auth: Json | undefined, ctx: ToolContext): Promise<LoadedAuth | null> {
  if (auth === undefined || auth === null || auth === '') return null;
  if (isObject(auth) && isObject(auth.inline)) {
    return { type: typeof auth.type === 'string' ? auth.type : undefined, data: auth.inline };
  }
  if (typeof auth !== 'string' && !isObject(auth)) throw new ToolConfigError('auth must be a credential name or an object {type, credential} / {type, inline}');
  let data = await ctx.resolveAuth(auth);
  // Accept the server's read shape {credential_type, data} as well as bare data.
  let type: string | undefined = isObject(auth) && typeof auth.type === 'string' ? auth.type : undefined;
  if (isObject(data) && isObject(data.data) && ('credential_type' in data || 'credential_key' in data || 'credential_id' in data)) {
    type ??= typeof data.credential_type === 'string' ? data.credential_type : undefined;
    data = data.data;
  }
  if (!isObject(data)) throw new ToolConfigError('auth resolved to no data');
  type ??= typeof data.type === 'string' ? data.type : typeof data.credential_type === 'string' ? data.credential_type : undefined;
  return { type, data };
}

/** First present field among spellings. */
export function pick(data: JsonObject, ...names: string[]): Json | undefined {
  for (const n of names) if (data[n] !== undefined && data[n] !== null && data[n] !== '') return data[n];
  return undefined;
}
