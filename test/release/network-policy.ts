/**
 * NetworkPolicy ingress semantics over rendered documents, the way a CNI that enforces them
 * decides (networking.k8s.io/v1): a pod selected by no policy with Ingress accepts everything; a
 * selected pod accepts a connection when one of its policies has a rule whose `from` (empty: any
 * source) matches the source pod and whose `ports` (empty: any) match the destination port. A
 * peer with only podSelector means pods of the policy's namespace; with a namespaceSelector, pods
 * of the matching namespaces (every namespace carries `kubernetes.io/metadata.name`). ipBlock
 * peers never match a pod here (they are for addresses outside the cluster).
 */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }[];
}

export interface PodRef {
  namespace: string;
  labels: Record<string, string>;
  /** The destination's container ports, to resolve a named port of a policy. */
  ports?: { name?: string; containerPort: number; protocol?: string }[];
}

interface Peer { podSelector?: LabelSelector; namespaceSelector?: LabelSelector; ipBlock?: unknown }
interface Policy {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: { podSelector: LabelSelector; policyTypes?: string[]; ingress?: { from?: Peer[]; ports?: { port?: number | string; protocol?: string }[] }[] };
}

export function selects(sel: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!sel) return false;
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    if (e.operator === 'In' && !(has && e.values!.includes(labels[e.key]))) return false;
    if (e.operator === 'NotIn' && has && e.values!.includes(labels[e.key])) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

const namespaceLabels = (ns: string, extra: Record<string, Record<string, string>>) => ({ 'kubernetes.io/metadata.name': ns, ...(extra[ns] ?? {}) });

function peerMatches(peer: Peer, policyNs: string, from: PodRef, nsLabels: Record<string, Record<string, string>>): boolean {
  if (peer.ipBlock) return false;
  if (peer.namespaceSelector) {
    if (!selects(peer.namespaceSelector, namespaceLabels(from.namespace, nsLabels))) return false;
  } else if (from.namespace !== policyNs) {
    return false;
  }
  return peer.podSelector ? selects(peer.podSelector, from.labels) : true;
}

/** Whether `from` may open a TCP connection to `to` on `port` under the policies in `docs`. */
export function ingressAllowed(
  docs: { kind: string }[], from: PodRef, to: PodRef, port: number,
  o: { defaultNamespace: string; namespaceLabels?: Record<string, Record<string, string>> },
): boolean {
  const policies = (docs as Policy[]).filter((d) => d.kind === 'NetworkPolicy');
  const nsOf = (p: Policy) => p.metadata.namespace ?? o.defaultNamespace;
  const selecting = policies.filter((p) => nsOf(p) === to.namespace && selects(p.spec.podSelector, to.labels)
    && (p.spec.policyTypes ?? ['Ingress']).includes('Ingress'));
  if (selecting.length === 0) return true;
  const portMatches = (p: { port?: number | string; protocol?: string }) => {
    if ((p.protocol ?? 'TCP') !== 'TCP') return false;
    if (p.port === undefined) return true;
    if (typeof p.port === 'number') return p.port === port;
    return (to.ports ?? []).some((cp) => cp.name === p.port && cp.containerPort === port);
  };
  return selecting.some((p) => (p.spec.ingress ?? []).some((rule) =>
    (!rule.ports?.length || rule.ports.some(portMatches))
    && (!rule.from?.length || rule.from.some((peer) => peerMatches(peer, nsOf(p), from, o.namespaceLabels ?? {})))));
}
