/**
 * The fake API server is as strict as the real one where the operator and kubectl depend on it.
 * Each test pins one rule (and fails without it): patch types, PUT semantics, names, namespaces,
 * generation, status and scale subresources, schema pruning/defaulting/validation, CEL rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caller } from './http.js';
import { FakeKubeServer, loadCrds, type Obj } from './server.js';

const MERGE = 'application/merge-patch+json';
const SMP = 'application/strategic-merge-patch+json';
const JSONPATCH = 'application/json-patch+json';
const APPLY = 'application/apply-patch+yaml';
const PF = '/apis/playflow.io/v1alpha1/namespaces';
const STS = '/apis/apps/v1/namespaces';

const sts = (name: string, extra: Obj = {}): Obj => ({
  metadata: { name },
  spec: {
    replicas: 1, serviceName: name,
    selector: { matchLabels: { app: name, tier: 'worker' }, matchExpressions: [{ key: 'track', operator: 'In', values: ['stable', 'canary'] }] },
    template: { metadata: { labels: { app: name, tier: 'worker', track: 'stable' } }, spec: { containers: [{ name: 'worker', image: 'w:1', args: ['a'] }, { name: 'sidecar', image: 's:1' }] } },
    ...extra,
  },
});

/** A CRD with a transition rule, to show oldSelf is bound on update and skipped on create. */
const immutableCrd: Obj = {
  apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'widgets.example.com' },
  spec: {
    group: 'example.com', scope: 'Namespaced', names: { kind: 'Widget', plural: 'widgets', singular: 'widget' },
    versions: [{
      name: 'v1', served: true, storage: true,
      schema: { openAPIV3Schema: { type: 'object', properties: { spec: {
        type: 'object',
        properties: { size: { type: 'integer' }, color: { type: 'string' } },
        'x-kubernetes-validations': [
          { rule: 'self.size == oldSelf.size', message: 'size is immutable' },
          { rule: 'size(self.color) <= 5', messageExpression: '"color " + self.color + " is too long"' },
        ],
      } } } },
    }],
  },
};

