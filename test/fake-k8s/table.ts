/**
 * `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` responses, which `kubectl get` prints:
 * the CRD's additionalPrinterColumns (JSONPath, dates as ages) for custom resources, and columns
 * like the real server's printers for the built-in kinds.
 */
import { JSONPath } from 'jsonpath-plus';
import { type Obj, type PrinterColumn, type ResourceDef } from './resources.js';

/** duration.HumanDuration: `45s`, `3m20s`, `15m`, `5h3m`, `2d4h`, … */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${Math.floor(days / 365)}y` : `${Math.floor(days / 365)}y${days % 365}d`;
  return `${Math.floor(days / 365)}y`;
}

const age = (o: Obj): string => (o.metadata?.creationTimestamp ? humanDuration(Date.now() - Date.parse(o.metadata.creationTimestamp)) : '<unknown>');

interface Column {
  def: { name: string; type: string; format: string; description: string; priority: number };
  cell: (o: Obj) => unknown;
}

const NAME: Column = {
  def: { name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace.', priority: 0 },
  cell: (o) => o.metadata?.name,
};
const col = (name: string, cell: (o: Obj) => unknown, type = 'string', priority = 0): Column => ({
  def: { name, type, format: '', description: name, priority }, cell,
});
const AGE = col('Age', age);

/** A k8s JSONPath (`.status.conditions[?(@.type=="Ready")].status`): the first match, or undefined. */
export function evalJsonPath(obj: Obj, path: string): unknown {
  const p = path.replace(/^\{(.*)\}$/, '$1');
  const results = JSONPath({ path: `$${p}`, json: obj, wrap: true }) as unknown[];
  return results.length ? results[0] : undefined;
}

function crdColumns(cols: PrinterColumn[]): Column[] {
  return [NAME, ...cols.map((c): Column => ({
    def: { name: c.name, type: c.type, format: c.format ?? '', description: c.description ?? '', priority: c.priority ?? 0 },
    cell: (o) => {
      const v = evalJsonPath(o, c.jsonPath);
      if (v === undefined || v === null) return null;
      if (c.type === 'date') return typeof v === 'string' ? humanDuration(Date.now() - Date.parse(v)) : '<invalid>';
      if (typeof v === 'object') return JSON.stringify(v);
      return v;
    },
  }))];
}

const count = (m: Obj | undefined): number => Object.keys(m ?? {}).length;

function builtinColumns(def: ResourceDef): Column[] {
  switch (def.kind) {
    case 'Namespace': return [NAME, col('Status', (o) => o.status?.phase ?? 'Active'), AGE];
    case 'Secret': return [NAME, col('Type', (o) => o.type ?? 'Opaque'), col('Data', (o) => count(o.data), 'integer'), AGE];
    case 'ConfigMap': return [NAME, col('Data', (o) => count(o.data) + count(o.binaryData), 'integer'), AGE];
    case 'ServiceAccount': return [NAME, col('Secrets', (o) => (o.secrets ?? []).length, 'integer'), AGE];
    case 'StatefulSet': return [
      NAME, col('Ready', (o) => `${o.status?.readyReplicas ?? 0}/${o.spec?.replicas ?? 1}`), AGE,
      col('Containers', (o) => (o.spec?.template?.spec?.containers ?? []).map((c: Obj) => c.name).join(','), 'string', 1),
      col('Images', (o) => (o.spec?.template?.spec?.containers ?? []).map((c: Obj) => c.image).join(','), 'string', 1),
    ];
    case 'Lease': return [NAME, col('Holder', (o) => o.spec?.holderIdentity ?? ''), AGE];
    case 'Role': case 'ClusterRole': return [NAME, col('Created At', (o) => o.metadata?.creationTimestamp ?? '', 'date')];
    case 'RoleBinding': case 'ClusterRoleBinding': return [NAME, col('Role', (o) => `${o.roleRef?.kind}/${o.roleRef?.name}`), AGE];
    case 'Event': return [
      col('Last Seen', (o) => (o.lastTimestamp ?? o.eventTime ? humanDuration(Date.now() - Date.parse(o.lastTimestamp ?? o.eventTime)) : '<unknown>')),
      col('Type', (o) => o.type ?? ''), col('Reason', (o) => o.reason ?? ''),
      col('Object', (o) => `${String(o.involvedObject?.kind ?? o.regarding?.kind ?? '').toLowerCase()}/${o.involvedObject?.name ?? o.regarding?.name ?? ''}`),
      col('Message', (o) => o.message ?? o.note ?? ''),
    ];
    default: return [NAME, AGE];
  }
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

/** True when the Accept header asks for a meta.k8s.io Table (kubectl get's default). */
export function wantsTable(accept: string | undefined): boolean {
  return (accept ?? '').split(',').some((part) => /as=Table/.test(part) && /g=meta\.k8s\.io/.test(part));
}

export function toTable(def: ResourceDef, objects: Obj[], resourceVersion: string, include: IncludeObject = 'Metadata'): Obj {
  const cols = def.custom ? crdColumns(def.printerColumns ?? [{ name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }])
    : builtinColumns(def);
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion },
    columnDefinitions: cols.map((c) => c.def),
    rows: objects.map((o) => ({
      cells: cols.map((c) => c.cell(o) ?? null),
      ...(include === 'None' ? {} : {
        object: include === 'Object' ? o : {
          kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata,
        },
      }),
    })),
  };
}
