/**
 * Generates the CustomResourceDefinitions in crds/ (group playflow.io, version v1alpha1):
 * Playbook, Credential and WorkerPool. Run with `npm run build && npm run crds` (`-- --check` only
 * reports stale files); the files are checked in and test/operator/crds.test.ts fails when they
 * differ from what this script produces.
 *
 * The Playbook spec schema is derived from the language's JSON Schema (playbook/schema.ts
 * `playbookJsonSchema`), converted to a *structural* OpenAPI v3 schema as Kubernetes requires:
 *
 * - no $ref / $schema / $id / title, no allOf/anyOf/oneOf/if/then/not (dropped; the server
 *   validates the full language on registration and the operator reports it in `Valid`);
 * - `const` → a one-value `enum`;
 * - a node with several types: `["integer","string"]` → `x-kubernetes-int-or-string`, any other
 *   union (templated numbers/booleans, `next` in its three forms, `retry` list-or-object, `then`
 *   object-or-list, `in`, any `{}`) → `x-kubernetes-preserve-unknown-fields: true`, untyped;
 * - open objects (`additionalProperties: true`, or no properties: workload, args, vars, tool
 *   configurations, headers…) → `x-kubernetes-preserve-unknown-fields: true`;
 * - `additionalProperties: false` is dropped (Kubernetes forbids it; unknown fields are pruned and
 *   `kubectl --validate=strict` reports them).
 *
 * CEL rules (`x-kubernetes-validations`) catch author mistakes at `kubectl apply` time: unique step
 * names, unique workbook task names, minReplicas ≤ maxReplicas, fallbackReplicas ≤ maxReplicas,
 * unique credential fields, required ⊆ fields in a credential schema. Lists a rule iterates have
 * `maxItems` (and strings `maxLength`) so the API server's CEL cost estimate stays in budget.
 * CEL cannot see untyped (preserve-unknown) fields, so "every `next` target exists" — `next` has
 * three YAML forms and no single structural type — is checked by the server on registration
 * (422 with the path) and shows up in the Playbook's Valid condition instead.
 */
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { playbookJsonSchema } from '../playbook/schema.js';import { POOL_NAME_PATTERN } from '../playbook/schema.js';


type Schema = Record<string, any>;

const PRESERVE = 'x-kubernetes-preserve-unknown-fields';
const DROPPED = new Set(['$schema', '$id', '$ref', '$comment', 'title', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else', 'examples', 'const', 'default', 'definitions', '$defs']);
const KEPT_SCALAR = ['minLength', 'maxLength', 'pattern', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties', 'nullable'];

/** JSON Schema (draft-07 subset used by playbook/schema.ts) → structural OpenAPI v3 schema. */
export function toStructural(input: Schema | boolean | undefined): Schema {
  if (input === undefined || input === true) return { [PRESERVE]: true };
  if (input === false) throw new Error('a `false` schema has no structural equivalent');
  const s = input;
  const out: Schema = {};
  if (typeof s.description === 'string') out.description = s.description;
  for (const k of Object.keys(s)) {
    if (k.startsWith('$') && !DROPPED.has(k)) throw new Error(`unsupported JSON Schema keyword ${k}`);
  }

  let type = s.type;
  if (type === undefined && s.const !== undefined) type = jsonType(s.const);
  if (Array.isArray(type)) {
    const set = new Set<string>(type);
    if (set.size === 1) type = [...set][0];
    else if (set.size === 2 && set.has('integer') && set.has('string')) return { ...out, 'x-kubernetes-int-or-string': true };
    else return { ...out, [PRESERVE]: true };
  }
  if (type === undefined) {
    // Untyped: an object only if it declares properties; otherwise anything goes.
    if (s.properties) type = 'object';
    else return { ...out, [PRESERVE]: true };
  }
  out.type = type;
  if (s.const !== undefined) out.enum = [s.const];
  else if (Array.isArray(s.enum)) out.enum = [...s.enum];
  if (s.format === 'date-time' || s.format === 'int64' || s.format === 'int32') out.format = s.format;
  for (const k of KEPT_SCALAR) {
    if (s[k] === undefined) continue;
    if (k === 'uniqueItems') continue; // forbidden to be true in structural schemas; enforced by CEL where needed
    if (['minLength', 'maxLength', 'pattern'].includes(k) && type !== 'string') continue;
    if (['minItems', 'maxItems'].includes(k) && type !== 'array') continue;
    out[k] = s[k];
  }

  if (type === 'array') {
    out.items = Array.isArray(s.items) ? { [PRESERVE]: true } : toStructural(s.items as Schema | undefined);
  } else if (type === 'object') {
    const props = s.properties as Record<string, Schema> | undefined;
    if (props && Object.keys(props).length) {
      out.properties = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, toStructural(v)]));
      const required = (s.required as string[] | undefined)?.filter((r) => r in props);
      if (required?.length) out.required = required;
      // An open object with some known fields (tool configs, keychain entries, auth…) keeps its
      // unknown fields; a closed one (additionalProperties: false) relies on pruning.
      if (s.additionalProperties !== false || hasConditionalShapes(s)) out[PRESERVE] = true;
    } else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
      out.additionalProperties = toStructural(s.additionalProperties as Schema);
    } else {
      out[PRESERVE] = true;
    }
  }
  return out;
}

