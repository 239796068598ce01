/**
 * The chart secure by default, rendered by the real helm binary with every value set of the
 * release test: NetworkPolicies that let each pod reach exactly the services it is given a URL
 * of (and an allow-list reach the server), an own ServiceAccount with no token for every pod but
 * the operator, the operator's Role bound to its account only — checked on the documents and
 * against the strict fake API server with the real kubectl and each account's token — and the
 * PodDisruptionBudgets and pod scheduling values of each component.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeServer } from '../fake-k8s/server.js';
import { kubectl, type KubectlError } from '../helpers/kubectl.js';
import { ingressAllowed, selects, type PodRef } from './network-policy.js';
import { installManifests } from './release.js';
import { isHook, podSpecOf, render, validateWithModels, VALUE_SETS, type Doc } from './render.js';

const NS = 'pf-sec';
const REL = 'rel';
/** serviceAccount.create=false has no accounts of its own: its own test below. */
const { ownOperatorAccount: _own, ...CREATED } = VALUE_SETS;
const SECURITY_SETS: Record<string, string[]> = {
  ...CREATED,
  extraIngress: ['--set', 'networkPolicy.extraIngressFrom[0].namespaceSelector.matchLabels.team=ingress'],
};

/** The pods of a render that run in the release (hook Jobs included), by component label. */
function pods(docs: Doc[]): { doc: Doc; component: string; spec: any; ref: PodRef }[] {
  return docs.filter((d) => podSpecOf(d)).map((doc) => {
    const labels = doc.kind === 'Pod' ? doc.metadata.labels! : doc.spec.template.metadata.labels;
    const spec = podSpecOf(doc);
    return { doc, component: labels['app.kubernetes.io/component'], spec, ref: { namespace: NS, labels, ports: spec.containers.flatMap((c: any) => c.ports ?? []) } };
  });
}

/** The env names a pod's containers are given (values or references). */
const envNames = (spec: any): Set<string> => new Set(spec.containers.flatMap((c: any) => (c.env ?? []).map((e: any) => e.name)));

const accountOf = (docs: Doc[], name: string) => docs.find((d) => d.kind === 'ServiceAccount' && d.metadata.name === name);

