/**
 * The chart rendered by the real helm binary, as a release would be: the documents, and the
 * pieces a kubelet resolves (pod specs by component, Secret/ConfigMap values, the hook Jobs).
 */
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helm } from '../helpers/helm.js';

export const ROOT = path.resolve(import.meta.dirname, '..', '..');
export const CHART = path.join(ROOT, 'helm', 'playflow');

export type Doc = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  rules?: any[];
  roleRef?: any;
  subjects?: any[];
};

/**
 * The value sets of the chart tests (test/helm/chart.test.ts imports them too), so the release
 * test runs each one.
 */
export const VALUE_SETS: Record<string, string[]> = {
  defaults: [],
  externalDatabase: ['--set', 'postgresql.enabled=false', '--set', 'postgresql.external.existingSecret=pf-db'],
  externalNats: ['--set', 'nats.enabled=false', '--set', 'nats.external.existingSecret=pf-nats'],
  tokenOn: ['--set', 'apiToken.enabled=true', '--set', 'metrics.serviceMonitor.enabled=true', '--set', 'server.replicas=1'],
  anonymous: ['--set', 'apiToken.enabled=false'],
  watchOthers: ['--set', 'operator.watchNamespaces={team-a,team-b}', '--set', 'nats.persistence.size=300Mi'],
  // The user's own operator account: the chart creates none, its Roles are bound to this one.
  ownOperatorAccount: ['--set', 'serviceAccount.create=false', '--set', 'serviceAccount.name=pf-operator'],
};

export function renderText(release: string, namespace: string, args: string[]): string {
  return helm(['template', release, CHART, '--namespace', namespace, ...args]);
}

export function render(release: string, namespace: string, args: string[]): Doc[] {
  return parseAllDocuments(renderText(release, namespace, args))
    .map((d) => d.toJSON() as Doc | null)
    .filter((d): d is Doc => d !== null);
}

export function podSpecOf(doc: Doc): any | undefined {
  if (doc.kind === 'Pod') return doc.spec;
  return doc.spec?.template?.spec;
}

export const isHook = (doc: Doc, hook: string): boolean =>
  (doc.metadata.annotations?.['helm.sh/hook'] ?? '').split(',').includes(hook);

/**
 * Validates a document against the Kubernetes schemas of kubernetes-models (throws with the
 * schema error); 'unknown' for kinds it has no model of (our CRDs, the Prometheus operator's).
 */
export async function validateWithModels(doc: Doc): Promise<'validated' | 'unknown'> {
  const [group, version] = doc.apiVersion.includes('/') ? doc.apiVersion.split('/') : ['', doc.apiVersion];
  const modulePath = group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`;
  let mod: Record<string, any>;
  try {
    mod = await import(modulePath);
  } catch {
    return 'unknown';
  }
  const Model = mod[doc.kind];
  if (!Model) return 'unknown';
  new Model(doc).validate();
  return 'validated';
}
