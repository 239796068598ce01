/**
 * Who may write or delete a catalog path or a credential name. The first writer claims it: a
 * Kubernetes resource (an owner) or an API client (no owner). Afterwards only the same owner —
 * same kind, namespace and name, any uid (a re-created resource adopts what its predecessor
 * retained) — may replace it; an API client may not replace what a resource owns, and a resource
 * may not take over what an API client wrote. Refusals are 409 `owned_by_other` naming the holder.
 */
import type { ResourceOwner } from '../common/protocol.js';
import { badRequest, conflict } from './errors.js';

const NAME_MAX = 253;

/** Checks and normalises an owner from a request body; undefined stays undefined. */
export function parseOwner(raw: unknown, field = 'owner'): ResourceOwner | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw badRequest(`${field} must be an object {kind, namespace, name, uid?}`, { field });
  const o = raw as Record<string, unknown>;
  const out: Partial<ResourceOwner> = {};
  for (const k of ['kind', 'namespace', 'name'] as const) {
    const v = o[k];
    if (typeof v !== 'string' || v === '' || v.length > NAME_MAX || v.includes('/')) {
      throw badRequest(`${field}.${k} must be a non-empty string of at most ${NAME_MAX} characters without '/'`, { field: `${field}.${k}` });
    }
    out[k] = v;
  }
  if (o.uid !== undefined) {
    if (typeof o.uid !== 'string' || o.uid.length > NAME_MAX) throw badRequest(`${field}.uid must be a string of at most ${NAME_MAX} characters`, { field: `${field}.uid` });
    out.uid = o.uid;
  }
  return out as ResourceOwner;
}

/** `Kind/namespace/name` (the DELETE `?owner=` form) → owner. */
export function parseOwnerRef(ref: string | undefined): ResourceOwner | undefined {
  if (ref === undefined || ref === '') return undefined;
  const parts = ref.split('/');
  if (parts.length !== 3 || parts.some((p) => p === '')) throw badRequest(`owner must be Kind/namespace/name, got '${ref}'`, { field: 'owner' });
  return { kind: parts[0]!, namespace: parts[1]!, name: parts[2]! };
}

export function sameOwner(a: ResourceOwner | null | undefined, b: ResourceOwner | null | undefined): boolean {
  if (!a || !b) return !a && !b;
  return a.kind === b.kind && a.namespace === b.namespace && a.name === b.name;
}

export function describeOwner(o: ResourceOwner | null | undefined): string {
  if (!o) return 'an API client (no owner)';
  return `${o.kind} ${o.namespace}/${o.name}${o.uid ? ` (uid ${o.uid})` : ''}`;
}

/** Throws 409 unless `claimant` may write what `holder` holds. */
export function checkClaim(what: string, holder: ResourceOwner | null | undefined, claimant: ResourceOwner | null | undefined): void {
  if (sameOwner(holder, claimant)) return;
  const hint = holder ? 'change or delete it through that resource' : 'delete it through the API first, or choose another name';
  throw conflict('owned_by_other', `${what} is owned by ${describeOwner(holder)}; ${hint}`, { owner: holder ?? null });
}