describe('the chart secure by default', () => {
  for (const [name, args] of Object.entries(SECURITY_SETS)) {
    describe(`rendered with ${name}`, () => {
      const docs = render(REL, NS, args);
      const all = pods(docs);
      const byComponent = (c: string) => all.find((p) => p.component === c);

      it('renders schema-valid NetworkPolicies and ServiceAccounts', async () => {
        const policies = docs.filter((d) => d.kind === 'NetworkPolicy');
        const expected = ['rel-playflow-server'];
        if (byComponent('postgresql')) expected.push('rel-playflow-postgresql');
        if (byComponent('nats')) expected.push('rel-playflow-nats');
        expect(policies.map((d) => d.metadata.name).sort()).toEqual(expected.sort());
        const accounts = docs.filter((d) => d.kind === 'ServiceAccount');
        expect(accounts.length).toBeGreaterThanOrEqual(6);
        for (const doc of [...policies, ...accounts]) expect(await validateWithModels(doc), `${doc.kind}/${doc.metadata.name}`).toBe('validated');
      });

      it('lets each pod reach exactly the bundled services it is given the URL of', () => {
        // URL env → the component serving it and its port (from the rendered Services' pods).
        const targets: [string, string, number][] = [['SERVER_API_URL', 'server', 8082]];
        if (byComponent('postgresql')) targets.push(['DATABASE_URL', 'postgresql', 5432]);
        if (byComponent('nats')) targets.push(['BROKER_URL', 'nats', 4222]);
        const reach: string[] = [];
        for (const [env, component, port] of targets) {
          const to = byComponent(component)!;
          expect(to.spec.containers[0].ports.map((p: any) => p.containerPort)).toContain(port);
          for (const from of all) {
            if (from.component === component) continue;
            const allowed = ingressAllowed(docs, from.ref, to.ref, port, { defaultNamespace: NS });
            expect(allowed, `${from.component} → ${component}:${port}`).toBe(envNames(from.spec).has(env));
            if (allowed) reach.push(`${from.component}→${component}`);
          }
          // Any other pod of the namespace (a tenant's job, a compromised sidecar) is refused.
          const stranger: PodRef = { namespace: NS, labels: { app: 'something-else' } };
          expect(ingressAllowed(docs, stranger, to.ref, port, { defaultNamespace: NS }), `stranger → ${component}`).toBe(false);
        }
        const expected = ['worker→server', 'operator→server', 'test→server'];
        if (byComponent('postgresql')) expected.push('server→postgresql');
        if (byComponent('nats')) expected.push('server→nats', 'worker→nats');
        expect(reach.sort()).toEqual(expected.sort());
      });

      it('runs every pod as its own ServiceAccount with no token, but the operator', () => {
        const names = new Map<string, string>();
        for (const p of all) {
          const sa = p.spec.serviceAccountName;
          expect(sa, `${p.doc.kind}/${p.doc.metadata.name} names its account`).toBeTruthy();
          expect(sa, `${p.component} does not run as default`).not.toBe('default');
          expect(names.get(sa), `${sa} is shared by ${p.component} and ${names.get(sa)}`).toBeUndefined();
          names.set(sa, p.component);
          const account = accountOf(docs, sa);
          expect(account, `ServiceAccount ${sa} is rendered`).toBeDefined();
          if (p.component === 'operator') {
            expect(p.spec.automountServiceAccountToken).toBe(true);
          } else if (p.component === 'ensure-secrets') {
            // The pre-install hook creates Secrets: it needs its token (and its own Role, see the chart test).
            expect(isHook(p.doc, 'pre-install')).toBe(true);
          } else {
            expect(p.spec.automountServiceAccountToken, `${p.component} pod`).toBe(false);
            expect((account as any).automountServiceAccountToken, `${p.component} account`).toBe(false);
            expect(sa).toBe(`rel-playflow-${p.component}`);
          }
        }
        // The helm test pod's account is a test hook like the pod, created before it.
        const testSa = accountOf(docs, byComponent('test')!.spec.serviceAccountName)!;
        expect(isHook(testSa, 'test')).toBe(true);
        expect(Number(testSa.metadata.annotations!['helm.sh/hook-weight'])).toBeLessThan(Number(byComponent('test')!.doc.metadata.annotations!['helm.sh/hook-weight'] ?? 0));
        expect([...names.values()].sort()).toEqual(['ensure-secrets', 'operator', 'server', 'test', 'worker', ...(byComponent('nats') ? ['nats'] : []), ...(byComponent('postgresql') ? ['postgresql'] : [])].sort());
      });

      it('binds the operator\'s Roles to the operator\'s account only', () => {
        const operatorSa = byComponent('operator')!.spec.serviceAccountName;
        const bindings = docs.filter((d) => d.kind === 'RoleBinding' && d.roleRef.name.startsWith('rel-playflow-operator'));
        expect(bindings.length).toBeGreaterThanOrEqual(2); // a Role per watched namespace + the Lease's
        for (const b of bindings) expect(b.subjects, b.metadata.name).toEqual([{ kind: 'ServiceAccount', name: operatorSa, namespace: NS }]);
        expect(docs.filter((d) => d.kind === 'ClusterRoleBinding')).toEqual([]);
      });

      it('has a PodDisruptionBudget for the server, the operator, the workers and NATS, each selecting its own pods', () => {
        const pdbs = docs.filter((d) => d.kind === 'PodDisruptionBudget');
        const want = ['server', 'operator', 'worker', ...(byComponent('nats') ? ['nats'] : [])];
        expect(pdbs.map((d) => d.metadata.labels!['app.kubernetes.io/component']).sort()).toEqual(want.sort());
        for (const pdb of pdbs) {
          const component = pdb.metadata.labels!['app.kubernetes.io/component'];
          const covered = all.filter((p) => !isHook(p.doc, 'test') && !isHook(p.doc, 'pre-install') && selects(pdb.spec.selector, p.ref.labels));
          expect(covered.map((p) => p.component), pdb.metadata.name).toEqual([component]);
          // A budget that never allows an eviction blocks node drains forever.
          const blocks = pdb.spec.maxUnavailable === 0 || (pdb.spec.minAvailable !== undefined && Number(pdb.spec.minAvailable) >= Number(covered[0].doc.spec.replicas ?? 1));
          expect(blocks, `${pdb.metadata.name} lets a drain evict a pod`).toBe(false);
        }
      });
    });
  }

  it('admits the extraIngressFrom allow-list to the server only', () => {
    const docs = render(REL, NS, SECURITY_SETS.extraIngress);
    const server = pods(docs).find((p) => p.component === 'server')!;
    const pg = pods(docs).find((p) => p.component === 'postgresql')!;
    const ingress: PodRef = { namespace: 'ingress-nginx', labels: { app: 'controller' } };
    const nsLabels = { 'ingress-nginx': { team: 'ingress' } };
    expect(ingressAllowed(docs, ingress, server.ref, 8082, { defaultNamespace: NS, namespaceLabels: nsLabels })).toBe(true);
    expect(ingressAllowed(docs, ingress, server.ref, 8082, { defaultNamespace: NS })).toBe(false);
    expect(ingressAllowed(docs, ingress, pg.ref, 5432, { defaultNamespace: NS, namespaceLabels: nsLabels })).toBe(false);
    // Off: no policy at all.
    expect(render(REL, NS, ['--set', 'networkPolicy.enabled=false']).filter((d) => d.kind === 'NetworkPolicy')).toEqual([]);
  });

  it('with serviceAccount.create=false requires the operator\'s own account, never default or another pod\'s', () => {
    expect(() => render(REL, NS, ['--set', 'serviceAccount.create=false'])).toThrow(/serviceAccount.name is required when serviceAccount.create is false/);
    expect(() => render(REL, NS, ['--set', 'serviceAccount.create=false', '--set', 'serviceAccount.name=default'])).toThrow(/serviceAccount.name must not be "default"/);
    expect(() => render(REL, NS, ['--set', 'serviceAccount.name=rel-playflow-worker'])).toThrow(/is the worker's own ServiceAccount/);
    const docs = render(REL, NS, VALUE_SETS.ownOperatorAccount);
    // No account is created but the hooks' (ensure-secrets is a pre-install hook of its own).
    expect(docs.filter((d) => d.kind === 'ServiceAccount').map((d) => d.metadata.name)).toEqual(['rel-playflow-ensure-secrets']);
    for (const p of pods(docs)) {
      if (p.component === 'operator') expect(p.spec.serviceAccountName).toBe('pf-operator');
      else if (p.component !== 'ensure-secrets') expect([p.spec.serviceAccountName, p.spec.automountServiceAccountToken], p.component).toEqual(['default', false]);
    }
    for (const b of docs.filter((d) => d.kind === 'RoleBinding' && d.roleRef.name.startsWith('rel-playflow-operator'))) {
      expect(b.subjects).toEqual([{ kind: 'ServiceAccount', name: 'pf-operator', namespace: NS }]);
    }
  });

  it('renders PDB, labels, annotations, priority class and topology spread values on each component', () => {
    const set = (c: string) => [
      '--set', `${c}.podLabels.team=data`, '--set', `${c}.podLabels.app\\.kubernetes\\.io/component=hijack`,
      '--set', `${c}.podAnnotations.owner=ops`, '--set', `${c}.priorityClassName=pf-high`,
      '--set', `${c}.topologySpreadConstraints[0].maxSkew=1`, '--set', `${c}.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone`,
      '--set', `${c}.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway`,
    ];
    const components = ['server', 'worker', 'operator', 'nats', 'postgresql'];
    const docs = render(REL, NS, [...components.flatMap(set), '--set', 'worker.podDisruptionBudget.minAvailable=50%', '--set', 'nats.podDisruptionBudget.enabled=false', '--set', 'operator.replicas=3']);
    for (const c of components) {
      const p = pods(docs).find((x) => x.component === c)!;
      expect(p, c).toBeDefined();
      const meta = p.doc.spec.template.metadata;
      expect(meta.labels.team, c).toBe('data');
      expect(meta.labels['app.kubernetes.io/component'], `${c}: the chart's selector labels win`).toBe(c);
      expect(meta.annotations.owner, c).toBe('ops');
      expect(p.spec.priorityClassName, c).toBe('pf-high');
      const [tsc] = p.spec.topologySpreadConstraints;
      expect(tsc.topologyKey).toBe('topology.kubernetes.io/zone');
      expect(selects(tsc.labelSelector, meta.labels), `${c}: the spread counts its own pods`).toBe(true);
      expect(tsc.labelSelector.matchLabels['app.kubernetes.io/component']).toBe(c);
    }
    // The chart's own annotations stay beside the user's.
    expect(pods(docs).find((x) => x.component === 'server')!.doc.spec.template.metadata.annotations['prometheus.io/scrape']).toBe('true');
    const pdb = (c: string) => docs.find((d) => d.kind === 'PodDisruptionBudget' && d.metadata.name === `rel-playflow-${c}`);
    expect(pdb('worker')!.spec).toMatchObject({ minAvailable: '50%' });
    expect(pdb('worker')!.spec.maxUnavailable).toBeUndefined();
    expect(pdb('nats')).toBeUndefined();
    expect(docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'rel-playflow-operator')!.spec.replicas).toBe(3);
    expect(() => render(REL, NS, ['--set', 'worker.topologySpreadConstraints[0].maxSkew=1'])).toThrow(/topologyKey|whenUnsatisfiable|required/);
  });
});

