/**
 * The CRDs in crds/: checked in and up to date with scripts/gen-crds.ts (which derives the
 * Playbook schema from playbook/schema.ts), structural as Kubernetes requires, and accepting every
 * example custom resource in examples/k8s/ (the fake API server's schema code: openAPIV3Schema,
 * CEL rules, and the unknown-field check the API server's strict field validation does).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse } from 'yaml';
import { renderCrds, repoRoot, toStructural } from '../../scripts/gen-crds.js';
import { crdValidator } from '../helpers/crd-validate.js';
import { playbookDocument, playbookYaml } from '../../operator/controllers/playbook.js';
import { parsePlaybook } from '../../playbook/index.js';

const root = repoRoot();
const crdFiles = renderCrds();
const crds = Object.fromEntries(Object.values(crdFiles).map((text) => {
  const doc = parse(text);
  return [doc.spec.names.kind as string, doc];
}));

function schemaOf(kind: string): any {
  return crds[kind].spec.versions[0].schema.openAPIV3Schema;
}

/** Structural-schema rules of apiextensions.k8s.io/v1 (the ones a generator can get wrong). */
function structuralProblems(s: any, path = ''): string[] {
  const out: string[] = [];
  for (const k of ['$ref', 'oneOf', 'anyOf', 'allOf', 'not', 'if', 'then', 'else', 'const', '$schema', '$id', 'definitions']) {
    if (k in s) out.push(`${path}: forbidden keyword ${k}`);
  }
  if (s.additionalProperties === false) out.push(`${path}: additionalProperties: false`);
  if (s.additionalProperties !== undefined && s.properties) out.push(`${path}: properties and additionalProperties together`);
  if (Array.isArray(s.type)) out.push(`${path}: type must be a single string`);
  if (!s.type && !s['x-kubernetes-preserve-unknown-fields'] && !s['x-kubernetes-int-or-string']) out.push(`${path}: no type`);
  if (s.uniqueItems === true) out.push(`${path}: uniqueItems`);
  if (s.type === 'array' && !s.items) out.push(`${path}: array without items`);
  for (const [k, v] of Object.entries(s.properties ?? {})) out.push(...structuralProblems(v, `${path}.${k}`));
  if (s.items) out.push(...structuralProblems(s.items, `${path}[]`));
  if (s.additionalProperties && typeof s.additionalProperties === 'object') out.push(...structuralProblems(s.additionalProperties, `${path}{}`));
  return out;
}

