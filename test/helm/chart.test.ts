/**
 * The Helm chart, rendered by the real helm binary (DESIGN.md §6) with the default values and
 * other value sets, then checked document by document: Kubernetes schemas (kubernetes-models),
 * our custom resources against the CRDs in crds/, security and resource settings, and the
 * names the code actually reads (env variables, ports, probe paths).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helm } from '../helpers/helm.js';
import { crdValidator } from '../helpers/crd-validate.js';
import { renderCrds } from '../../scripts/gen-crds.js';

const root = path.resolve(import.meta.dirname, '..', '..');
const chart = path.join(root, 'helm', 'playflow');
const NAMESPACE = 'pf-test-ns';

type Doc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }; spec?: any; data?: any };

const valueSets: Record<string, string[]> = {
  defaults: [],
  externalDatabase: ['--set', 'postgresql.enabled=false', '--set', 'postgresql.external.existingSecret=pf-db'],
  externalNats: ['--set', 'nats.enabled=false', '--set', 'nats.external.existingSecret=pf-nats'],
  tokenOn: ['--set', 'apiToken.enabled=true', '--set', 'metrics.serviceMonitor.enabled=true', '--set', 'server.replicas=1'],
};

function render(args: string[]): Doc[] {
  const out = helm(['template', 'rel', chart, '--namespace', NAMESPACE, ...args]);
  return parseAllDocuments(out)
    .map((d) => d.toJSON() as Doc | null)
    .filter((d): d is Doc => d !== null);
}

function podSpecOf(doc: Doc): any | undefined {
  if (doc.kind === 'Pod') return doc.spec;
  return doc.spec?.template?.spec;
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

async function validateWithModels(doc: Doc): Promise<'validated' | 'unknown'> {
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
  new Model(doc).validate(); // throws with the schema error
  return 'validated';
}

const crds = Object.fromEntries(Object.values(renderCrds()).map((text) => {
  const doc = parseAllDocuments(text)[0].toJSON();
  return [doc.spec.names.kind as string, doc];
}));
const validateCustomResource = crdValidator((kind) => crds[kind].spec.versions[0].schema.openAPIV3Schema);

describe('helm chart', () => {
  it('ships the generated CRDs (helm installs them first and keeps them on uninstall)', () => {
    const dir = path.join(chart, 'crds');
    const files = renderCrds();
    expect(readdirSync(dir).sort()).toEqual(Object.keys(files).sort());
    for (const [file, text] of Object.entries(files)) {
      expect(readFileSync(path.join(dir, file), 'utf8'), `helm/playflow/crds/${file} is stale: npm run build && npm run crds`).toBe(text);
    }
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
          if (doc.metadata.namespace !== undefined) expect(doc.metadata.namespace).toBe(NAMESPACE);
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
    expect(names).toContain('Secret/rel-playflow-encryption');
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
    const secret = docs.find((d) => d.kind === 'Secret' && d.metadata.name === 'rel-playflow-api-token')!;
    expect(Buffer.from(secret.data.token, 'base64').toString()).toMatch(/^[A-Za-z0-9]{40}$/);
    for (const doc of docs) {
      const pod = podSpecOf(doc);
      if (!pod || doc.kind === 'StatefulSet' && /nats|postgresql/.test(doc.metadata.name)) continue;
      for (const c of pod.containers) {
        expect(c.env.map((e: any) => e.name), `${doc.metadata.name}`).toContain('PLAYFLOW_API_TOKEN');
      }
    }
  });

  it('generates a 32-byte encryption key and keeps it on uninstall', () => {
    const secret = render([]).find((d) => d.metadata.name === 'rel-playflow-encryption')!;
    expect(secret.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    const key = Buffer.from(Buffer.from(secret.data.key, 'base64').toString(), 'base64');
    expect(key.length).toBe(32);
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
