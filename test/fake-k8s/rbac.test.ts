/**
 * RBAC in the fake API server: Roles, ClusterRoles and their bindings loaded from documents (as a
 * chart renders them) decide every request of a service account token; denials are 403 with the
 * real server's message and are logged in `denied`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl, type KubectlError } from '../helpers/kubectl.js';
import { caller } from './http.js';
import { FakeKubeServer, loadCrds } from './server.js';

const SA = 'system:serviceaccount:playflow:playflow-operator';

const docs = [
  // As helm template renders it: no namespace (the release namespace applies).
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'playflow-operator' } },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'operator', namespace: 'team' },
    rules: [
      { apiGroups: ['playflow.io'], resources: ['playbooks'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: ['playflow.io'], resources: ['playbooks/status'], verbs: ['patch'] },
      { apiGroups: ['apps'], resources: ['statefulsets/scale'], verbs: ['get', 'patch'], resourceNames: ['workers'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'operator', namespace: 'team' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'operator' },
    subjects: [{ kind: 'ServiceAccount', name: 'playflow-operator', namespace: 'playflow' }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'ns-reader' },
    rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list'] }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'ns-reader' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'ns-reader' },
    subjects: [{ kind: 'Group', name: 'system:serviceaccounts:playflow', apiGroup: 'rbac.authorization.k8s.io' }],
  },
  null, // helm renders empty documents
];

const forbiddenMsg = (verb: string, resource: string, group: string, where: string) =>
  `User "${SA}" cannot ${verb} resource "${resource}" in API group "${group}" ${where}`;

describe('RBAC in the fake API server', () => {
  const server = new FakeKubeServer({ crds: loadCrds(), rbac: docs, releaseNamespace: 'playflow', namespaces: ['team', 'other'] });
  let sa: ReturnType<typeof caller>;
  let admin: ReturnType<typeof caller>;
  const pb = (ns: string, name = '') => `/apis/playflow.io/v1alpha1/namespaces/${ns}/playbooks${name ? `/${name}` : ''}`;

  beforeAll(async () => {
    await server.start();
    sa = caller(() => server.url, server.serviceAccountToken('playflow', 'playflow-operator'));
    admin = caller(() => server.url, server.adminToken);
    for (const ns of ['team', 'other']) {
      const r = await admin('POST', pb(ns), { metadata: { name: 'p' }, spec: { workflow: [{ step: 'start' }] } });
      expect(r.status).toBe(201);
    }
    await admin('POST', '/api/v1/namespaces/team/secrets', { metadata: { name: 's' }, stringData: { a: 'b' } });
    for (const name of ['workers', 'other']) {
      await admin('POST', '/apis/apps/v1/namespaces/team/statefulsets', {
        metadata: { name }, spec: { replicas: 1, serviceName: name, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'i' }] } } },
      });
    }
  });
  afterAll(async () => {
    await server.stop();
  });

  it('loads the documents, those without a namespace into the release namespace (created)', () => {
    expect(server.getObject('serviceaccounts', 'playflow', 'playflow-operator', '')).toBeDefined();
    expect(server.getObject('namespaces', undefined, 'playflow', '')!.status.phase).toBe('Active');
    expect(server.getObject('clusterroles', undefined, 'ns-reader')).toBeDefined();
  });

  it('allows what the bound Role grants: get, list, watch, patch, the status subresource', async () => {
    expect((await sa('GET', pb('team', 'p'))).status).toBe(200);
    expect((await sa('GET', pb('team'))).status).toBe(200);
    expect((await sa('PATCH', pb('team', 'p'), { metadata: { labels: { a: 'b' } } }, 'application/merge-patch+json')).status).toBe(200);
    expect((await sa('PATCH', `${pb('team', 'p')}/status`, { status: { catalogVersion: 1 } }, 'application/merge-patch+json')).status).toBe(200);
    expect((await sa('GET', '/api/v1/namespaces/team/secrets/s')).status).toBe(200);
    // The ClusterRoleBinding to the service accounts' group grants namespaces cluster-wide.
    expect((await sa('GET', '/api/v1/namespaces')).status).toBe(200);
    // Discovery needs no grant (system:discovery).
    expect((await sa('GET', '/apis/playflow.io/v1alpha1')).status).toBe(200);
  });

  it('denies the rest with 403 and the real server\'s message, and logs each denial', async () => {
    const before = server.denied.length;
    const create = await sa('POST', pb('team'), { metadata: { name: 'q' }, spec: { workflow: [{ step: 'start' }] } });
    expect(create.status).toBe(403);
    expect(create.body).toMatchObject({
      kind: 'Status', status: 'Failure', reason: 'Forbidden', code: 403,
      message: `playbooks.playflow.io is forbidden: ${forbiddenMsg('create', 'playbooks', 'playflow.io', 'in the namespace "team"')}`,
      details: { group: 'playflow.io', kind: 'playbooks' },
    });
    const otherNs = await sa('GET', pb('other', 'p'));
    expect(otherNs.body.message).toBe(`playbooks.playflow.io "p" is forbidden: ${forbiddenMsg('get', 'playbooks', 'playflow.io', 'in the namespace "other"')}`);
    const allNs = await sa('GET', '/apis/playflow.io/v1alpha1/playbooks');
    expect(allNs.body.message).toBe(`playbooks.playflow.io is forbidden: ${forbiddenMsg('list', 'playbooks', 'playflow.io', 'at the cluster scope')}`);
    const put = await sa('PUT', pb('team', 'p'), { metadata: { name: 'p' }, spec: { workflow: [{ step: 'start' }] } });
    expect(put.body.message).toContain(forbiddenMsg('update', 'playbooks', 'playflow.io', 'in the namespace "team"'));
    // Subresources are `resource/subresource`: patch of playbooks/status does not cover update.
    const statusPut = await sa('PUT', `${pb('team', 'p')}/status`, { metadata: { name: 'p' }, status: {} });
    expect(statusPut.body.message).toContain(forbiddenMsg('update', 'playbooks/status', 'playflow.io', 'in the namespace "team"'));
    // Core group is "", collection delete is deletecollection.
    const del = await sa('DELETE', '/api/v1/namespaces/team/secrets/s');
    expect(del.body.message).toBe(`secrets "s" is forbidden: ${forbiddenMsg('delete', 'secrets', '', 'in the namespace "team"')}`);
    const delAll = await sa('DELETE', '/api/v1/namespaces/team/secrets');
    expect(delAll.body.message).toContain(forbiddenMsg('deletecollection', 'secrets', '', 'in the namespace "team"'));
    const watch = await sa('GET', '/api/v1/namespaces/team/secrets?watch=true');
    expect(watch.body.message).toContain(forbiddenMsg('watch', 'secrets', '', 'in the namespace "team"'));
    expect(server.denied.length - before).toBe(8);
    expect(server.denied.at(-1)).toMatchObject({ user: SA, verb: 'watch', namespace: 'team', resource: 'secrets' });
    // Denied writes changed nothing.
    expect(server.getObject('secrets', 'team', 's')).toBeDefined();
    expect(server.getObject('playbooks', 'team', 'q')).toBeUndefined();
  });

  it('honours resourceNames: the scale of one StatefulSet only', async () => {
    const scale = (name: string) => `/apis/apps/v1/namespaces/team/statefulsets/${name}/scale`;
    expect((await sa('PATCH', scale('workers'), { spec: { replicas: 2 } }, 'application/merge-patch+json')).status).toBe(200);
    const other = await sa('PATCH', scale('other'), { spec: { replicas: 2 } }, 'application/merge-patch+json');
    expect(other.status).toBe(403);
    expect(other.body.message).toBe(`statefulsets.apps "other" is forbidden: ${forbiddenMsg('patch', 'statefulsets/scale', 'apps', 'in the namespace "team"')}`);
  });

  it('rejects unknown tokens with 401; the admin token is allowed everything', async () => {
    expect((await caller(() => server.url, 'nobody')('GET', pb('team'))).status).toBe(401);
    expect((await admin('DELETE', '/api/v1/namespaces/team/secrets/s')).status).toBe(200);
  });

  it('takes Roles applied later through the API into account at once', async () => {
    expect((await sa('GET', '/apis/coordination.k8s.io/v1/namespaces/other/leases')).status).toBe(403);
    expect((await admin('POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/other/roles', {
      metadata: { name: 'leases' }, rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['*'] }],
    })).status).toBe(201);
    expect((await admin('POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/other/rolebindings', {
      metadata: { name: 'leases' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'leases' },
      subjects: [{ kind: 'ServiceAccount', name: 'playflow-operator', namespace: 'playflow' }],
    })).status).toBe(201);
    expect((await sa('GET', '/apis/coordination.k8s.io/v1/namespaces/other/leases')).status).toBe(200);
  });

  it('kubectl with the service account\'s token sees the same denial', async () => {
    const kubeconfig = server.writeKubeconfig(server.serviceAccountToken('playflow', 'playflow-operator'));
    const out = await kubectl(['get', 'playbooks', '-n', 'team', '-o', 'name'], { kubeconfig });
    expect(out.trim()).toBe('playbook.playflow.io/p');
    const err = await kubectl(['get', 'playbooks', '-n', 'other'], { kubeconfig }).then(() => '', (e: KubectlError) => e.stderr);
    expect(err).toContain(`Error from server (Forbidden): playbooks.playflow.io is forbidden: ${forbiddenMsg('list', 'playbooks', 'playflow.io', 'in the namespace "other"')}`);
  });
});
