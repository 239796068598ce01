/**
 * The resource kinds the fake serves: their REST coordinates and the per-kind behaviour of the
 * real API server (status/scale subresources, generation, create-on-update, name rule, printer
 * columns). Custom resources are described from their CRD documents, as the real server does.
 */
export type Obj = Record<string, any>;

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  format?: string;
  description?: string;
  priority?: number;
}

export interface ResourceDef {
  group: string; // '' for core
  version: string;
  plural: string;
  kind: string;
  singular?: string;
  shortNames?: string[];
  categories?: string[];
  /** Cluster-scoped when false (Namespace, ClusterRole…). Default true. */
  namespaced?: boolean;
  /** The object has a status subresource (`/status`). */
  status?: boolean;
  /** The object has a scale subresource. Paths are dot paths. */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
  /**
   * Generation is bumped on changes outside metadata (and outside status when `status`), and when
   * deletion starts.
   */
  generation?: boolean;
  /** A custom resource: strategic-merge patches are refused (415), as the real server does. */
  custom?: boolean;
  /** PUT of a missing object creates it (the real server allows it for Leases, Events and RBAC). */
  createOnUpdate?: boolean;
  /** metadata.name rule: DNS-1123 subdomain (most kinds) or label (Namespace, Service). */
  nameRule?: 'subdomain' | 'label';
  /** The CRD's additionalPrinterColumns, for Table responses. */
  printerColumns?: PrinterColumn[];
}

const RBAC = 'rbac.authorization.k8s.io';

