/**
 * What of the worker itself no playbook may read, whatever its tool: its own settings (the API
 * token that opens every endpoint, the broker's URL with its credentials) and the files that
 * expose them (`/proc/<pid>/environ`, `/proc/<pid>/mem`), or the pod's service-account token. A
 * playbook is not trusted with these; without this a `secret` step with `provider: env, name:
 * PLAYFLOW_API_TOKEN`, or a `file` step reading `/proc/self/environ`, handed them to the next step.
 */
import { realpathSync } from 'node:fs';
import { dirname, sep } from 'node:path';

const SETTING_PREFIXES = ['PLAYFLOW_', 'WORKER_', 'BROKER_', 'NATS_'];
const SETTINGS = new Set(['DATABASE_URL', 'SERVER_API_URL', 'SERVER_URL_FOR_WORKERS', 'FLOW_SERVER_URL']);

/** An environment variable the worker itself is configured by. */
export function isWorkerSetting(name: string): boolean {
  return SETTINGS.has(name) || SETTING_PREFIXES.some((p) => name.startsWith(p));
}

const PRIVATE_DIRS = ['/proc', '/sys', '/var/run/secrets/kubernetes.io', '/run/secrets/kubernetes.io'];

/** The real path (links resolved; for a file not there yet, its folder's), or the path as given. */
function real(full: string): string {
  try {
    return realpathSync.native(full);
  } catch {
    try {
      return `${realpathSync.native(dirname(full))}${sep}${full.slice(dirname(full).length + 1)}`;
    } catch {
      return full;
    }
  }
}

/** An absolute path inside the worker's process files or the pod's service account, links followed. */
export function isWorkerPrivatePath(full: string): boolean {
  const r = real(full);
  return PRIVATE_DIRS.some((d) => r === d || r.startsWith(`${d}/`));
}
