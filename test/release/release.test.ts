/**
 * The Helm release as a cluster would run it, without a cluster (release.ts, kubelet.ts), with
 * the default values: NATS from the rendered config, the server, worker and operator with their
 * rendered command/args/env and probes, the operator against the strict fake API server under
 * the rendered RBAC; then kubectl on the examples, the playbook through the API and the CLI,
 * printer columns, scaling, an upgrade, and `helm test`. Then the chart tests' other value sets,
 * each brought up the same way: every pod started with its rendered command/args/env and gated on
 * its rendered probes, the operator leading under the rendered RBAC with nothing denied, and the
 * helm test pod passing (it runs a playbook through server, NATS and worker); they differ from the
 * defaults in wiring only. One file, so the releases start one after another (two cores).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PortPool } from './kubelet.js';
import { bringUp, type Release } from './release.js';
import { VALUE_SETS } from './render.js';
import { applyExamples, helmTest, operatorDenials, operatorLeads, printerColumns, runThroughApi, runThroughCli, scaleAndUpgrade } from './scenarios.js';

describe('helm release with the default values, run without a cluster', () => {
  let rel: Release;
  beforeAll(async () => {
    rel = await bringUp(VALUE_SETS.defaults, { ports: new PortPool(31100, 31139), label: 'defaults' });
  }, 240_000);
  afterAll(async () => {
    await rel?.stop();
  }, 60_000);

  it('applies examples/k8s with kubectl into its namespace and waits for Ready', async () => {
    await applyExamples(rel);
  }, 120_000);

  it('runs the example playbook through the API and through the CLI', async () => {
    await runThroughApi(rel);
    await runThroughCli(rel);
  }, 120_000);

  it('shows the printer columns in kubectl get playbooks', async () => {
    await printerColumns(rel);
  }, 60_000);

  it('scales the workers with kubectl scale on the WorkerPool; an upgrade keeps the count and the secrets', async () => {
    await scaleAndUpgrade(rel, VALUE_SETS.defaults);
  }, 120_000);

  it('passes the helm test pod', async () => {
    expect(await helmTest(rel)).toMatch(/completed/);
  }, 120_000);

  it('never had an operator request denied by the rendered RBAC', async () => {
    await operatorLeads(rel);
    expect(rel.kube.requests.length).toBeGreaterThan(0);
    expect(operatorDenials(rel)).toEqual([]);
  });
});

const ports = new PortPool(31140, 31199);

describe('helm release with the chart tests\' value sets, run without a cluster', () => {
  for (const name of Object.keys(VALUE_SETS).filter((n) => n !== 'defaults')) {
    it(`${name}: starts, passes its probes and helm test, the operator leads and is never denied`, async () => {
      const rel = await bringUp(VALUE_SETS[name], { ports, label: name });
      try {
        await operatorLeads(rel);
        expect(await helmTest(rel)).toMatch(/completed/);
        if (name === 'anonymous') {
          expect(rel.apiToken, 'no token rendered').toBeUndefined();
          const res = await fetch(`${rel.serverUrl}/api/catalog/playbooks`);
          expect(res.status, 'the server serves without a token (PLAYFLOW_ALLOW_ANONYMOUS)').toBe(200);
        }
        if (name === 'tokenOn') {
          expect(rel.apiToken, 'the API token from the generated Secret').toMatch(/^[A-Za-z0-9]{40}$/);
          const res = await fetch(`${rel.serverUrl}/api/catalog/playbooks`);
          expect(res.status, 'the server requires the token').toBe(401);
        }
        expect(operatorDenials(rel)).toEqual([]);
      } finally {
        await rel.stop();
      }
    }, 240_000);
  }
});
