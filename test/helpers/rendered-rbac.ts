/**
 * RBAC over rendered manifests, the way the API server's authorizer decides for a service
 * account: a request is allowed when a RoleBinding in the request's namespace (or a
 * ClusterRoleBinding) binds the account to a Role/ClusterRole with a rule matching the API group,
 * the resource (`plural` or `plural/subresource`) and the verb. Used by the chart test to check
 * that the rendered Roles cover every call the operator makes.
 */
type Doc = { kind: string; metadata: { name: string; namespace?: string }; rules?: Rule[]; roleRef?: any; subjects?: any[] };
interface Rule { apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[] }

export interface Access {
  namespace: string;
  group: string;
  resource: string;
  verb: string;
}

const matches = (list: string[] | undefined, value: string) => !!list && (list.includes('*') || list.includes(value));

/** `helm template` leaves namespace out where the template does: those go to the release's, `sa.namespace`. */
export function rbacAllows(docs: Doc[], sa: { name: string; namespace: string }, a: Access): boolean {
  const nsOf = (d: Doc) => d.metadata.namespace ?? sa.namespace;
  const bound = (b: Doc) => (b.subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === sa.name && (s.namespace ?? nsOf(b)) === sa.namespace);
  const roles: Doc[] = [];
  for (const b of docs) {
    if (!bound(b)) continue;
    if (b.kind === 'RoleBinding' && nsOf(b) === a.namespace) {
      const role = docs.find((r) => r.kind === b.roleRef.kind && r.metadata.name === b.roleRef.name && (r.kind === 'ClusterRole' || nsOf(r) === a.namespace));
      if (role) roles.push(role);
    } else if (b.kind === 'ClusterRoleBinding') {
      const role = docs.find((r) => r.kind === 'ClusterRole' && r.metadata.name === b.roleRef.name);
      if (role) roles.push(role);
    }
  }
  return roles.some((r) => (r.rules ?? []).some((rule) =>
    matches(rule.apiGroups, a.group) && matches(rule.resources, a.resource) && matches(rule.verbs, a.verb) && !rule.resourceNames?.length));
}

/**
 * Every API call of the operator (operator/*.ts, operator/controllers/*.ts: informers list and
 * watch, reconcilers patch objects, status, finalizers and StatefulSet scale, the recorder writes
 * Events, the elector holds a Lease in its own namespace).
 */
export function operatorAccess(o: { watched: string[]; leaseNamespace: string }): Access[] {
  const out: Access[] = [];
  for (const namespace of o.watched) {
    const add = (group: string, resources: string[], verbs: string[]) => {
      for (const resource of resources) for (const verb of verbs) out.push({ namespace, group, resource, verb });
    };
    add('playflow.io', ['playbooks', 'credentials', 'workerpools'], ['list', 'watch', 'patch']);
    add('playflow.io', ['playbooks/status', 'credentials/status', 'workerpools/status'], ['patch']);
    add('', ['secrets'], ['list', 'watch']);
    add('apps', ['statefulsets/scale'], ['get', 'patch']);
    add('', ['events'], ['create', 'patch']);
  }
  for (const verb of ['get', 'create', 'update']) out.push({ namespace: o.leaseNamespace, group: 'coordination.k8s.io', resource: 'leases', verb });
  return out;
}
