/**
 * Discovery and OpenAPI, as much as kubectl needs to map kinds to resources (legacy discovery:
 * /api, /apis, /api/v1, /apis/<group>/<version>) and to see that the server validates fields
 * itself (OpenAPI v3: a PATCH operation per kind with the fieldValidation query parameter), so
 * `kubectl apply` sends `fieldValidation=Strict` instead of validating client-side. Custom
 * resources' component schemas are their CRD schemas; built-in kinds get a permissive object
 * schema (kubectl then falls back to its compiled-in types for strategic merge).
 */
import { createHash } from 'node:crypto';
import { apiVersionOf, isNamespaced, type Obj, type ResourceDef } from './resources.js';

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
const SUB_VERBS = ['get', 'patch', 'update'];

export const SERVER_VERSION = {
  major: '1', minor: '33', gitVersion: 'v1.33.0-fake', gitCommit: 'fake', gitTreeState: 'clean',
  buildDate: '2025-01-01T00:00:00Z', goVersion: 'go1.24', compiler: 'gc', platform: 'linux/amd64',
};

function groupVersions(resources: ResourceDef[]): Map<string, ResourceDef[]> {
  const out = new Map<string, ResourceDef[]>();
  for (const r of resources) {
    const gv = apiVersionOf(r);
    out.set(gv, [...(out.get(gv) ?? []), r]);
  }
  return out;
}

export function apiVersions(host: string): Obj {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: host }] };
}

export function apiGroupList(resources: ResourceDef[]): Obj {
  const groups = new Map<string, string[]>();
  for (const r of resources) {
    if (!r.group) continue;
    const vs = groups.get(r.group) ?? [];
    if (!vs.includes(r.version)) vs.push(r.version);
    groups.set(r.group, vs);
  }
  return {
    kind: 'APIGroupList', apiVersion: 'v1',
    groups: [...groups].map(([name, versions]) => ({
      name,
      versions: versions.map((version) => ({ groupVersion: `${name}/${version}`, version })),
      preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] },
    })),
  };
}

export function apiGroup(resources: ResourceDef[], group: string): Obj | undefined {
  return apiGroupList(resources).groups.find((g: Obj) => g.name === group);
}

/** APIResourceList of one group version, or undefined when it is not served. */
export function apiResourceList(resources: ResourceDef[], groupVersion: string): Obj | undefined {
  const defs = groupVersions(resources).get(groupVersion);
  if (!defs) return undefined;
  const out: Obj[] = [];
  for (const r of defs) {
    const base = { namespaced: isNamespaced(r), kind: r.kind };
    out.push({
      name: r.plural, singularName: r.singular ?? r.kind.toLowerCase(), ...base, verbs: VERBS,
      ...(r.shortNames?.length ? { shortNames: r.shortNames } : {}),
      ...(r.categories?.length ? { categories: r.categories } : {}),
      storageVersionHash: createHash('sha256').update(`${groupVersion}/${r.kind}`).digest('base64').slice(0, 11),
    });
    if (r.status) out.push({ name: `${r.plural}/status`, singularName: '', ...base, verbs: SUB_VERBS });
    if (r.scale) out.push({ name: `${r.plural}/scale`, singularName: '', ...base, group: 'autoscaling', version: 'v1', kind: 'Scale', verbs: SUB_VERBS });
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion, resources: out };
}

/** Reverse-domain component name, as the real server names schemas (`io.playflow.v1alpha1.Playbook`). */
function componentName(r: ResourceDef): string {
  if (!r.group) return `io.k8s.api.core.${r.version}.${r.kind}`;
  if (!r.group.includes('.') || r.group.endsWith('.k8s.io')) {
    return `io.k8s.api.${r.group.replace(/\.k8s\.io$/, '').replace(/\./g, '')}.${r.version}.${r.kind}`;
  }
  return `${r.group.split('.').reverse().join('.')}.${r.version}.${r.kind}`;
}

function opPath(r: ResourceDef): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  return isNamespaced(r) ? `${base}/namespaces/{namespace}/${r.plural}/{name}` : `${base}/${r.plural}/{name}`;
}

/** The OpenAPI v3 document of one group version (paths for named objects, component schemas). */
export function openApiV3(resources: ResourceDef[], groupVersion: string, schemaOf: (r: ResourceDef) => Obj | undefined): Obj | undefined {
  const defs = groupVersions(resources).get(groupVersion);
  if (!defs) return undefined;
  const paths: Obj = {};
  const schemas: Obj = {};
  for (const r of defs) {
    const gvk = { group: r.group, version: r.version, kind: r.kind };
    const ref = { $ref: `#/components/schemas/${componentName(r)}` };
    const query = (name: string) => ({ name, in: 'query', schema: { type: 'string', uniqueItems: true } });
    const op = (action: string, params: string[]) => ({
      operationId: `${action}${r.kind}`,
      'x-kubernetes-action': action,
      'x-kubernetes-group-version-kind': gvk,
      parameters: params.map(query),
      responses: { 200: { description: 'OK', content: { 'application/json': { schema: ref } } } },
    });
    paths[opPath(r)] = {
      parameters: [
        { name: 'name', in: 'path', required: true, schema: { type: 'string', uniqueItems: true } },
        ...(isNamespaced(r) ? [{ name: 'namespace', in: 'path', required: true, schema: { type: 'string', uniqueItems: true } }] : []),
      ],
      get: op('get', []),
      put: op('put', ['dryRun', 'fieldManager', 'fieldValidation']),
      patch: op('patch', ['dryRun', 'fieldManager', 'fieldValidation', 'force']),
      delete: op('delete', ['dryRun', 'gracePeriodSeconds', 'propagationPolicy']),
    };
    schemas[componentName(r)] = {
      ...(schemaOf(r) ?? { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }),
      'x-kubernetes-group-version-kind': [gvk],
    };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: SERVER_VERSION.gitVersion }, paths, components: { schemas } };
}

/** /openapi/v3: where each group version's document is, with a content hash for clients' caches. */
export function openApiV3Root(resources: ResourceDef[], schemaOf: (r: ResourceDef) => Obj | undefined): Obj {
  const paths: Obj = {};
  for (const gv of groupVersions(resources).keys()) {
    const rel = gv.includes('/') ? `apis/${gv}` : `api/${gv}`;
    const hash = createHash('sha512').update(JSON.stringify(openApiV3(resources, gv, schemaOf))).digest('hex').slice(0, 32).toUpperCase();
    paths[rel] = { serverRelativeURL: `/openapi/v3/${rel}?hash=${hash}` };
  }
  return { paths };
}
