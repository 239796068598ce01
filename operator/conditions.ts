/**
 * Kubernetes-style status conditions (metav1.Condition): `lastTransitionTime` changes only when
 * `status` changes, so a reconciler that sets the same condition again writes nothing new.
 */
export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface ConditionInput {
  type: string;
  status: ConditionStatus;
  reason: string;
  message?: string;
}

/** Messages are capped like the API server's (32 KiB); we keep well under. */
const MAX_MESSAGE = 4000;

export function setCondition(
  conditions: Condition[] | undefined,
  input: ConditionInput,
  generation?: number,
  now: Date = new Date(),
): Condition[] {
  const list = [...(conditions ?? [])];
  const idx = list.findIndex((c) => c.type === input.type);
  const prev = idx >= 0 ? list[idx] : undefined;
  let message = input.message ?? '';
  if (message.length > MAX_MESSAGE) message = `${message.slice(0, MAX_MESSAGE - 1)}…`;
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message,
    lastTransitionTime: prev && prev.status === input.status ? prev.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z'),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  if (idx >= 0) list[idx] = next;
  else list.push(next);
  return list;
}

export function getCondition(conditions: Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isTrue(conditions: Condition[] | undefined, type: string): boolean {
  return getCondition(conditions, type)?.status === 'True';
}

export function removeCondition(conditions: Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}

/**
 * kstatus conventions (sigs.k8s.io/cli-utils, used by Flux and `kubectl wait`): a resource that
 * cannot make progress without someone changing it has `Stalled=True` with the terminal reason,
 * next to `Ready=False`; one that is still working (or waiting for the server) has no `Stalled`.
 * Argo CD reads the same conditions through examples/gitops/argocd-health.lua.
 */
export function withStalled(conditions: Condition[] | undefined, stalled: { reason: string; message: string } | undefined, generation?: number): Condition[] {
  if (!stalled) return removeCondition(conditions, 'Stalled');
  return setCondition(conditions, { type: 'Stalled', status: 'True', reason: stalled.reason, message: stalled.message }, generation);
}