describe('the operator\'s rendered RBAC in the strict fake API server, through kubectl', () => {
  for (const [label, args, operatorSa] of [
    ['own accounts (default)', [], 'rel-playflow-operator'],
    ['serviceAccount.create=false', VALUE_SETS.ownOperatorAccount, 'pf-operator'],
  ] as const) {
    describe(label, () => {
      const docs = render(REL, NS, [...args]);
      const rbac = docs.filter((d) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(d.kind) && !d.metadata.annotations?.['helm.sh/hook']);
      const kube = new FakeKubeServer({ crds: docs.filter((d) => d.kind === 'CustomResourceDefinition'), rbac, releaseNamespace: NS, namespaces: [NS] });
      const as = (sa: string) => kube.writeKubeconfig(kube.serviceAccountToken(NS, sa), NS);
      const others = [...new Set(pods(docs).filter((p) => !['operator', 'ensure-secrets'].includes(p.component)).map((p) => p.spec.serviceAccountName as string)), 'default'];

      beforeAll(async () => {
        await kube.start();
        installManifests(kube, docs, NS);
        kube.putObject('secrets', { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'team-cred', namespace: NS }, stringData: { password: 'p' } });
      });
      afterAll(async () => {
        await kube.stop();
      });

      it('lets the operator\'s account read Secrets, watch WorkerPools and scale the workers', async () => {
        const kc = as(operatorSa);
        expect((await kubectl(['get', 'secrets', '-o', 'name'], { kubeconfig: kc })).trim()).toContain('secret/team-cred');
        expect((await kubectl(['get', 'workerpools', '-o', 'name'], { kubeconfig: kc })).trim()).toBe('workerpool.playflow.io/rel-playflow-workers');
        await kubectl(['scale', 'statefulset/rel-playflow-worker', '--replicas=3'], { kubeconfig: kc });
        expect(kube.getObject('statefulsets', NS, 'rel-playflow-worker', 'apps')!.spec.replicas).toBe(3);
      });

      it('denies every other pod\'s account (and default) the operator\'s rights', async () => {
        expect(others).toContain('default');
        for (const sa of others) {
          const kc = as(sa);
          for (const cmd of [['get', 'secrets'], ['scale', 'statefulset/rel-playflow-worker', '--replicas=5']]) {
            const err = await kubectl(cmd, { kubeconfig: kc }).then(() => '', (e: KubectlError) => e.stderr);
            expect(err, `${sa}: kubectl ${cmd.join(' ')}`).toContain(`User "system:serviceaccount:${NS}:${sa}" cannot`);
          }
        }
        expect(kube.getObject('statefulsets', NS, 'rel-playflow-worker', 'apps')!.spec.replicas).not.toBe(5);
      });
    });
  }
});
