/**
 * The chart's WorkerPool, rendered by the real helm binary: its target per replica is the worker
 * concurrency unless set, and the scaling values (tolerance, fallback threshold, HPA-style rate
 * policies) render into a resource the generated CRD accepts.
 */
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { renderCrds } from '../../scripts/gen-crds.js';
import { crdValidator } from '../helpers/crd-validate.js';
import { render } from './render.js';

const crd = Object.values(renderCrds()).map((t) => parseAllDocuments(t)[0].toJSON()).find((d) => d.spec.names.kind === 'WorkerPool');
const validate = crdValidator(() => crd.spec.versions[0].schema.openAPIV3Schema);
const pool = (args: string[]) => render('rel', 'ns', args).find((d) => d.kind === 'WorkerPool')!;
const concurrency = (args: string[]) => {
  const sts = render('rel', 'ns', args).find((d) => d.kind === 'StatefulSet' && d.metadata.name === 'rel-playflow-worker')!;
  return Number(sts.spec.template.spec.containers[0].env.find((e: any) => e.name === 'WORKER_CONCURRENCY').value);
};

describe('the chart\'s WorkerPool', () => {
  it('sizes a worker for its concurrency unless targetQueueDepthPerReplica is set', () => {
    expect(pool([]).spec.targetQueueDepthPerReplica).toBe(concurrency([]));
    expect(pool([]).spec.targetQueueDepthPerReplica).toBe(8);
    expect(pool(['--set', 'worker.concurrency=16']).spec.targetQueueDepthPerReplica).toBe(16);
    expect(pool(['--set', 'worker.concurrency=16', '--set', 'worker.pool.targetQueueDepthPerReplica=40']).spec.targetQueueDepthPerReplica).toBe(40);
  });

  it('renders tolerance, the fallback threshold and rate policies the CRD accepts', () => {
    const defaults = pool([]);
    expect(defaults.spec).toMatchObject({ tolerance: 0.1, fallbackFailureThreshold: 3 });
    expect(defaults.spec).not.toHaveProperty('fallbackReplicas');
    expect(defaults.spec).not.toHaveProperty('scaleUp');
    expect(validate('WorkerPool', defaults)).toEqual([]);
    const tuned = pool([
      '--set', 'worker.pool.fallbackReplicas=0', '--set', 'worker.pool.fallbackFailureThreshold=5', '--set', 'worker.pool.tolerance=0',
      '--set', 'worker.pool.scaleUp.policies[0].type=Percent', '--set', 'worker.pool.scaleUp.policies[0].value=100', '--set', 'worker.pool.scaleUp.policies[0].periodSeconds=15',
      '--set', 'worker.pool.scaleDown.selectPolicy=Disabled',
    ]);
    expect(tuned.spec).toMatchObject({
      fallbackReplicas: 0, fallbackFailureThreshold: 5, tolerance: 0,
      scaleUp: { policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }] }, scaleDown: { selectPolicy: 'Disabled' },
    });
    expect(validate('WorkerPool', tuned)).toEqual([]);
    // The CRD refuses what the operator could not apply.
    expect(validate('WorkerPool', { ...tuned, spec: { ...tuned.spec, scaleUp: { policies: [{ type: 'Pods', value: 0, periodSeconds: 15 }] } } })).not.toEqual([]);
    expect(() => render('rel', 'ns', ['--set', 'worker.pool.scaleUp.policies[0].type=Nodes', '--set', 'worker.pool.scaleUp.policies[0].value=1', '--set', 'worker.pool.scaleUp.policies[0].periodSeconds=15'])).toThrow(/Pods|Percent|enum|must be one of/i);
  });
});
