/**
 * The Helm chart, rendered by the real helm binary (DESIGN.md §6) with the default values and
 * other value sets, then checked document by document: Kubernetes schemas (kubernetes-models),
 * our custom resources against the CRDs in crds/, security and resource settings, and the
 * names the code actually reads (env variables, ports, probe paths).
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helm } from '../helpers/helm.js';
import { crdValidator } from '../helpers/crd-validate.js';
import { renderCrds } from '../../scripts/gen-crds.js';
import { operatorAccess, rbacAllows } from '../helpers/rendered-rbac.js';
import { podSpecOf, render as renderRelease, validateWithModels, VALUE_SETS, type Doc } from '../release/render.js';

const root = path.resolve(import.meta.dirname, '..', '..');
const chart = path.join(root, 'helm', 'playflow');
const NAMESPACE = 'pf-test-ns';


const valueSets = VALUE_SETS;
/** Namespaces a value set's own Roles may name besides the release namespace. */
const WATCHED_ELSEWHERE = ['team-a', 'team-b'];

function render(args: string[]): Doc[] {
  return renderRelease('rel', NAMESPACE, args);
}

/** All source files of the code, to check that a name the chart sets is read somewhere. */
function codeText(): string {
  const dirs = ['server', 'worker', 'operator', 'cli', 'client'];
  const parts: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = path.join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.ts') && !p.endsWith('.test.ts')) parts.push(readFileSync(p, 'utf8'));
    }
  };
  for (const d of dirs) walk(path.join(root, d));
  return parts.join('\n');
}

const crds = Object.fromEntries(Object.values(renderCrds()).map((text) => {
  const doc = parseAllDocuments(text)[0].toJSON();
  return [doc.spec.names.kind as string, doc];
}));
const validateCustomResource = crdValidator((kind) => crds[kind].spec.versions[0].schema.openAPIV3Schema);