function hasConditionalShapes(s: Schema): boolean {
  return Array.isArray(s.allOf) || Array.isArray(s.anyOf) || Array.isArray(s.oneOf) || s.if !== undefined;
}

function jsonType(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

// ---- shared pieces ---------------------------------------------------------------------------

const conditions: Schema = {
  type: 'array',
  description: 'Latest observations of the object\'s state (metav1.Condition).',
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
  items: {
    type: 'object',
    required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
    properties: {
      type: { type: 'string', maxLength: 316 },
      status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
      observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
      lastTransitionTime: { type: 'string', format: 'date-time' },
      reason: { type: 'string', maxLength: 1024 },
      message: { type: 'string', maxLength: 32768 },
    },
  },
};

/** Both Playbook and Credential: what deleting the resource does to what it registered (operator/types.ts). */
const deletionPolicy = {
  type: 'string',
  enum: ['Delete', 'Retain'],
  default: 'Retain',
  description: 'On deletion of this resource: Retain (default) keeps what it registered in the server (still owned by this kind/namespace/name, so a re-created resource adopts it); Delete removes it.',
};

const readyColumn = { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' };
const reasonColumn = { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 };
const ageColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

function crd(opts: {
  kind: string; plural: string; singular: string; shortNames: string[]; description: string;
  spec: Schema; status: Schema; columns: Schema[]; scale?: Schema;
}): Schema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${opts.plural}.playflow.io`,
      labels: { 'app.kubernetes.io/part-of': 'playflow' },
    },
    spec: {
      group: 'playflow.io',
      scope: 'Namespaced',
      names: {
        kind: opts.kind,
        listKind: `${opts.kind}List`,
        plural: opts.plural,
        singular: opts.singular,
        shortNames: opts.shortNames,
        categories: ['playflow'],
      },
      versions: [{
        name: 'v1alpha1',
        served: true,
        storage: true,
        subresources: { status: {}, ...(opts.scale ? { scale: opts.scale } : {}) },
        additionalPrinterColumns: opts.columns,
        schema: {
          openAPIV3Schema: {
            type: 'object',
            description: opts.description,
            required: ['spec'],
            properties: {
              apiVersion: { type: 'string' },
              kind: { type: 'string' },
              metadata: { type: 'object' },
              spec: opts.spec,
              status: opts.status,
            },
          },
        },
      }],
    },
  };
}

// ---- Playbook --------------------------------------------------------------------------------

export function playbookSpecSchema(doc: Schema = playbookJsonSchema as Schema): Schema {
  const props = doc.properties as Record<string, Schema>;
  const meta = props.metadata!.properties as Record<string, Schema>;
  const workflow = toStructural(props.workflow);
  workflow.maxItems = 256;
  workflow.items.properties.step.maxLength = 253;
  const workbook = toStructural(props.workbook);
  workbook.maxItems = 256;
  if (workbook.items?.properties?.name) workbook.items.properties.name.maxLength = 253;
  const spec: Schema = {
    type: 'object',
    description: 'The playbook document\'s sections. The operator registers `apiVersion: playflow.io/v2, kind: Playbook` with these sections in the catalog.',
    required: ['workflow'],
    properties: {
      path: { ...toStructural(meta.path), description: 'Catalog path; default <namespace>/<name>.', minLength: 1 },
      name: { ...toStructural(meta.name), description: 'Playbook metadata.name; default the resource name.' },
      description: toStructural(meta.description),
      labels: toStructural(meta.labels),
      workload: { ...toStructural(props.workload), description: 'Global variables, read-only after an execution starts.' },
      keychain: toStructural(props.keychain),
      workbook,
      workflow,
      pool: { ...toStructural(props.pool), description: 'Worker pool of the steps that name none; default `default`.' },
      concurrency: { ...toStructural(props.concurrency), description: 'At most `limit` executions of this path run at once; the others wait (queued).' },
      schedules: { ...toStructural(props.schedules), description: 'Cron schedules registered, changed and removed with the playbook.' },
      deletionPolicy,
    },
    'x-kubernetes-validations': [
      { rule: 'self.workflow.all(s, self.workflow.exists_one(t, t.step == s.step))', message: 'step names must be unique within the workflow' },
      { rule: '!has(self.workbook) || self.workbook.all(w, self.workbook.exists_one(v, v.name == w.name))', message: 'workbook task names must be unique' },
    ],
  };
  return spec;
}

export function playbookCrd(): Schema {
  return crd({
    kind: 'Playbook', plural: 'playbooks', singular: 'playbook', shortNames: ['pb', 'pfpb'],
    description: 'A Playflow playbook, registered in the server\'s catalog by the operator.',
    spec: playbookSpecSchema(),
    status: {
      type: 'object',
      properties: {
        observedGeneration: { type: 'integer', format: 'int64' },
        catalogPath: { type: 'string' },
        catalogVersion: { type: 'integer' },
        catalogId: { type: 'string' },
        specHash: { type: 'string', description: 'sha256 of the registered document; registration happens only when it changes' },
        lastRegisteredTime: { type: 'string', format: 'date-time' },
        conditions,
      },
    },
    columns: [
      readyColumn,
      { name: 'Path', type: 'string', jsonPath: '.status.catalogPath' },
      { name: 'Version', type: 'integer', jsonPath: '.status.catalogVersion' },
      { name: 'Valid', type: 'string', jsonPath: '.status.conditions[?(@.type=="Valid")].status', priority: 1 },
      reasonColumn,
      ageColumn,
    ],
  });
}

// ---- Credential ------------------------------------------------------------------------------

export const CREDENTIAL_TYPES = ['postgres', 'oauth2', 'bearer', 'basic', 'api_key', 'service_account', 'warehouse', 'custom'];

export function credentialCrd(): Schema {
  const name253 = { type: 'string', minLength: 1, maxLength: 253 };
  return crd({
    kind: 'Credential', plural: 'credentials', singular: 'credential', shortNames: ['pfcred'],
    description: 'A Playflow credential whose data comes from a Kubernetes Secret; the operator stores it (encrypted) in the server. The data never appears in this resource.',
    spec: {
      type: 'object',
      required: ['type', 'secretRef'],
      properties: {
        name: { ...name253, description: 'Name in the credential store (what `auth:` references); default the resource name.' },
        type: { type: 'string', enum: CREDENTIAL_TYPES },
        description: { type: 'string' },
        tags: { type: 'array', items: { type: 'string' } },
        meta: { type: 'object', [PRESERVE]: true, description: 'Free metadata stored with the credential.' },
        scope: {
          type: 'object',
          description: 'Playbooks allowed to use the credential: catalog path globs (** any, * within a segment) and/or namespaces of the owning Playbook resources. Absent = every playbook.',
          properties: {
            paths: { type: 'array', maxItems: 100, items: { type: 'string', minLength: 1, maxLength: 1024 } },
            namespaces: { type: 'array', maxItems: 100, items: { type: 'string', minLength: 1, maxLength: 63 } },
          },
        },
        schema: {
          type: 'object',
          description: 'Validation schema the server applies to the data: {fields, required, types, description}.',
          properties: {
            fields: { type: 'array', maxItems: 128, items: name253 },
            required: { type: 'array', maxItems: 128, items: name253 },
            types: { type: 'object', additionalProperties: { type: 'string', enum: ['string', 'integer', 'boolean', 'number', 'array', 'object'] } },
            description: { type: 'string' },
          },
          'x-kubernetes-validations': [
            { rule: '!has(self.fields) || size(self.fields) == 0 || !has(self.required) || self.required.all(r, r in self.fields)', message: 'every required field must be listed in fields' },
          ],
        },
        secretRef: {
          type: 'object',
          required: ['name'],
          description: 'The Secret (same namespace) holding the data. Without keys, every Secret key becomes a data field.',
          properties: {
            name: name253,
            keys: {
              type: 'array',
              maxItems: 64,
              description: 'Which Secret keys become which data fields.',
              items: {
                type: 'object',
                required: ['key'],
                properties: {
                  key: { ...name253, description: 'Key in the Secret.' },
                  field: { ...name253, description: 'Data field; default the key.' },
                  optional: { type: 'boolean', description: 'The key may be absent from the Secret.' },
                },
              },
              'x-kubernetes-validations': [
                {
                  rule: 'self.all(k, self.exists_one(j, (has(j.field) ? j.field : j.key) == (has(k.field) ? k.field : k.key)))',
                  message: 'two keys map to the same data field',
                },
              ],
            },
          },
        },
        deletionPolicy,
      },
    },
    status: {
      type: 'object',
      properties: {
        observedGeneration: { type: 'integer', format: 'int64' },
        credentialName: { type: 'string' },
        secretResourceVersion: { type: 'string', description: 'resourceVersion of the Secret last stored' },
        lastSyncTime: { type: 'string', format: 'date-time' },
        conditions,
      },
    },
    columns: [readyColumn, { name: 'Type', type: 'string', jsonPath: '.spec.type' }, reasonColumn, ageColumn],
  });
}

// ---- WorkerPool ------------------------------------------------------------------------------

/** HPAScalingRules without the stabilization window (the pool has its own seconds fields). */
function scalingRules(description: string): Schema {
  return {
    type: 'object',
    description,
    properties: {
      selectPolicy: { type: 'string', enum: ['Max', 'Min', 'Disabled'], description: 'Max (default): the policy allowing the biggest change; Min: the smallest; Disabled: never scale this way.' },
      policies: {
        type: 'array',
        maxItems: 10,
        'x-kubernetes-list-type': 'atomic',
        items: {
          type: 'object',
          required: ['type', 'value', 'periodSeconds'],
          properties: {
            type: { type: 'string', enum: ['Pods', 'Percent'] },
            value: { type: 'integer', minimum: 1, description: 'Pods added/removed, or percent of the count at the period\'s start.' },
            periodSeconds: { type: 'integer', minimum: 1, maximum: 1800, description: 'The window the change is counted over.' },
          },
        },
      },
    },
  };
}

export function workerPoolCrd(): Schema {
  return crd({
    kind: 'WorkerPool', plural: 'workerpools', singular: 'workerpool', shortNames: ['wp', 'pfwp'],
    description: 'Scales a Playflow worker StatefulSet from the server\'s queue depth (queued + leased commands).',
    spec: {
      type: 'object',
      required: ['statefulSetName', 'maxReplicas'],
      properties: {
        statefulSetName: { type: 'string', minLength: 1, maxLength: 253, description: 'The worker StatefulSet to scale (same namespace).' },
        pool: { type: 'string', pattern: POOL_NAME_PATTERN, default: 'default', description: "The worker pool (playbook/step `pool:`) whose queue depth sizes the StatefulSet; its workers run with WORKER_POOL set to it." },
        minReplicas: { type: 'integer', minimum: 0, default: 1 },
        maxReplicas: { type: 'integer', minimum: 1 },
        targetQueueDepthPerReplica: { type: 'integer', minimum: 1, default: 20, description: 'desired = clamp(ceil((queued + leased) / target), min, max)' },
        scaleUpStabilizationSeconds: { type: 'integer', minimum: 0, maximum: 3600, default: 0 },
        scaleDownStabilizationSeconds: { type: 'integer', minimum: 0, maximum: 3600, default: 300 },
        fallbackReplicas: { type: 'integer', minimum: 0, description: 'Replicas while the queue cannot be read (after fallbackFailureThreshold failed reads in a row); unset keeps the current count.' },
        fallbackFailureThreshold: { type: 'integer', minimum: 1, maximum: 100, description: 'Failed queue reads in a row before fallbackReplicas applies; until then the count is kept. Default 3 (KEDA\'s failureThreshold).' },
        tolerance: { type: 'number', minimum: 0, maximum: 1, description: 'Keep the replica count while |depth / (replicas × target) − 1| ≤ tolerance. Default 0.1 (the HPA\'s).' },
        scaleUp: scalingRules('Scale-up rate limits (the HPA\'s behavior.scaleUp); unset: none.'),
        scaleDown: scalingRules('Scale-down rate limits (the HPA\'s behavior.scaleDown), applied after the stabilization window; unset: none.'),
        pollIntervalSeconds: { type: 'integer', minimum: 1, maximum: 3600, description: 'How often the queue is read; default the operator\'s WORKERPOOL_POLL_SECONDS (15).' },
        replicas: { type: 'integer', minimum: 0, description: 'Set by `kubectl scale`: pins the count (clamped to min/max) and suspends queue-based scaling until removed.' },
      },
      'x-kubernetes-validations': [
        { rule: '!has(self.minReplicas) || self.minReplicas <= self.maxReplicas', message: 'minReplicas must not exceed maxReplicas' },
        { rule: '!has(self.fallbackReplicas) || self.fallbackReplicas <= self.maxReplicas', message: 'fallbackReplicas must not exceed maxReplicas' },
      ],
    },
    status: {
      type: 'object',
      properties: {
        observedGeneration: { type: 'integer', format: 'int64' },
        replicas: { type: 'integer' },
        desiredReplicas: { type: 'integer' },
        queueDepth: { type: 'integer' },
        queued: { type: 'integer' },
        leased: { type: 'integer' },
        lastScaleTime: { type: 'string', format: 'date-time' },
        queueReadFailures: { type: 'integer', description: 'Failed queue reads in a row.' },
        selector: { type: 'string' },
        conditions,
      },
    },
    scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' },
    columns: [
      { name: 'Replicas', type: 'integer', jsonPath: '.status.replicas' },
      { name: 'Desired', type: 'integer', jsonPath: '.status.desiredReplicas' },
      { name: 'Queue', type: 'integer', jsonPath: '.status.queueDepth' },
      { name: 'Target', type: 'string', jsonPath: '.spec.statefulSetName', priority: 1 },
      ageColumn,
    ],
  });
}

// ---- Schedule --------------------------------------------------------------------------------

export function scheduleCrd(): Schema {
  return crd({
    kind: 'Schedule', plural: 'schedules', singular: 'schedule', shortNames: ['pfsched'],
    description: 'Starts a Playflow playbook on a cron; the operator declares it in the server (schedule `k8s:<namespace>:<name>`), whose ticker fires each tick once across replicas.',
    spec: {
      type: 'object',
      required: ['cron', 'path'],
      properties: {
        cron: { type: 'string', minLength: 1, maxLength: 200, description: 'Cron: 5 fields, or 6 with seconds first.' },
        timezone: { type: 'string', minLength: 1, maxLength: 100, default: 'UTC', description: 'IANA time zone of the cron.' },
        path: { type: 'string', minLength: 1, maxLength: 1024, description: 'Catalog path of the playbook.' },
        version: { type: 'integer', minimum: 1, description: 'Pinned catalog version; unset: the latest at each tick.' },
        payload: { type: 'object', [PRESERVE]: true, description: 'Payload of every execution.' },
        concurrencyPolicy: { type: 'string', enum: ['Allow', 'Forbid', 'Replace'], default: 'Allow' },
        missedRuns: { type: 'string', enum: ['RunOnce', 'Skip'], default: 'RunOnce', description: 'Ticks nobody fired: one execution for the latest (RunOnce) or none (Skip).' },
        startingDeadlineSeconds: { type: 'integer', minimum: 1, description: 'A tick not started within this many seconds counts as missed.' },
        suspend: { type: 'boolean', default: false },
      },
    },
    status: {
      type: 'object',
      properties: {
        observedGeneration: { type: 'integer', format: 'int64' },
        scheduleName: { type: 'string', description: 'Name of the schedule in the server.' },
        nextRun: { type: 'string', format: 'date-time' },
        lastRun: { type: 'string', format: 'date-time' },
        lastExecutionId: { type: 'string' },
        lastSyncTime: { type: 'string', format: 'date-time' },
        conditions,
      },
    },
    columns: [
      readyColumn,
      { name: 'Cron', type: 'string', jsonPath: '.spec.cron' },
      { name: 'Path', type: 'string', jsonPath: '.spec.path' },
      { name: 'Suspend', type: 'boolean', jsonPath: '.spec.suspend' },
      { name: 'Last', type: 'date', jsonPath: '.status.lastRun' },
      { name: 'Next', type: 'string', jsonPath: '.status.nextRun' },
      reasonColumn,
      ageColumn,
    ],
  });
}

// ---- output ----------------------------------------------------------------------------------

const HEADER = '# Generated by scripts/gen-crds.ts from playbook/schema.ts — do not edit; run `npm run build && npm run crds`.\n';

/** File name → YAML text, exactly as checked in under crds/. */
export function renderCrds(): Record<string, string> {
  const docs: Array<[string, Schema]> = [
    ['playflow.io_playbooks.yaml', playbookCrd()],
    ['playflow.io_credentials.yaml', credentialCrd()],
    ['playflow.io_workerpools.yaml', workerPoolCrd()],
    ['playflow.io_schedules.yaml', scheduleCrd()],
  ];
  return Object.fromEntries(docs.map(([file, doc]) => [file, HEADER + stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false })]));
}

/** The repository root (works from scripts/ under vitest and from dist/scripts/ after a build). */
export function repoRoot(from = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above ' + from);
    dir = up;
  }
  return dir;
}

/**
 * The folders that hold the CRDs: crds/ for kubectl and GitOps, and the chart's files/crds/, which
 * templates/crds.yaml renders (crds.enabled, crds.keep) so that `helm upgrade` and Argo CD/Flux
 * syncs upgrade them — Helm's own crds/ folder is installed once and never upgraded.
 */
export const CRD_DIRS = ['crds', join('helm', 'playflow', 'files', 'crds')];

/** Writes every CRD folder; with `--check` only reports stale files and exits 1 if any. */
function main(argv: string[]): void {
  const check = argv.includes('--check');
  let stale = 0;
  for (const dir of CRD_DIRS) {
    const out = resolve(repoRoot(), dir);
    mkdirSync(out, { recursive: true });
    for (const [file, text] of Object.entries(renderCrds())) {
      const path = join(out, file);
      const old = existsSync(path) ? readFileSync(path, 'utf8') : '';
      if (old === text) {
        process.stdout.write(`unchanged ${dir}/${file}\n`);
        continue;
      }
      stale += 1;
      if (check) process.stdout.write(`stale ${dir}/${file}\n`);
      else {
        writeFileSync(path, text);
        process.stdout.write(`wrote ${dir}/${file}\n`);
      }
    }
  }
  if (check && stale) {
    process.stderr.write('CRDs are stale: run `npm run build && npm run crds`\n');
    process.exitCode = 1;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
