/**
 * Credential scope (issue 20): which playbooks may use a credential.
 *
 *   scope: {paths: ["team-a/**", "etl/load_*"], namespaces: ["team-a"]}
 *
 * An execution may use the credential when its playbook path matches one of `paths` OR the
 * Kubernetes namespace of the resource that owns its catalog entry is one of `namespaces`. No
 * scope (null) = any playbook, as before scoping existed. Globs: `**` any characters including
 * `/`, `*` any characters but `/`, `?` one character but `/`; everything else is literal.
 */
import { badRequest } from '../errors.js';
import { isPlainObject } from './common.js';

import type { CredentialScope } from '../../common/secrets.js';
export type { CredentialScope };

const MAX_ITEMS = 100;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * The scope of a credential write: `undefined` (not given), `null` (remove the scope) or a
 * checked scope. Bad input is a 400 naming the field.
 */
export function parseScope(input: unknown): CredentialScope | null | undefined {
  if (input === undefined) return undefined;
  if (input === null) return null;
  if (!isPlainObject(input)) throw badRequest('scope must be an object {paths?: [glob], namespaces?: [name]} or null', { field: 'scope' });
  const extra = Object.keys(input).filter((k) => k !== 'paths' && k !== 'namespaces');
  if (extra.length) throw badRequest(`scope has unknown field(s) ${extra.join(', ')}; allowed: paths, namespaces`, { field: 'scope' });
  const out: CredentialScope = {};
  for (const key of ['paths', 'namespaces'] as const) {
    const v = input[key];
    if (v === undefined || v === null) continue;
    if (!Array.isArray(v)) throw badRequest(`scope.${key} must be an array of strings`, { field: `scope.${key}` });
    if (v.length > MAX_ITEMS) throw badRequest(`scope.${key} has ${v.length} items; at most ${MAX_ITEMS}`, { field: `scope.${key}` });
    v.forEach((item, i) => {
      const field = `scope.${key}[${i}]`;
      if (typeof item !== 'string' || item.trim() === '' || item.length > 1024) throw badRequest(`${field} must be a non-empty string of at most 1024 characters`, { field });
      if (key === 'paths' && item.startsWith('/')) throw badRequest(`${field} '${item}' must not start with '/' (catalog paths are relative, e.g. team-a/**)`, { field });
      if (key === 'namespaces' && !(item.length <= 63 && NAMESPACE.test(item))) throw badRequest(`${field} '${item}' is not a Kubernetes namespace name`, { field });
    });
    if (v.length) out[key] = [...new Set(v as string[])];
  }
  if (!out.paths && !out.namespaces) {
    throw badRequest('scope must list at least one path glob or namespace (use scope: null to let every playbook use the credential)', { field: 'scope' });
  }
  return out;
}

const globCache = new Map<string, RegExp>();

export function globToRegExp(glob: string): RegExp {
  let re = globCache.get(glob);
  if (re) return re;
  let src = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i];
    if (ch === '*' && glob[i + 1] === '*') {
      src += '.*';
      i++;
    } else if (ch === '*') src += '[^/]*';
    else if (ch === '?') src += '[^/]';
    else src += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  re = new RegExp(`^${src}$`, 's');
  if (globCache.size > 1000) globCache.clear();
  globCache.set(glob, re);
  return re;
}

/** What the scope is checked against: the execution's playbook path and its owner's namespace. */
export interface ScopeSubject {
  path: string;
  namespace?: string | null;
}

export function scopeAllows(scope: CredentialScope | null | undefined, who: ScopeSubject): boolean {
  if (!scope) return true;
  const path = who.path.replace(/^\/+/, '');
  if (scope.paths?.some((g) => globToRegExp(g).test(path))) return true;
  return !!who.namespace && !!scope.namespaces?.includes(who.namespace);
}

/** For error messages: `paths team-a/**; namespaces team-a`. */
export function describeScope(scope: CredentialScope): string {
  const parts: string[] = [];
  if (scope.paths?.length) parts.push(`paths ${scope.paths.join(', ')}`);
  if (scope.namespaces?.length) parts.push(`namespaces ${scope.namespaces.join(', ')}`);
  return parts.join('; ');
}
