/**
 * The chart's generated Secrets survive `helm template` (Argo CD) and upgrades: nothing random is
 * rendered (two renders are byte-identical), and the pre-install/pre-upgrade Job's exact command
 * (`playflow operator ensure-secrets` with the rendered --spec) creates them once against an API
 * server and never changes them again — on a second run, or over a Secret that lacks a key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { FakeKubeServer } from '../fake-k8s/server.js';
import { isHook, podSpecOf, render, renderText, ROOT, VALUE_SETS, type Doc } from './render.js';

const run = promisify(execFile);
const NS = 'pf-secrets';

function ensureJob(docs: Doc[]): Doc | undefined {
  return docs.find((d) => d.kind === 'Job' && isHook(d, 'pre-install') && isHook(d, 'pre-upgrade'));
}

/** Every secretKeyRef of every pod of the release (the hook Job's own pod excluded). */
function secretRefs(docs: Doc[]): { secret: string; key: string; where: string }[] {
  const out: { secret: string; key: string; where: string }[] = [];
  for (const d of docs) {
    const pod = podSpecOf(d);
    if (!pod || d.kind === 'Job') continue;
    for (const c of pod.containers) {
      for (const e of c.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef;
        if (ref) out.push({ secret: ref.name, key: ref.key, where: `${d.kind}/${d.metadata.name} ${e.name}` });
      }
    }
  }
  return out;
}

