/**
 * What the controllers need from the Playflow server, over its HTTP API only (client/http.ts
 * PlayflowClient; client/secrets.ts SecretsClient for credentials). Errors stay `ApiError`s:
 * status 0 = server unreachable, 422 = invalid playbook
 * (details: every problem with its path), 400 = bad input (e.g. credential schema validation).
 */
import { ApiError, PlayflowClient } from '../client/http.js';
import { SecretsClient } from '../client/secrets.js';
import type { QueueStats, RegisterPlaybookResponse, ResourceOwner, ScheduleSpec, ScheduleView } from '../common/protocol.js';
import type { JsonObject } from '../playbook/types.js';

export { ApiError };

export interface CredentialUpsert {
  name: string;
  type: string;
  description?: string;
  tags?: string[];
  meta?: JsonObject;
  schema?: JsonObject;
  /** null removes a scope the resource no longer declares. */
  scope?: { paths?: string[]; namespaces?: string[] } | null;
  data: JsonObject;
  owner?: ResourceOwner;
  /** Claim it though it has no owner when its meta says this resource stored it (upgrade adoption). */
  adopt?: boolean;
}

export interface OperatorServerApi {
  /**
   * 409 `owned_by_other` when another resource or an API client holds the path. `adoptVersion`:
   * the version this resource's status says it registered; an ownerless path still at that
   * version is claimed (what an operator from before ownership registered).
   */
  registerPlaybook(content: string, path: string, owner?: ResourceOwner, adoptVersion?: number): Promise<RegisterPlaybookResponse>;
  /**
   * Resolves when the path is gone (404 counts as gone). With `owner` (`Kind/ns/name`), 409
   * `owned_by_other` when someone else holds it.
   */
  deletePlaybook(path: string, owner?: string): Promise<void>;
  /** Latest catalog version and owner of each known path (absent = not in the catalog); no content. */
  playbookVersions(paths: string[]): Promise<Map<string, { version: number; owner?: ResourceOwner }>>;
  /** Depth of one worker pool's queue. */
  queueStats(pool: string): Promise<QueueStats>;
  upsertCredential(c: CredentialUpsert): Promise<void>;
  /** Resolves when the credential is gone (404 counts as gone); `owner` as for deletePlaybook. */
  deleteCredential(name: string, owner?: string): Promise<void>;
  /** The stored credential's owner (metadata only; no data is read), or null when there is none. */
  credentialOwner(name: string): Promise<{ owner?: ResourceOwner } | null>;
  /** Create or replace a schedule declared by Kubernetes. */
  putSchedule(name: string, spec: ScheduleSpec): Promise<ScheduleView>;
  /** The schedule, or null when there is none. */
  getSchedule(name: string): Promise<ScheduleView | null>;
  /** Resolves when it is gone (404 counts as gone). */
  deleteSchedule(name: string): Promise<void>;
}

export function serverApi(client: PlayflowClient): OperatorServerApi {
  const secrets = new SecretsClient(client);
  return {
    registerPlaybook: (content, path, owner, adoptVersion) => client.registerPlaybook(content, path, owner, adoptVersion),
    async deletePlaybook(path, owner) {
      try {
        await client.deletePlaybook(path, owner);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return;
        throw err;
      }
    },
    async playbookVersions(paths) {
      const { versions } = await client.playbookVersions(paths);
      return new Map(versions.map((v) => [v.path, { version: v.version, ...(v.owner ? { owner: v.owner } : {}) }]));
    },
    queueStats: (pool) => client.queueStats(pool),
    async upsertCredential(c) {
      await secrets.putCredential(c);
    },
    async deleteCredential(name, owner) {
      try {
        await secrets.deleteCredential(name, owner);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return;
        throw err;
      }
    },
    putSchedule: (name, spec) => client.putSchedule(name, { ...spec, source: 'kubernetes' }),
    async getSchedule(name) {
      try {
        return await client.getSchedule(name);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }
    },
    async deleteSchedule(name) {
      try {
        await client.deleteSchedule(name, 'kubernetes');
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return;
        throw err;
      }
    },
    async credentialOwner(name) {
      try {
        const c = await secrets.getCredential(name); // metadata only: no data is decrypted or cached
        return c.owner ? { owner: c.owner } : {};
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
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
