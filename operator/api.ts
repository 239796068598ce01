/**
 * What the controllers need from the Playflow server, over its HTTP API only (client/http.ts
 * PlayflowClient; client/secrets.ts SecretsClient for credentials). Errors stay `ApiError`s:
 * status 0 = server unreachable, 422 = invalid playbook
 * (details: every problem with its path), 400 = bad input (e.g. credential schema validation).
 */
import { ApiError, PlayflowClient } from '../client/http.js';
import { SecretsClient } from '../client/secrets.js';
import type { QueueStats, RegisterPlaybookResponse } from '../client/protocol.js';
import type { JsonObject } from '../playbook/types.js';

export { ApiError };

export interface CredentialUpsert {
  name: string;
  type: string;
  description?: string;
  tags?: string[];
  meta?: JsonObject;
  schema?: JsonObject;
  data: JsonObject;
}

export interface OperatorServerApi {
  registerPlaybook(content: string, path: string): Promise<RegisterPlaybookResponse>;
  /** Resolves when the path is gone (404 counts as gone). */
  deletePlaybook(path: string): Promise<void>;
  /** Latest catalog version at the path, or null when there is none. */
  playbookVersion(path: string): Promise<number | null>;
  queueStats(): Promise<QueueStats>;
  upsertCredential(c: CredentialUpsert): Promise<void>;
  /** Resolves when the credential is gone (404 counts as gone). */
  deleteCredential(name: string): Promise<void>;
  /** Whether the store holds a credential of that name (metadata only; no data is read). */
  credentialExists(name: string): Promise<boolean>;
}

export function serverApi(client: PlayflowClient): OperatorServerApi {
  const secrets = new SecretsClient(client);
  return {
    registerPlaybook: (content, path) => client.registerPlaybook(content, path),
    async deletePlaybook(path) {
      try {
        await client.deletePlaybook(path);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return;
        throw err;
      }
    },
    async playbookVersion(path) {
      try {
        return (await client.getPlaybook(path)).version;
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }
    },
    queueStats: () => client.queueStats(),
    async upsertCredential(c) {
      await secrets.putCredential(c);
    },
    async deleteCredential(name) {
      try {
        await secrets.deleteCredential(name);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return;
        throw err;
      }
    },
    async credentialExists(name) {
      try {
        await secrets.getCredential(name); // metadata only: no data is decrypted or cached
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return false;
        throw err;
      }
    },
  };
}

/** True when the error means the server could not be used (unreachable, timeout, 5xx, 429). */
export function isServerUnavailable(err: unknown): boolean {
  if (!(err instanceof ApiError)) return true;
  return err.status === 0 || err.status >= 500 || err.status === 429 || err.status === 408;
}

/** "path: message" lines from a 422/400 ApiError's details (array of issues or of strings). */
export function problemsOf(err: ApiError): string[] {
  const d = err.details as unknown;
  const list: unknown[] = Array.isArray(d)
    ? d
    : d && typeof d === 'object' && Array.isArray((d as { errors?: unknown[] }).errors)
      ? (d as { errors: unknown[] }).errors
      : d && typeof d === 'object' && Array.isArray((d as { problems?: unknown[] }).problems)
        ? (d as { problems: unknown[] }).problems
        : [];
  const out = list.map((p) => {
    if (typeof p === 'string') return p;
    const issue = p as { path?: string; message?: string; severity?: string };
    if (issue.severity === 'warning') return '';
    return issue.path ? `${issue.path}: ${issue.message ?? ''}` : (issue.message ?? JSON.stringify(p));
  }).filter(Boolean);
  return out.length ? out : [err.message];
}
