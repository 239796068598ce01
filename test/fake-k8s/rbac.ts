/**
 * RBAC as the real authorizer evaluates it: ClusterRoleBindings grant their ClusterRole
 * everywhere, RoleBindings grant their Role or ClusterRole in their namespace; a rule matches on
 * apiGroups, resources (`plural`, `plural/subresource`, `*`, `*\/subresource`), verbs and
 * resourceNames. The roles and bindings are read from the fake's own store at each request, so
 * objects applied later (kubectl apply of a Role) take effect at once.
 */
import type { Obj } from './resources.js';

export interface UserInfo {
  name: string;
  groups: string[];
}

export interface Attributes {
  user: UserInfo;
  verb: string;
  /** '' for cluster-scoped requests and all-namespaces lists. */
  namespace: string;
  apiGroup: string;
  resource: string;
  subresource: string;
  /** '' for collections and create. */
  name: string;
}

export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

export const ADMIN_USER: UserInfo = { name: 'system:admin', groups: ['system:masters', 'system:authenticated'] };

/** Reads roles and bindings (by plural) from the store. */
export type RbacStore = (plural: 'roles' | 'rolebindings' | 'clusterroles' | 'clusterrolebindings', namespace?: string) => Obj[];

function subjectMatches(s: Obj, user: UserInfo, bindingNamespace: string): boolean {
  switch (s.kind) {
    case 'ServiceAccount':
      return user.name === `system:serviceaccount:${s.namespace || bindingNamespace}:${s.name}`;
    case 'User':
      return user.name === s.name;
    case 'Group':
      return user.groups.includes(s.name);
    default:
      return false;
  }
}

function ruleMatches(rule: Obj, a: Attributes): boolean {
  if (!(rule.verbs ?? []).some((v: string) => v === '*' || v === a.verb)) return false;
  if (!(rule.apiGroups ?? []).some((g: string) => g === '*' || g === a.apiGroup)) return false;
  const combined = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const resOk = (rule.resources ?? []).some((r: string) => r === '*' || r === combined
    || (a.subresource !== '' && r === `*/${a.subresource}`));
  if (!resOk) return false;
  const names: string[] = rule.resourceNames ?? [];
  return names.length === 0 || (a.name !== '' && names.includes(a.name));
}

export class RbacAuthorizer {
  constructor(private readonly store: RbacStore) {}

  /** True when some binding of the user grants the request. */
  authorize(a: Attributes): boolean {
    if (a.user.groups.includes('system:masters')) return true;
    const clusterRoles = new Map(this.store('clusterroles').map((r) => [r.metadata.name as string, r]));
    for (const b of this.store('clusterrolebindings')) {
      if (b.roleRef?.kind !== 'ClusterRole') continue;
      if (!(b.subjects ?? []).some((s: Obj) => subjectMatches(s, a.user, ''))) continue;
      if ((clusterRoles.get(b.roleRef.name)?.rules ?? []).some((r: Obj) => ruleMatches(r, a))) return true;
    }
    if (!a.namespace) return false;
    const roles = new Map(this.store('roles', a.namespace).map((r) => [r.metadata.name as string, r]));
    for (const b of this.store('rolebindings', a.namespace)) {
      if (!(b.subjects ?? []).some((s: Obj) => subjectMatches(s, a.user, a.namespace))) continue;
      const role = b.roleRef?.kind === 'Role' ? roles.get(b.roleRef.name) : b.roleRef?.kind === 'ClusterRole' ? clusterRoles.get(b.roleRef.name) : undefined;
      if ((role?.rules ?? []).some((r: Obj) => ruleMatches(r, a))) return true;
    }
    return false;
  }
}

/** The reason of a denial, worded as the real server's forbiddenMessage. */
export function forbiddenReason(a: Attributes): string {
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const where = a.namespace ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  return `User "${a.user.name}" cannot ${a.verb} resource "${resource}" in API group "${a.apiGroup}" ${where}`;
}