describe('generated secrets', () => {
  let kube: FakeKubeServer;
  let dir: string;
  let kubeconfig: string;

  beforeAll(async () => {
    // RBAC on, from the rendered hook ServiceAccounts, Roles and RoleBindings of both releases
    // (helm template leaves their namespace to the install: the release's).
    const rbac = [...render('rel', NS, VALUE_SETS.tokenOn), ...render('old', NS, [])]
      .filter((d) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(d.kind))
      .map((d) => ({ ...d, metadata: { ...d.metadata, namespace: d.metadata.namespace ?? NS } }));
    kube = new FakeKubeServer({ rbac, namespaces: [NS] });
    await kube.start();
    dir = mkdtempSync(path.join(tmpdir(), 'pf-ensure-'));
    kubeconfig = path.join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, kube.kubeConfig(kube.adminToken, NS).exportConfig());
  }, 120_000);
  afterAll(async () => {
    await kube?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Runs the Job's container the way the kubelet would: same args, same env, and its
   * ServiceAccount's token (a kubeconfig instead of the in-cluster mount).
   */
  async function runJob(job: Doc): Promise<string> {
    const pod = podSpecOf(job);
    const c = pod.containers[0];
    const sa = path.join(dir, `kubeconfig-${pod.serviceAccountName}`);
    writeFileSync(sa, kube.kubeConfig(kube.serviceAccountToken(NS, pod.serviceAccountName), NS).exportConfig());
    expect(c.command, 'the image entry point (playflow) runs the args').toBeUndefined();
    const env = Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]));
    const { stdout } = await run(process.execPath, [path.join(ROOT, 'dist', 'cli', 'index.js'), ...c.args], {
      env: { PATH: process.env.PATH, ...env, KUBECONFIG: sa },
    });
    expect(kube.denied, 'requests of the Job that its rendered RBAC denies').toEqual([]);
    return stdout;
  }

  for (const [name, args] of Object.entries(VALUE_SETS)) {
    it(`renders nothing random with ${name}: a second helm template is identical`, () => {
      expect(renderText('rel', NS, args)).toBe(renderText('rel', NS, args));
    }, 60_000);
  }

  it('references only Secrets that the hook Job generates or the user provides', () => {
    for (const [name, args] of Object.entries(VALUE_SETS)) {
      const docs = render('rel', NS, args);
      const job = ensureJob(docs)!;
      const spec = JSON.parse(podSpecOf(job).containers[0].args.at(-1)) as { name: string; keys: Record<string, unknown> }[];
      const provided = new Set(['pf-db', 'pf-nats']);
      const rendered = new Set(docs.filter((d) => d.kind === 'Secret').map((d) => d.metadata.name));
      for (const ref of secretRefs(docs)) {
        if (provided.has(ref.secret) || rendered.has(ref.secret)) continue;
        const gen = spec.find((s) => s.name === ref.secret);
        expect(gen, `${name}: ${ref.where} reads Secret ${ref.secret}, which nothing creates`).toBeDefined();
        expect(Object.keys(gen!.keys), `${name}: ${ref.where} reads key ${ref.key}`).toContain(ref.key);
      }
    }
  }, 120_000);

  it('creates the Secrets once with the Job\'s command, and never changes them again', async () => {
    const docs = render('rel', NS, VALUE_SETS.tokenOn);
    const job = ensureJob(docs)!;
    const first = await runJob(job);
    expect(first).toContain(`created secret ${NS}/rel-playflow-encryption (keys: key)`);
    expect(first).toContain(`created secret ${NS}/rel-playflow-postgresql`);
    expect(first).toContain(`created secret ${NS}/rel-playflow-api-token (keys: token)`);

    const read = (n: string) => kube.getObject('secrets', NS, n)!.data as Record<string, string>;
    const dec = (v: string) => Buffer.from(v, 'base64').toString('utf8');
    const enc = read('rel-playflow-encryption');
    expect(Buffer.from(dec(enc.key), 'base64').length, 'PLAYFLOW_ENCRYPTION_KEY is 32 bytes, base64').toBe(32);
    const db = read('rel-playflow-postgresql');
    expect(dec(db.password)).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(dec(db.url)).toBe(`postgres://playflow:${dec(db.password)}@rel-playflow-postgresql:5432/playflow`);
    expect(dec(read('rel-playflow-api-token').token)).toMatch(/^[A-Za-z0-9]{40}$/);
    // Secret values never reach the Job's output (it goes to pod logs).
    for (const v of [enc.key, db.password, db.url]) expect(first).not.toContain(dec(v));

    // helm upgrade / the next Argo CD sync: a fresh render, the Job again — nothing changes.
    const again = await runJob(ensureJob(render('rel', NS, VALUE_SETS.tokenOn))!);
    expect(again).toContain(`unchanged secret ${NS}/rel-playflow-encryption`);
    expect(read('rel-playflow-encryption')).toEqual(enc);
    expect(read('rel-playflow-postgresql')).toEqual(db);
  }, 120_000);

  it('completes a Secret that lacks a key from the values it has (an older release\'s Secret)', async () => {
    kube.putObject('secrets', {
      apiVersion: 'v1', kind: 'Secret',
      metadata: { name: 'old-playflow-postgresql', namespace: NS },
      data: { password: Buffer.from('kept-password').toString('base64') },
    });
    const out = await runJob(ensureJob(render('old', NS, []))!);
    expect(out).toContain(`completed secret ${NS}/old-playflow-postgresql (keys: url)`);
    const data = kube.getObject('secrets', NS, 'old-playflow-postgresql')!.data;
    expect(Buffer.from(data.password, 'base64').toString()).toBe('kept-password');
    expect(Buffer.from(data.url, 'base64').toString()).toBe('postgres://playflow:kept-password@old-playflow-postgresql:5432/playflow');
  }, 120_000);

  it('rejects a malformed spec naming the field', async () => {
    const cli = path.join(ROOT, 'dist', 'cli', 'index.js');
    const bad = JSON.stringify([{ name: 'x', keys: { url: { template: 'a{nope}' } } }]);
    await expect(run(process.execPath, [cli, 'operator', 'ensure-secrets', '--spec', bad], { env: { PATH: process.env.PATH, KUBECONFIG: kubeconfig } }))
      .rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('--spec[0].keys.url.template: {nope} is not a generated key') });
  }, 60_000);
});