describe('strictness of the fake API server', () => {
  const server = new FakeKubeServer({ crds: [...loadCrds(), immutableCrd], namespaces: ['s'], simulateStatefulSetController: false });
  const call = caller(() => server.url);
  const pb = (name = '') => `${PF}/s/playbooks${name ? `/${name}` : ''}`;
  const wp = (name = '') => `${PF}/s/workerpools${name ? `/${name}` : ''}`;
  const playbook = (name: string, spec: Obj = { workflow: [{ step: 'start' }] }) => ({ apiVersion: 'playflow.io/v1alpha1', kind: 'Playbook', metadata: { name }, spec });

  beforeAll(async () => {
    await server.start();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('refuses strategic-merge patches on custom resources (415) and merges them by key on built-ins', async () => {
    expect((await call('POST', pb(), playbook('smp'))).status).toBe(201);
    const r = await call('PATCH', pb('smp'), { spec: { description: 'x' } }, SMP);
    expect(r.status).toBe(415);
    expect(r.body).toMatchObject({ reason: 'UnsupportedMediaType', code: 415 });
    expect(r.body.message).toBe('the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml');
    expect((await call('PATCH', `${wp('x')}/scale`, { spec: { replicas: 1 } }, SMP)).status).toBe(415);
    expect(server.getObject('playbooks', 's', 'smp')!.spec.description).toBeUndefined();

    expect((await call('POST', `${STS}/s/statefulsets`, sts('smp'))).status).toBe(201);
    const p = await call('PATCH', `${STS}/s/statefulsets/smp`, { spec: { template: { spec: { containers: [{ name: 'worker', image: 'w:2' }] } } } }, SMP);
    expect(p.status).toBe(200);
    // Containers merge by name: the sidecar and the worker's args survive.
    expect(p.body.spec.template.spec.containers).toEqual([{ name: 'worker', image: 'w:2', args: ['a'] }, { name: 'sidecar', image: 's:1' }]);
  });

  it('PUT of a missing object is 404 for kinds without create-on-update; server-side apply creates', async () => {
    const put = await call('PUT', pb('ghost'), playbook('ghost'));
    expect(put.status).toBe(404);
    expect(put.body.message).toBe('playbooks.playflow.io "ghost" not found');
    expect((await call('PUT', `${STS}/s/statefulsets/ghost`, sts('ghost'))).status).toBe(404);
    expect((await call('PUT', '/api/v1/namespaces/s/secrets/ghost', { metadata: { name: 'ghost' } })).status).toBe(404);
    expect(server.getObject('playbooks', 's', 'ghost')).toBeUndefined();
    // Leases allow create on update (AllowCreateOnUpdate), as the real registry does.
    expect((await call('PUT', '/apis/coordination.k8s.io/v1/namespaces/s/leases/l', { metadata: { name: 'l' }, spec: {} })).status).toBe(201);
    const applied = await call('PATCH', `${pb('ssa')}?fieldManager=t`, 'apiVersion: playflow.io/v1alpha1\nkind: Playbook\nmetadata:\n  name: ssa\nspec:\n  workflow:\n    - step: start\n', APPLY);
    expect(applied.status).toBe(201);
    // A merge patch of a missing object does not create it.
    expect((await call('PATCH', pb('ghost'), { spec: {} }, MERGE)).status).toBe(404);
  });

  it('PUT of a custom resource needs metadata.resourceVersion', async () => {
    const r = await call('PUT', pb('smp'), playbook('smp'));
    expect(r.status).toBe(422);
    expect(r.body.message).toBe('Playbook.playflow.io "smp" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update');
  });

  it('validates names as DNS-1123 subdomains (Namespaces: labels) with the real message', async () => {
    const bad = await call('POST', pb(), playbook('Bad_Name'));
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({
      reason: 'Invalid',
      message: 'Playbook.playflow.io "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\', and must start and end with an alphanumeric character (e.g. \'example.com\', regex used for validation is \'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\')',
      details: { name: 'Bad_Name', group: 'playflow.io', kind: 'Playbook', causes: [{ reason: 'FieldValueInvalid', field: 'metadata.name' }] },
    });
    expect((await call('POST', '/api/v1/namespaces/s/secrets', { metadata: { name: 'x'.repeat(254) } })).body.message)
      .toContain('must be no more than 253 characters');
    expect((await call('POST', pb(), playbook('dotted.name-1'))).status).toBe(201);
    const ns = await call('POST', '/api/v1/namespaces', { metadata: { name: 'a.b' } });
    expect(ns.status).toBe(422);
    expect(ns.body.message).toContain('Namespace "a.b" is invalid: metadata.name: Invalid value: "a.b": a lowercase RFC 1123 label must consist of');
  });

  it('needs the namespace to exist to create in it; a terminating namespace takes nothing new and empties', async () => {
    const missing = await call('POST', `${PF}/nowhere/playbooks`, playbook('p'));
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ reason: 'NotFound', message: 'namespaces "nowhere" not found', details: { name: 'nowhere', kind: 'namespaces' } });
    // Reads in a missing namespace are plain NotFound / empty lists, as on a real server.
    expect((await call('GET', `${PF}/nowhere/playbooks/p`)).body.message).toBe('playbooks.playflow.io "p" not found');
    expect((await call('GET', `${PF}/nowhere/playbooks`)).body.items).toEqual([]);

    expect((await call('POST', '/api/v1/namespaces', { metadata: { name: 'doomed' } })).status).toBe(201);
    await call('POST', `${PF}/doomed/playbooks`, playbook('plain'));
    await call('POST', `${PF}/doomed/playbooks`, { ...playbook('held'), metadata: { name: 'held', finalizers: ['playflow.io/cleanup'] } });
    expect((await call('DELETE', '/api/v1/namespaces/doomed')).body.status.phase).toBe('Terminating');
    expect(server.getObject('playbooks', 'doomed', 'plain')).toBeUndefined();
    expect(server.getObject('playbooks', 'doomed', 'held')!.metadata.deletionTimestamp).toBeTruthy();
    const late = await call('POST', `${PF}/doomed/playbooks`, playbook('late'));
    expect(late.status).toBe(403);
    expect(late.body.message).toBe('playbooks.playflow.io "late" is forbidden: unable to create new content in namespace doomed because it is being terminated');
    // The namespace goes once its last object's finalizer is removed.
    await call('PATCH', `${PF}/doomed/playbooks/held`, { metadata: { finalizers: null } }, MERGE);
    expect((await call('GET', '/api/v1/namespaces/doomed')).status).toBe(404);
  });

  it('bumps generation on spec changes and when deletion starts, not on metadata, status or pruned fields', async () => {
    await call('POST', pb(), { ...playbook('gen'), metadata: { name: 'gen', finalizers: ['playflow.io/cleanup'] } });
    const gen = async () => server.getObject('playbooks', 's', 'gen')!.metadata.generation;
    expect(await gen()).toBe(1);
    await call('PATCH', pb('gen'), { metadata: { labels: { a: 'b' }, annotations: { c: 'd' } } }, MERGE);
    await call('PATCH', `${pb('gen')}/status`, { status: { catalogVersion: 2 } }, MERGE);
    // An unknown field is pruned: nothing changed, so no new generation.
    await call('PATCH', pb('gen'), { spec: { notInSchema: true } }, MERGE);
    expect(await gen()).toBe(1);
    await call('PATCH', pb('gen'), [{ op: 'add', path: '/spec/description', value: 'd' }], JSONPATCH);
    expect(await gen()).toBe(2);
    const del = await call('DELETE', pb('gen'));
    expect(del.body.metadata.deletionTimestamp).toBeTruthy();
    expect(del.body.metadata.generation).toBe(3);
  });

  it('keeps status and spec apart: create and the main endpoint drop status, /status takes only status', async () => {
    const created = await call('POST', wp(), { metadata: { name: 'split' }, spec: { statefulSetName: 'w', maxReplicas: 3 }, status: { replicas: 7 } });
    expect(created.body.status).toBeUndefined();
    const main = await call('PATCH', wp('split'), { spec: { maxReplicas: 4 }, status: { replicas: 9 } }, MERGE);
    expect(main.body.spec.maxReplicas).toBe(4);
    expect(main.body.status).toBeUndefined();
    const status = await call('PATCH', `${wp('split')}/status`, { spec: { maxReplicas: 1 }, status: { replicas: 2, selector: 'app=w' } }, MERGE);
    expect(status.body.spec.maxReplicas).toBe(4);
    expect(status.body.status).toEqual({ replicas: 2, selector: 'app=w' });
    // Status writes are validated against the schema too.
    expect((await call('PATCH', `${wp('split')}/status`, { status: { replicas: 'two' } }, MERGE)).status).toBe(422);
  });

  it('serves the scale subresource with the selector: the CRD\'s labelSelectorPath, the StatefulSet\'s spec.selector as a string', async () => {
    const scale = await call('GET', `${wp('split')}/scale`);
    expect(scale.body).toMatchObject({ apiVersion: 'autoscaling/v1', kind: 'Scale', spec: { replicas: 0 }, status: { replicas: 2, selector: 'app=w' } });
    const put = await call('PUT', `${wp('split')}/scale`, { ...scale.body, spec: { replicas: 3 } });
    expect(put.body.spec.replicas).toBe(3);
    expect(server.getObject('workerpools', 's', 'split')!.spec.replicas).toBe(3);
    // The scale write goes through the CRD's schema: a stale resourceVersion is a conflict.
    expect((await call('PUT', `${wp('split')}/scale`, { ...scale.body, spec: { replicas: 1 } })).status).toBe(409);

    const stsScale = await call('GET', `${STS}/s/statefulsets/smp/scale`);
    expect(stsScale.body.status.selector).toBe('app=smp,tier=worker,track in (canary,stable)');
    const patched = await call('PATCH', `${STS}/s/statefulsets/smp/scale`, { spec: { replicas: 5 } }, MERGE);
    expect(patched.body.spec.replicas).toBe(5);
    expect(server.getObject('statefulsets', 's', 'smp', 'apps')!.metadata.generation).toBe(3);
    expect((await call('PATCH', `${STS}/s/statefulsets/smp/scale`, { spec: { replicas: -1 } }, MERGE)).status).toBe(422);
  });

  it('prunes unknown fields (Warning header; 400 with fieldValidation=Strict), keeps preserved ones, applies defaults', async () => {
    const spec = { workflow: [{ step: 'start', bogus: 1 }], workload: { anything: { goes: true } }, nope: 'x' };
    const created = await call('POST', pb(), playbook('prune', spec));
    expect(created.status).toBe(201);
    // deletionPolicy: the CRD's default (Retain), applied as the real server applies schema defaults
    expect(created.body.spec).toEqual({ workflow: [{ step: 'start' }], workload: { anything: { goes: true } }, deletionPolicy: 'Retain' });
    expect(created.headers.get('warning')).toContain('unknown field \\"spec.nope\\"');
    expect(created.headers.get('warning')).toContain('unknown field \\"spec.workflow[0].bogus\\"');
    const strict = await call('POST', `${pb()}?fieldValidation=Strict`, playbook('strict', spec));
    expect(strict.status).toBe(400);
    expect(strict.body.message).toBe('Playbook in version "v1alpha1" cannot be handled as a Playbook: strict decoding error: unknown field "spec.workflow[0].bogus", unknown field "spec.nope"');
    const ignored = await call('POST', `${pb()}?fieldValidation=Ignore`, playbook('ignored', spec));
    expect(ignored.headers.get('warning')).toBeNull();
    const pool = await call('POST', wp(), { metadata: { name: 'defaults' }, spec: { statefulSetName: 'w', maxReplicas: 3 } });
    expect(pool.body.spec).toMatchObject({ minReplicas: 1, targetQueueDepthPerReplica: 20, scaleUpStabilizationSeconds: 0, scaleDownStabilizationSeconds: 300 });
  });

  it('validates against the openAPIV3Schema with the real server\'s wording', async () => {
    const r = await call('POST', wp(), { metadata: { name: 'invalid' }, spec: { statefulSetName: '', maxReplicas: 0, minReplicas: 'one' } });
    expect(r.status).toBe(422);
    expect(r.body.message).toBe('WorkerPool.playflow.io "invalid" is invalid: ['
      + 'spec.statefulSetName: Invalid value: "": spec.statefulSetName in body should be at least 1 chars long, '
      + 'spec.minReplicas: Invalid value: "string": spec.minReplicas in body must be of type integer: "string", '
      + 'spec.maxReplicas: Invalid value: 0: spec.maxReplicas in body should be greater than or equal to 1, '
      // A type error means the CEL rules were not evaluated, and the real server says so.
      + '<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]');
    const missing = await call('POST', wp(), { metadata: { name: 'invalid' }, spec: { maxReplicas: 1 } });
    expect(missing.body.message).toBe('WorkerPool.playflow.io "invalid" is invalid: spec.statefulSetName: Required value');
    const en = await call('POST', `${PF}/s/credentials`, { metadata: { name: 'c' }, spec: { type: 'carrier-pigeon', secretRef: { name: 's' } } });
    expect(en.body.message).toMatch(/spec\.type: Unsupported value: "carrier-pigeon": supported values: "/);
  });

  it('evaluates the CRDs\' x-kubernetes-validations CEL rules on create and update', async () => {
    const r = await call('POST', wp(), { metadata: { name: 'cel' }, spec: { statefulSetName: 'w', maxReplicas: 2, minReplicas: 3 } });
    expect(r.status).toBe(422);
    expect(r.body.message).toBe('WorkerPool.playflow.io "cel" is invalid: spec: Invalid value: "object": minReplicas must not exceed maxReplicas');
    expect(r.body.details.causes).toEqual([{ reason: 'FieldValueInvalid', field: 'spec', message: 'Invalid value: "object": minReplicas must not exceed maxReplicas' }]);
    const dup = await call('POST', pb(), playbook('dup', { workflow: [{ step: 'start' }, { step: 'start' }] }));
    expect(dup.body.message).toContain('spec: Invalid value: "object": step names must be unique within the workflow');
    const cred = await call('POST', `${PF}/s/credentials`, {
      metadata: { name: 'cred' },
      spec: { type: 'basic', secretRef: { name: 's', keys: [{ key: 'user', field: 'username' }, { key: 'username' }] } },
    });
    expect(cred.body.message).toContain('spec.secretRef.keys: Invalid value: "array": two keys map to the same data field');
    // An update that breaks a rule is refused too.
    expect((await call('POST', wp(), { metadata: { name: 'cel' }, spec: { statefulSetName: 'w', maxReplicas: 2 } })).status).toBe(201);
    const upd = await call('PATCH', wp('cel'), { spec: { fallbackReplicas: 9 } }, MERGE);
    expect(upd.body.message).toBe('WorkerPool.playflow.io "cel" is invalid: spec: Invalid value: "object": fallbackReplicas must not exceed maxReplicas');
  });

  it('binds oldSelf for transition rules on update only, and uses messageExpression', async () => {
    const path = '/apis/example.com/v1/namespaces/s/widgets';
    expect((await call('POST', path, { metadata: { name: 'w' }, spec: { size: 1, color: 'red' } })).status).toBe(201);
    const grow = await call('PATCH', `${path}/w`, { spec: { size: 2 } }, MERGE);
    expect(grow.body.message).toBe('Widget.example.com "w" is invalid: spec: Invalid value: "object": size is immutable');
    const color = await call('PATCH', `${path}/w`, { spec: { color: 'magenta' } }, MERGE);
    expect(color.body.message).toBe('Widget.example.com "w" is invalid: spec: Invalid value: "object": color magenta is too long');
  });
});
