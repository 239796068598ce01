/**
 * Generated Secrets that survive `helm template` (`playflow operator ensure-secrets`, the chart's
 * pre-install/pre-upgrade hook Job). Argo CD renders charts with `helm template`, where `lookup`
 * returns nothing, so a chart that generates a random value in a template regenerates it on every
 * sync: the encryption key (stored credentials become unreadable), the PostgreSQL password
 * (database auth breaks) and the API token. The chart therefore renders no generated value at all;
 * this command creates each Secret only when it is absent, and fills in only the keys it lacks, so
 * every later run — upgrade, sync, re-install over a kept Secret — leaves the values alone.
 *
 * The spec is JSON (the chart passes it as one argument; it holds names and recipes, never a
 * secret value):
 *   [{ "name": "rel-playflow-encryption",
 *      "labels": {...}, "annotations": {...},
 *      "keys": { "key": { "random": "base64", "bytes": 32 } } },
 *    { "name": "rel-playflow-postgresql",
 *      "keys": { "password": { "random": "alphanumeric", "length": 32 },
 *                "url": { "template": "postgres://playflow:{password}@rel-playflow-postgresql:5432/playflow" } } }]
 * A template refers to other keys of the same Secret as `{key}` (after they are generated).
 */
import { randomBytes, randomInt } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { isConflict, isNotFound, mergePatchOptions } from './kube.js';

export type KeyRecipe =
  | { random: 'base64'; bytes: number }
  | { random: 'alphanumeric'; length: number }
  | { template: string };

export interface SecretSpec {
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  keys: Record<string, KeyRecipe>;
}

export interface EnsureResult {
  name: string;
  /** created: the Secret did not exist; completed: keys were added; unchanged: nothing to do. */
  action: 'created' | 'completed' | 'unchanged';
  /** Keys written by this run (names only). */
  keys: string[];
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export class SecretSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretSpecError';
  }
}

/** Parses and checks the spec, naming the entry and field that is wrong. */
export function parseSecretSpecs(text: string): SecretSpec[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new SecretSpecError(`--spec: not valid JSON (${(err as Error).message})`);
  }
  if (!Array.isArray(raw)) throw new SecretSpecError('--spec: expected a JSON array of secrets');
  return raw.map((s: any, i: number) => {
    const at = `--spec[${i}]`;
    if (!s || typeof s !== 'object') throw new SecretSpecError(`${at}: expected an object`);
    if (typeof s.name !== 'string' || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(s.name)) throw new SecretSpecError(`${at}.name: expected a Secret name (DNS-1123)`);
    if (!s.keys || typeof s.keys !== 'object' || !Object.keys(s.keys).length) throw new SecretSpecError(`${at}.keys: expected at least one key`);
    for (const [k, r] of Object.entries<any>(s.keys)) {
      const where = `${at}.keys.${k}`;
      if (r?.random === 'base64') {
        if (!Number.isInteger(r.bytes) || r.bytes < 16) throw new SecretSpecError(`${where}.bytes: expected an integer ≥ 16`);
      } else if (r?.random === 'alphanumeric') {
        if (!Number.isInteger(r.length) || r.length < 16) throw new SecretSpecError(`${where}.length: expected an integer ≥ 16`);
      } else if (typeof r?.template === 'string') {
        for (const [, ref] of r.template.matchAll(/\{([^}]+)\}/g)) {
          if (!(ref in s.keys) || 'template' in s.keys[ref]) throw new SecretSpecError(`${where}.template: {${ref}} is not a generated key of this Secret`);
        }
      } else throw new SecretSpecError(`${where}: expected {random: base64, bytes} | {random: alphanumeric, length} | {template}`);
    }
    return s as SecretSpec;
  });
}

function generate(recipe: KeyRecipe, values: Record<string, string>): string {
  if ('template' in recipe) return recipe.template.replace(/\{([^}]+)\}/g, (_, ref: string) => values[ref]);
  if (recipe.random === 'base64') return randomBytes(recipe.bytes).toString('base64');
  let out = '';
  for (let i = 0; i < recipe.length; i++) out += ALNUM[randomInt(ALNUM.length)];
  return out;
}

/** The values of the keys `existing` lacks (random ones first, then templates over all values). */
export function missingValues(spec: SecretSpec, existing: Record<string, string>): Record<string, string> {
  const values = { ...existing };
  const added: Record<string, string> = {};
  const order = Object.entries(spec.keys).sort(([, a], [, b]) => Number('template' in a) - Number('template' in b));
  for (const [key, recipe] of order) {
    if (values[key] !== undefined) continue;
    values[key] = added[key] = generate(recipe, values);
  }
  return added;
}

const decode = (data: Record<string, string> | undefined) =>
  Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
const encode = (values: Record<string, string>) =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]));

/** Creates the Secret when absent, adds the keys it lacks, never changes a key that is there. */
export async function ensureSecret(core: k8s.CoreV1Api, namespace: string, spec: SecretSpec): Promise<EnsureResult> {
  let current: k8s.V1Secret | undefined;
  try {
    current = await core.readNamespacedSecret({ name: spec.name, namespace });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (!current) {
    const values = missingValues(spec, {});
    try {
      await core.createNamespacedSecret({
        namespace,
        body: {
          apiVersion: 'v1', kind: 'Secret', type: 'Opaque',
          metadata: { name: spec.name, namespace, labels: spec.labels, annotations: spec.annotations },
          data: encode(values),
        },
      });
      return { name: spec.name, action: 'created', keys: Object.keys(values) };
    } catch (err) {
      // Another run created it between our read and create: theirs stands; complete it below.
      if (!isConflict(err)) throw err;
      current = await core.readNamespacedSecret({ name: spec.name, namespace });
    }
  }
  const added = missingValues(spec, decode(current.data));
  if (!Object.keys(added).length) return { name: spec.name, action: 'unchanged', keys: [] };
  await core.patchNamespacedSecret({
    name: spec.name, namespace,
    // resourceVersion makes the patch fail (409) rather than overwrite a concurrent completion.
    body: { metadata: { resourceVersion: current.metadata?.resourceVersion }, data: encode(added) },
  }, mergePatchOptions);
  return { name: spec.name, action: 'completed', keys: Object.keys(added) };
}