describe('helm chart', () => {
  it('ships copies of the generated CRDs (files/crds = crds/ = scripts/gen-crds.ts)', () => {
    const dir = path.join(chart, 'files', 'crds');
    const files = renderCrds();
    expect(readdirSync(dir).sort()).toEqual(Object.keys(files).sort());
    for (const [file, text] of Object.entries(files)) {
      expect(readFileSync(path.join(dir, file), 'utf8'), `helm/playflow/files/crds/${file} is stale: npm run build && npm run crds`).toBe(text);
      expect(readFileSync(path.join(root, 'crds', file), 'utf8'), `crds/${file} is stale: npm run build && npm run crds`).toBe(text);
    }
    // Helm's crds/ folder is installed once and never upgraded: the chart must not use it.
    expect(() => statSync(path.join(chart, 'crds'))).toThrow();
  });

  it('templates the CRDs so that upgrades apply them (crds.enabled, crds.keep)', () => {
    const generated = Object.values(renderCrds()).map((text) => parseAllDocuments(text)[0].toJSON());
    const strip = (crd: any) => ({ ...crd, metadata: { name: crd.metadata.name } });
    for (const args of [[], ['--is-upgrade']]) {
      const rendered = render(args).filter((d) => d.kind === 'CustomResourceDefinition');
      expect(rendered.map(strip)).toEqual(generated.map(strip).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)));
      for (const crd of rendered) {
        expect(crd.metadata.annotations?.['helm.sh/resource-policy'], crd.metadata.name).toBe('keep');
        expect(crd.metadata.namespace).toBeUndefined();
      }
    }
    const unkept = render(['--set', 'crds.keep=false']).filter((d) => d.kind === 'CustomResourceDefinition');
    expect(unkept.length).toBe(generated.length);
    for (const crd of unkept) expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBeUndefined();
    expect(render(['--set', 'crds.enabled=false']).filter((d) => d.kind === 'CustomResourceDefinition')).toEqual([]);
  });

  it('leaves the worker count to the WorkerPool: no replicas on the StatefulSet, on install and upgrade', () => {
    const worker = (args: string[]) => render(args).find((d) => d.kind === 'StatefulSet' && d.metadata.name === 'rel-playflow-worker')!;
    expect(worker([]).spec).not.toHaveProperty('replicas');
    expect(worker(['--is-upgrade', '--set', 'worker.replicas=5']).spec).not.toHaveProperty('replicas');
    // Without a WorkerPool (or without the operator) worker.replicas is the count.
    expect(worker(['--set', 'worker.pool.enabled=false', '--set', 'worker.replicas=5']).spec.replicas).toBe(5);
    expect(worker(['--set', 'operator.enabled=false', '--set', 'worker.replicas=3']).spec.replicas).toBe(3);
  });

  it('passes helm lint --strict with every value set', () => {
    for (const args of Object.values(valueSets)) {
      const out = helm(['lint', '--strict', chart, ...args]);
      expect(out).toContain('0 chart(s) failed');
    }
  });

  it('rejects values that break the schema', () => {
    expect(() => helm(['template', 'rel', chart, '--set', 'worker.concurrency=0'])).toThrow(/concurrency/);
    expect(() => helm(['template', 'rel', chart, '--set', 'server.unknownKey=1'])).toThrow(/unknownKey|additional/i);
  });

  it('requires the external secret when the bundled database or NATS is off', () => {
    expect(() => helm(['template', 'rel', chart, '--set', 'postgresql.enabled=false'])).toThrow(/postgresql.external.existingSecret/);
    expect(() => helm(['template', 'rel', chart, '--set', 'nats.enabled=false'])).toThrow(/nats.external.existingSecret/);
  });

  for (const [name, args] of Object.entries(valueSets)) {
    describe(`rendered with ${name}`, () => {
      const docs = render(args);

      it('renders a NATS configuration nats-server accepts (nats-server -t)', () => {
        const cm = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'rel-playflow-nats');
        if (!cm) {
          expect(args).toContain('nats.enabled=false');
          return;
        }
        const dir = mkdtempSync(path.join(tmpdir(), 'pf-nats-conf-'));
        try {
          const file = path.join(dir, 'nats.conf');
          writeFileSync(file, cm.data!['nats.conf']);
          // -t parses and checks the file without starting (store_dir is not touched).
          const out = execFileSync('/usr/sbin/nats-server', ['-t', '-c', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
          expect(out + '').not.toMatch(/error/i);
        } catch (err) {
          throw new Error(`nats-server rejects the rendered nats.conf:\n${cm.data!['nats.conf']}\n${(err as { stderr?: string }).stderr ?? err}`, { cause: err });
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });

      it('lets the operator make every API call it makes, and take the Lease in its own namespace', () => {
        const op = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'rel-playflow-operator')!;
        const pod = podSpecOf(op);
        const env = Object.fromEntries(pod.containers[0].env.filter((e: any) => 'value' in e).map((e: any) => [e.name, e.value]));
        const watched = String(env.WATCH_NAMESPACES).split(',');
        expect(watched, 'the chart\'s WorkerPool lives in the release namespace').toContain(NAMESPACE);
        const sa = { name: pod.serviceAccountName, namespace: NAMESPACE };
        const denied: string[] = [];
        for (const a of operatorAccess({ watched, leaseNamespace: NAMESPACE })) {
          if (!rbacAllows(docs, sa, a)) denied.push(`${a.verb} ${a.group || 'core'}/${a.resource} in ${a.namespace}`);
        }
        expect(denied).toEqual([]);
      });

      it('validates every document against the Kubernetes schemas', async () => {
        const unknown: string[] = [];
        for (const doc of docs) {
          const r = await validateWithModels(doc);
          if (r === 'unknown') unknown.push(`${doc.apiVersion}/${doc.kind}`);
        }
        // Only our own kinds and the Prometheus operator's may be outside kubernetes-models.
        for (const k of unknown) expect(k).toMatch(/^(playflow\.io\/v1alpha1|monitoring\.coreos\.com\/v1)\//);
      });

      it('validates our custom resources against the CRDs', () => {
        const ours = docs.filter((d) => d.apiVersion === 'playflow.io/v1alpha1');
        expect(ours.map((d) => d.kind)).toEqual(['WorkerPool']);
        for (const doc of ours) expect(validateCustomResource(doc.kind, doc), doc.metadata.name).toEqual([]);
        const pool = ours[0];
        expect(docs.find((d) => d.kind === 'StatefulSet' && d.metadata.name === pool.spec.statefulSetName), 'the WorkerPool targets the worker StatefulSet').toBeDefined();
      });

      it('hard-codes no namespace', () => {
        for (const doc of docs) {
          if (doc.metadata.namespace === undefined || doc.metadata.namespace === NAMESPACE) continue;
          // Only the operator's Roles and RoleBindings go to the namespaces it is told to watch.
          expect(['Role', 'RoleBinding'], `${doc.kind}/${doc.metadata.name}`).toContain(doc.kind);
          expect(WATCHED_ELSEWHERE).toContain(doc.metadata.namespace);
        }
      });

      it('sets resources and a non-root security context on every container', () => {
        for (const doc of docs) {
          const pod = podSpecOf(doc);
          if (!pod) continue;
          for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
            const where = `${doc.kind}/${doc.metadata.name}/${c.name}`;
            expect(c.resources?.requests, where).toBeTruthy();
            expect(c.resources?.limits?.memory, where).toBeTruthy();
            const nonRoot = c.securityContext?.runAsNonRoot ?? pod.securityContext?.runAsNonRoot;
            expect(nonRoot, where).toBe(true);
            expect(c.securityContext?.allowPrivilegeEscalation, where).toBe(false);
            expect(c.securityContext?.capabilities?.drop, where).toContain('ALL');
          }
        }
      });

      it('labels everything with app.kubernetes.io/*', () => {
        for (const doc of docs) {
          expect(doc.metadata.labels?.['app.kubernetes.io/name'], doc.kind).toBe('playflow');
          expect(doc.metadata.labels?.['app.kubernetes.io/instance'], doc.kind).toBe('rel');
          expect(doc.metadata.labels?.['app.kubernetes.io/managed-by'], doc.kind).toBe('Helm');
        }
      });
    });
  }

  it('contains the server, worker StatefulSet, operator, NATS and PostgreSQL with the defaults', () => {
    const docs = render([]);
    const names = docs.map((d) => `${d.kind}/${d.metadata.name}`);
    expect(names).toContain('Deployment/rel-playflow-server');
    expect(names).toContain('Service/rel-playflow-server');
    expect(names).toContain('PodDisruptionBudget/rel-playflow-server');
    expect(names).toContain('StatefulSet/rel-playflow-worker');
    expect(names).toContain('Deployment/rel-playflow-operator');
    expect(names).toContain('StatefulSet/rel-playflow-nats');
    expect(names).toContain('StatefulSet/rel-playflow-postgresql');
    expect(names).toContain('Role/rel-playflow-operator');
    expect(names).toContain('Job/rel-playflow-ensure-secrets');
    expect(names.some((n) => n.startsWith('Pod/') )).toBe(true); // the helm test hook
  });

  it('leaves out the bundled database and NATS when external ones are used', () => {
    const db = render(valueSets.externalDatabase);
    expect(db.find((d) => d.metadata.name === 'rel-playflow-postgresql')).toBeUndefined();
    const server = db.find((d) => d.kind === 'Deployment' && d.metadata.name === 'rel-playflow-server')!;
    const env = server.spec.template.spec.containers[0].env;
    expect(env.find((e: any) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef).toEqual({ name: 'pf-db', key: 'url' });

    const nats = render(valueSets.externalNats);
    expect(nats.find((d) => d.metadata.name === 'rel-playflow-nats')).toBeUndefined();
    const worker = nats.find((d) => d.kind === 'StatefulSet' && d.metadata.name === 'rel-playflow-worker')!;
    const wenv = worker.spec.template.spec.containers[0].env;
    expect(wenv.find((e: any) => e.name === 'BROKER_URL').valueFrom.secretKeyRef).toEqual({ name: 'pf-nats', key: 'url' });
  });

  it('switches eager dispatch on the workers with worker.eagerDispatch', () => {
    const eager = (args: string[]) => {
      const worker = render(args).find((d) => d.kind === 'StatefulSet' && d.metadata.name === 'rel-playflow-worker')!;
      return worker.spec.template.spec.containers[0].env.find((e: any) => e.name === 'WORKER_EAGER_DISPATCH')?.value;
    };
    expect(eager([])).toBe('on');
    expect(eager(['--set', 'worker.eagerDispatch=false'])).toBe('off');
  });

  it('passes the API token to every process when it is on', () => {
    const docs = render(valueSets.tokenOn);
    for (const doc of docs) {
      const pod = podSpecOf(doc);
      if (!pod || doc.kind === 'Job' || doc.kind === 'StatefulSet' && /nats|postgresql/.test(doc.metadata.name)) continue;
      for (const c of pod.containers) {
        const token = c.env.find((e: any) => e.name === 'PLAYFLOW_API_TOKEN');
        expect(token?.valueFrom?.secretKeyRef, `${doc.metadata.name}`).toEqual({ name: 'rel-playflow-api-token', key: 'token' });
      }
    }
    // A token given as a value is rendered as is; a generated one comes from the hook Job.
    const given = render([...valueSets.tokenOn, '--set', 'apiToken.value=abc']).find((d) => d.kind === 'Secret' && d.metadata.name === 'rel-playflow-api-token')!;
    expect(Buffer.from(given.data!.token, 'base64').toString()).toBe('abc');
  });

  it('requires the token by default; anonymous only when asked, and the SQL endpoint never anonymous', () => {
    const serverEnv = (args: string[]) => {
      const server = render(args).find((d) => d.kind === 'Deployment' && d.metadata.name === 'rel-playflow-server')!;
      return Object.fromEntries(podSpecOf(server).containers[0].env.map((e: any) => [e.name, e.value ?? e.valueFrom]));
    };
    const defaults = serverEnv([]);
    expect(defaults.PLAYFLOW_API_TOKEN).toEqual({ secretKeyRef: { name: 'rel-playflow-api-token', key: 'token' } });
    expect(defaults.PLAYFLOW_ALLOW_ANONYMOUS).toBeUndefined();
    expect(defaults.PLAYFLOW_SQL_API).toBeUndefined(); // the server's default: off
    const anonymous = serverEnv(valueSets.anonymous);
    expect(anonymous.PLAYFLOW_API_TOKEN).toBeUndefined();
    expect(anonymous.PLAYFLOW_ALLOW_ANONYMOUS).toBe('true');
    expect(serverEnv(['--set', 'server.sqlApi=true']).PLAYFLOW_SQL_API).toBe('on');
    expect(() => render([...valueSets.anonymous, '--set', 'server.sqlApi=true'])).toThrow(/server.sqlApi needs apiToken.enabled/);
  });

  it('generates the encryption key, the database password and the token in a hook Job, not in templates', () => {
    const docs = render(valueSets.tokenOn);
    expect(docs.filter((d) => d.kind === 'Secret').map((d) => d.metadata.name)).toEqual([]);
    const job = docs.find((d) => d.kind === 'Job')!;
    expect(job.metadata.annotations?.['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    const args = podSpecOf(job).containers[0].args;
    expect(args.slice(0, 4)).toEqual(['operator', 'ensure-secrets', '--namespace', NAMESPACE]);
    const spec = JSON.parse(args[5]);
    expect(spec.find((s: any) => s.name === 'rel-playflow-encryption').keys).toEqual({ key: { random: 'base64', bytes: 32 } });
    expect(spec.find((s: any) => s.name === 'rel-playflow-api-token').keys).toEqual({ token: { random: 'alphanumeric', length: 40 } });
    // Its ServiceAccount may create Secrets and read/patch only these.
    const sa = { name: podSpecOf(job).serviceAccountName, namespace: NAMESPACE };
    expect(rbacAllows(docs, sa, { namespace: NAMESPACE, group: '', resource: 'secrets', verb: 'create' })).toBe(true);
    const role = docs.find((d) => d.kind === 'Role' && d.metadata.name === sa.name)!;
    expect(role.rules!.find((r: any) => r.verbs.includes('get')).resourceNames.sort()).toEqual(spec.map((s: any) => s.name).sort());
    // Nothing to generate when every secret is the user's: no Job.
    const none = render(['--set', 'encryption.existingSecret=k', '--set', 'apiToken.existingSecret=t', ...valueSets.externalDatabase]);
    expect(none.find((d) => d.kind === 'Job')).toBeUndefined();
  });

  it('gives each release its own operator Lease; release "playflow" keeps the name the operator defaults to', () => {
    const leaseName = (release: string) => {
      const op = renderRelease(release, NAMESPACE, []).find((d) => d.kind === 'Deployment' && d.metadata.name.endsWith('-operator'))!;
      return podSpecOf(op).containers[0].env.find((e: any) => e.name === 'OPERATOR_LEASE_NAME')?.value;
    };
    // Two releases in one namespace shared one Lease: one operator led both, the other release's never synced.
    expect(leaseName('a')).toBe('a-playflow-operator');
    expect(leaseName('b')).toBe('b-playflow-operator');
    // An upgrade of the usual release name keeps the Lease its running operator holds.
    expect(leaseName('playflow')).toBe('playflow-operator');
    expect(readFileSync(path.join(root, 'operator', 'main.ts'), 'utf8')).toContain("env.OPERATOR_LEASE_NAME || 'playflow-operator'");
  });

  it('lets the ServiceMonitor scrape the server, the workers and the operator', () => {
    const docs = render(valueSets.tokenOn);
    const monitor = docs.find((d) => d.kind === 'ServiceMonitor')!;
    const matches = (labels: Record<string, string> | undefined, selector: Record<string, string>) =>
      Object.entries(selector).every(([k, v]) => labels?.[k] === v);
    const services = docs.filter((d) => d.kind === 'Service' && matches(d.metadata.labels, monitor.spec.selector.matchLabels));
    for (const component of ['server', 'worker', 'operator']) {
      const workload = docs.find((d) => podSpecOf(d) && d.metadata.labels?.['app.kubernetes.io/component'] === component && d.kind !== 'Job' && d.kind !== 'Pod')!;
      const podLabels = workload.spec.template.metadata.labels;
      const containerPorts = new Set(podSpecOf(workload).containers[0].ports.map((p: any) => p.name));
      // A Service the monitor selects, in front of this component's pods, with a port the monitor scrapes.
      const scraped = services.filter((svc) => matches(podLabels, svc.spec.selector)).flatMap((svc) =>
        svc.spec.ports.filter((p: any) => monitor.spec.endpoints.some((e: any) => e.port === p.name) && containerPorts.has(p.targetPort)));
      expect(scraped.length, `${component}: no Service the ServiceMonitor selects exposes its metrics`).toBeGreaterThan(0);
    }
  });

  it('uses env variables, ports and probe paths the code reads', () => {
    const code = codeText();
    const docs = render(valueSets.tokenOn);
    const ours = docs.filter((d) => podSpecOf(d) && (d.metadata.labels?.['app.kubernetes.io/component'] ?? '').match(/^(server|worker|operator)$/));
    expect(ours.length).toBe(3);
    for (const doc of ours) {
      const c = podSpecOf(doc).containers[0];
      expect(c.image).toBe('ghcr.io/playflow/playflow:0.1.0');
      for (const e of c.env) {
        if (['POD_NAME', 'POD_NAMESPACE'].includes(e.name) && doc.metadata.name.endsWith('operator')) {
          expect(code.includes(e.name), `operator reads ${e.name}`).toBe(true);
          continue;
        }
        expect(code.includes(e.name), `${doc.metadata.name} sets ${e.name}, which no code reads`).toBe(true);
      }
      const portNames = Object.fromEntries(c.ports.map((p: any) => [p.name, p.containerPort]));
      for (const probe of [c.readinessProbe, c.livenessProbe]) {
        const port = portNames[probe.httpGet.port];
        expect(port, `${doc.metadata.name} probe port`).toBeTruthy();
        expect(code.includes(`'${probe.httpGet.path}'`), `${doc.metadata.name} probes ${probe.httpGet.path}, which no route serves`).toBe(true);
      }
    }
    const server = ours.find((d) => d.metadata.name.endsWith('server'))!;
    const sc = podSpecOf(server).containers[0];
    expect(sc.args).toEqual(['server', 'start']);
    expect(sc.env.find((e: any) => e.name === 'PORT').value).toBe(String(sc.ports[0].containerPort));
    expect(sc.ports[0].containerPort).toBe(8082);
    const worker = ours.find((d) => d.metadata.name.endsWith('worker'))!;
    expect(podSpecOf(worker).containers[0].args.slice(0, 3)).toEqual(['worker', 'start', '--v2']);
  });
});