describe('CRDs', () => {
  it('checked-in files match the generator (run `npm run build && npm run crds` after changing the language schema)', () => {
    const onDisk = readdirSync(join(root, 'crds')).filter((f) => f.endsWith('.yaml')).sort();
    expect(onDisk).toEqual(Object.keys(crdFiles).sort());
    for (const [file, text] of Object.entries(crdFiles)) {
      expect(readFileSync(join(root, 'crds', file), 'utf8'), `crds/${file} is stale`).toBe(text);
    }
  });

  it('are structural, namespaced, with status subresources, short names, categories and printer columns', () => {
    for (const kind of ['Playbook', 'Credential', 'WorkerPool']) {
      const c = crds[kind];
      expect(c.spec.group).toBe('playflow.io');
      expect(c.spec.scope).toBe('Namespaced');
      expect(c.spec.names.categories).toEqual(['playflow']);
      expect(c.spec.versions.map((v: any) => v.name)).toEqual(['v1alpha1']);
      expect(c.spec.versions[0].subresources.status).toEqual({});
      expect(structuralProblems(schemaOf(kind).properties.spec, 'spec')).toEqual([]);
      expect(structuralProblems(schemaOf(kind).properties.status, 'status')).toEqual([]);
    }
    const cols = (kind: string) => crds[kind].spec.versions[0].additionalPrinterColumns.filter((c: any) => !c.priority).map((c: any) => c.name);
    expect(cols('Playbook')).toEqual(['Ready', 'Path', 'Version', 'Age']);
    expect(cols('Credential')).toEqual(['Ready', 'Type', 'Age']);
    expect(cols('WorkerPool')).toEqual(['Replicas', 'Desired', 'Queue', 'Age']);
    expect(crds.Playbook.spec.names.shortNames).toContain('pb');
    expect(crds.Credential.spec.names.shortNames).toContain('pfcred');
    expect(crds.WorkerPool.spec.names.shortNames).toContain('wp');
    expect(crds.WorkerPool.spec.versions[0].subresources.scale).toEqual({
      specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector',
    });
    const rules = (kind: string, at: any = schemaOf(kind).properties.spec) => (at['x-kubernetes-validations'] ?? []).map((r: any) => r.rule);
    expect(rules('Playbook').join(' ')).toContain('exists_one(t, t.step == s.step)');
    expect(rules('WorkerPool')).toContain('!has(self.minReplicas) || self.minReplicas <= self.maxReplicas');
    // CEL cost: every list a rule iterates is bounded
    expect(schemaOf('Playbook').properties.spec.properties.workflow.maxItems).toBeLessThanOrEqual(256);
    expect(schemaOf('Playbook').properties.spec.properties.workflow.items.properties.step.maxLength).toBeLessThanOrEqual(253);
  });

  it('CEL rules only reference typed fields (CEL cannot see preserve-unknown fields; such a rule would make the CRD fail to install)', () => {
    const MACROS = new Set(['all', 'exists', 'exists_one', 'map', 'filter', 'size', 'matches', 'startsWith', 'endsWith', 'contains']);
    /** field name → typed? for every property under a node */
    const typedFields = (node: any, out = new Map<string, boolean>()): Map<string, boolean> => {
      for (const [k, v] of Object.entries<any>(node.properties ?? {})) {
        out.set(k, (out.get(k) ?? false) || Boolean(v.type || v['x-kubernetes-int-or-string']));
        typedFields(v, out);
      }
      if (node.items) typedFields(node.items, out);
      return out;
    };
    const withRules: Array<[string, any]> = [];
    const walk = (node: any, path: string) => {
      if (node['x-kubernetes-validations']) withRules.push([path, node]);
      for (const [k, v] of Object.entries<any>(node.properties ?? {})) walk(v, `${path}.${k}`);
      if (node.items) walk(node.items, `${path}[]`);
    };
    for (const kind of ['Playbook', 'Credential', 'WorkerPool']) walk(schemaOf(kind), kind);
    expect(withRules.length).toBe(4);
    for (const [path, node] of withRules) {
      const fields = typedFields(node);
      for (const { rule } of node['x-kubernetes-validations']) {
        for (const m of String(rule).matchAll(/\.([A-Za-z_][A-Za-z0-9_]*)/g)) {
          const name = m[1]!;
          if (MACROS.has(name)) continue;
          expect(fields.get(name), `${path}: rule ${rule} uses ${name}`).toBe(true);
        }
      }
    }
  });

  it('derive the Playbook spec from the language schema: free-form parts preserved, unions untyped', () => {
    const spec = schemaOf('Playbook').properties.spec;
    const step = spec.properties.workflow.items;
    expect(spec.properties.workload['x-kubernetes-preserve-unknown-fields']).toBe(true);
    expect(step.properties.args['x-kubernetes-preserve-unknown-fields']).toBe(true);
    expect(step.properties.vars['x-kubernetes-preserve-unknown-fields']).toBe(true);
    expect(step.properties.tool).toMatchObject({ type: 'object', required: ['kind'], 'x-kubernetes-preserve-unknown-fields': true });
    expect(step.properties.tool.properties.kind.enum).toContain('http');
    expect(step.properties.next).toEqual(expect.objectContaining({ 'x-kubernetes-preserve-unknown-fields': true }));
    expect(step.properties.case.items.properties.then['x-kubernetes-preserve-unknown-fields']).toBe(true);
    expect(step.required).toEqual(['step']);
  });

  it("carry a playbook's top-level pool, concurrency and schedules to the catalog (the API server pruned them)", () => {
    const check = crdValidator(schemaOf);
    const obj = {
      apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook', metadata: { name: 'nightly', namespace: 'data' },
      spec: {
        pool: 'gpu', concurrency: { limit: 2 },
        schedules: [{ name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', payload: { full: true }, concurrency_policy: 'Forbid' }],
        workflow: [{ step: 'start', tool: { kind: 'python', code: 'result = 1' } }],
      },
    };
    expect(check('Playbook', obj)).toEqual([]);
    const doc = playbookDocument(obj as never);
    expect(doc).toMatchObject({ pool: 'gpu', concurrency: { limit: 2 }, schedules: obj.spec.schedules });
    const parsed = parsePlaybook(playbookYaml(obj as never));
    expect(parsed.errors, JSON.stringify(parsed.errors)).toEqual([]);
    expect(parsed.playbook).toMatchObject({ pool: 'gpu', concurrency: { limit: 2 }, schedules: [{ name: 'nightly', cron: '0 3 * * *' }] });
    // a resource without them registers the document it always did (same spec hash: no re-registration on upgrade)
    const plain = { ...obj, spec: { workflow: obj.spec.workflow } };
    expect(Object.keys(playbookDocument(plain as never))).toEqual(['apiVersion', 'kind', 'metadata', 'workflow']);
    // and what the language refuses, kubectl apply refuses too
    expect(check('Playbook', { ...obj, spec: { ...obj.spec, pool: 'GPU Pool' } }).join()).toMatch(/pool/);
    expect(check('Playbook', { ...obj, spec: { ...obj.spec, concurrency: { limit: 0 } } }).join()).toMatch(/limit/);
    expect(check('Playbook', { ...obj, spec: { ...obj.spec, schedules: [{ name: 'x' }] } }).join()).toMatch(/cron/);
  });

  it('convert JSON Schema to structural OpenAPI', () => {
    expect(toStructural({ type: ['integer', 'string'], description: 'd' })).toEqual({ description: 'd', 'x-kubernetes-int-or-string': true });
    expect(toStructural({ type: ['number', 'string'] })).toEqual({ 'x-kubernetes-preserve-unknown-fields': true });
    expect(toStructural({})).toEqual({ 'x-kubernetes-preserve-unknown-fields': true });
    expect(toStructural({ type: 'string', const: 'Playbook' })).toEqual({ type: 'string', enum: ['Playbook'] });
    expect(toStructural({ type: 'object', additionalProperties: true })).toEqual({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true });
    expect(toStructural({ type: 'object', additionalProperties: { type: 'string' } })).toEqual({ type: 'object', additionalProperties: { type: 'string' } });
    expect(toStructural({ type: 'object', properties: { a: { type: 'string' } }, required: ['a', 'zz'], additionalProperties: false }))
      .toEqual({ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] });
    expect(toStructural({ type: 'array', items: { type: ['string', 'object'] }, minItems: 1, uniqueItems: true }))
      .toEqual({ type: 'array', minItems: 1, items: { 'x-kubernetes-preserve-unknown-fields': true } });
    expect(() => toStructural({ $dynamicRef: '#x' } as any)).toThrow(/unsupported/);
  });

  it('accept every example custom resource in examples/k8s, and reject broken ones', () => {
    const check = crdValidator(schemaOf);
    const dir = join(root, 'examples', 'k8s');
    const seen = new Set<string>();
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
      for (const d of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
        const obj = d.toJS();
        if (!obj || obj.apiVersion !== 'playflow.io/v1alpha1') continue;
        seen.add(obj.kind);
        expect(check(obj.kind, obj), `${file} ${obj.kind}/${obj.metadata.name}`).toEqual([]);
        if (obj.kind === 'Playbook') {
          // and the document the operator registers is a valid playbook for the language
          const res = parsePlaybook(playbookYaml(obj));
          expect(res.errors, JSON.stringify(res.errors)).toEqual([]);
          expect(playbookDocument(obj).metadata).toMatchObject({ name: 'weather-report', path: 'examples/weather-report' });
        }
        if (obj.kind === 'WorkerPool') expect(obj.spec.minReplicas).toBeLessThanOrEqual(obj.spec.maxReplicas);
        if (obj.kind === 'Credential') expect(JSON.stringify(obj.spec)).not.toMatch(/password"?\s*:\s*"/);
      }
    }
    expect([...seen].sort()).toEqual(['Credential', 'Playbook', 'Schedule', 'WorkerPool']);

    expect(check('WorkerPool', { apiVersion: 'playflow.io/v1alpha1', kind: 'WorkerPool', metadata: { name: 'x' }, spec: { statefulSetName: 'w', maxReplicas: 'ten' } }).join()).toMatch(/maxReplicas/);
    expect(check('Playbook', { apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook', metadata: { name: 'x' }, spec: { workflow: [{ step: 'a', tool: { method: 'GET' } }] } }).join()).toMatch(/kind/);
    expect(check('Playbook', { apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook', metadata: { name: 'x' }, spec: { workflow: [{ step: 'a', nxt: 'b' }] } })).toContain('.spec.workflow[0].nxt: unknown field');
    expect(check('Credential', { apiVersion: 'playflow.io/v1alpha1', kind: 'Credential', metadata: { name: 'x' }, spec: { type: 'postgres' } }).join()).toMatch(/secretRef/);
    // and the CEL rules are evaluated, as the API server does
    expect(check('WorkerPool', { apiVersion: 'playflow.io/v1alpha1', kind: 'WorkerPool', metadata: { name: 'x' }, spec: { statefulSetName: 'w', minReplicas: 3, maxReplicas: 2 } }))
      .toEqual(['spec: Invalid value: "object": minReplicas must not exceed maxReplicas']);
  });
});