/** Built-in kinds: what the operator, the chart's RBAC and kubectl touch. */
export const BUILTIN_RESOURCES: ResourceDef[] = [
  { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', singular: 'namespace', shortNames: ['ns'], namespaced: false, status: true, nameRule: 'label' },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', singular: 'secret' },
  { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', singular: 'configmap', shortNames: ['cm'] },
  { group: '', version: 'v1', plural: 'serviceaccounts', kind: 'ServiceAccount', singular: 'serviceaccount', shortNames: ['sa'] },
  { group: '', version: 'v1', plural: 'events', kind: 'Event', singular: 'event', shortNames: ['ev'], createOnUpdate: true },
  { group: 'events.k8s.io', version: 'v1', plural: 'events', kind: 'Event', singular: 'event', shortNames: ['ev'], createOnUpdate: true },
  { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease', singular: 'lease', createOnUpdate: true },
  {
    group: 'apps', version: 'v1', plural: 'statefulsets', kind: 'StatefulSet', singular: 'statefulset', shortNames: ['sts'], categories: ['all'],
    status: true, generation: true,
    // The real StatefulSet Scale reports spec.selector rendered as a label-selector string.
    scale: { specReplicasPath: 'spec.replicas', statusReplicasPath: 'status.replicas', labelSelectorPath: 'spec.selector' },
  },
  { group: RBAC, version: 'v1', plural: 'roles', kind: 'Role', singular: 'role', createOnUpdate: true },
  { group: RBAC, version: 'v1', plural: 'rolebindings', kind: 'RoleBinding', singular: 'rolebinding', createOnUpdate: true },
  { group: RBAC, version: 'v1', plural: 'clusterroles', kind: 'ClusterRole', singular: 'clusterrole', namespaced: false, createOnUpdate: true },
  { group: RBAC, version: 'v1', plural: 'clusterrolebindings', kind: 'ClusterRoleBinding', singular: 'clusterrolebinding', namespaced: false, createOnUpdate: true },
];

/** Playflow's kinds when no CRD documents are given (no schema, printer columns or CEL). */
export const PLAYFLOW_RESOURCES: ResourceDef[] = [
  { group: 'playflow.io', version: 'v1alpha1', plural: 'playbooks', kind: 'Playbook', status: true, generation: true, custom: true },
  { group: 'playflow.io', version: 'v1alpha1', plural: 'credentials', kind: 'Credential', status: true, generation: true, custom: true },
  {
    group: 'playflow.io', version: 'v1alpha1', plural: 'workerpools', kind: 'WorkerPool', status: true, generation: true, custom: true,
    scale: { specReplicasPath: 'spec.replicas', statusReplicasPath: 'status.replicas', labelSelectorPath: 'status.selector' },
  },
  { group: 'playflow.io', version: 'v1alpha1', plural: 'schedules', kind: 'Schedule', status: true, generation: true, custom: true },
];

export const DEFAULT_RESOURCES: ResourceDef[] = [...BUILTIN_RESOURCES, ...PLAYFLOW_RESOURCES];

/** The served version of a CRD the fake uses (the storage version). */
export function crdVersion(crd: Obj): Obj {
  return crd.spec.versions.find((v: Obj) => v.storage) ?? crd.spec.versions[0];
}

const dotPath = (p: string): string => p.replace(/^\./, '');

/** A ResourceDef from a CustomResourceDefinition document. */
export function crdResourceDef(crd: Obj): ResourceDef {
  const v = crdVersion(crd);
  const sub = v.subresources ?? {};
  return {
    group: crd.spec.group,
    version: v.name,
    plural: crd.spec.names.plural,
    kind: crd.spec.names.kind,
    singular: crd.spec.names.singular ?? crd.spec.names.kind.toLowerCase(),
    shortNames: crd.spec.names.shortNames,
    categories: crd.spec.names.categories,
    namespaced: crd.spec.scope !== 'Cluster',
    status: sub.status !== undefined,
    scale: sub.scale ? {
      specReplicasPath: dotPath(sub.scale.specReplicasPath),
      statusReplicasPath: dotPath(sub.scale.statusReplicasPath),
      ...(sub.scale.labelSelectorPath ? { labelSelectorPath: dotPath(sub.scale.labelSelectorPath) } : {}),
    } : undefined,
    generation: true,
    custom: true,
    printerColumns: v.additionalPrinterColumns,
  };
}

/** Resources served: built-ins plus either the CRDs' kinds or the schema-less Playflow defaults. */
export function resourcesFor(crds: Obj[] | undefined): ResourceDef[] {
  if (!crds?.length) return DEFAULT_RESOURCES;
  const fromCrds = crds.map(crdResourceDef);
  const rest = PLAYFLOW_RESOURCES.filter((p) => !fromCrds.some((c) => c.group === p.group && c.plural === p.plural));
  return [...BUILTIN_RESOURCES, ...fromCrds, ...rest];
}

export const isNamespaced = (r: ResourceDef): boolean => r.namespaced !== false;

export function resKey(r: ResourceDef): string {
  return `${r.group}/${r.version}/${r.plural}`;
}

export function apiVersionOf(r: ResourceDef): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** `plural.group` (or `plural` for the core group), as the real server names resources in messages. */
export function qualifiedResource(r: ResourceDef): string {
  return r.group ? `${r.plural}.${r.group}` : r.plural;
}

/** `Kind.group` (or `Kind`), as the real server names kinds in Invalid messages. */
export function qualifiedKind(r: ResourceDef): string {
  return r.group ? `${r.kind}.${r.group}` : r.kind;
}

/**
 * A LabelSelector as the string of labels.Selector (what Scale.status.selector holds):
 * requirements sorted by key, `a=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`.
 */
export function formatLabelSelector(sel: Obj | undefined): string {
  if (!sel) return '';
  const reqs: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) reqs.push([k, `${k}=${String(v)}`]);
  for (const e of sel.matchExpressions ?? []) {
    const values = [...(e.values ?? [])].sort().join(',');
    const text = e.operator === 'In' ? `${e.key} in (${values})`
      : e.operator === 'NotIn' ? `${e.key} notin (${values})`
        : e.operator === 'Exists' ? String(e.key) : `!${e.key}`;
    reqs.push([String(e.key), text]);
  }
  return reqs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, t]) => t).join(',');
}
