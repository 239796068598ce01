/**
 * The normalised playbook: what every other part (engine, server, worker, operator) consumes.
 * `parsePlaybook` turns any accepted document (v2, v1, legacy forms) into this shape, so no
 * consumer ever looks at a legacy spelling. Raw YAML shapes are described by the JSON Schema in
 * `schema.ts`; these types describe the result of normalisation.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export const API_VERSIONS = ['playflow.io/v2', 'playflow.io/v1', 'noetl.io/v2', 'noetl.io/v1'] as const;
export type ApiVersion = (typeof API_VERSIONS)[number];

export interface Playbook {
  apiVersion: ApiVersion;
  kind: 'Playbook';
  metadata: PlaybookMetadata;
  workload: JsonObject;
  keychain: KeychainDef[];
  workbook: WorkbookTask[];
  workflow: Step[];
  /** Worker pool of every step that names none (absent: `default`). */
  pool?: string;
  /** Schedules declared in the playbook (registered as `<path>:<name>`); absent when none. */
  schedules?: PlaybookSchedule[];
  /** At most `limit` executions of this path run at once; the others wait, started in order (absent: no limit). */
  concurrency?: { limit: number };
}

/** The worker pool of a step whose playbook names none. */
export const DEFAULT_POOL = 'default';

/** A `schedules:` entry: starts this playbook on a cron (see the server's schedules). */
export interface PlaybookSchedule {
  name: string;
  cron: string;
  timezone?: string;
  version?: number | null;
  payload?: JsonObject;
  concurrency_policy?: 'Allow' | 'Forbid' | 'Replace';
  missed_runs?: 'RunOnce' | 'Skip';
  starting_deadline_seconds?: number | null;
  suspend?: boolean;
}

export interface PlaybookMetadata {
  name: string;
  path?: string;
  description?: string;
  labels?: Record<string, string>;
  /** Other keys (version, tags, owner, …) are kept as written and not interpreted. */
  [key: string]: Json | undefined;
}

/** One step, v2 shape. Legacy spellings have been rewritten by normalisation. */
export interface Step {
  step: string;
  desc?: string;
  /** Worker pool that runs this step's calls; absent: the playbook's pool. */
  pool?: string;
  args?: JsonObject;
  loop?: Loop;
  /** Absent for a pure routing step. */
  tool?: Tool;
  case?: CaseEntry[];
  /** Structural successors; all three YAML forms become this list. */
  next?: NextTarget[];
  /** vars block: name → template, rendered after completion with `result` bound. */
  vars?: Record<string, Json>;
  /** Unified retry policies, top to bottom, first truthy `when` wins. */
  retry?: RetryPolicy[];
}

/**
 * Tool configuration. `kind` selects the executor; every other field is kind-specific and kept
 * as written (templates unrendered). Synonyms are normalised: http `url` → `endpoint`,
 * postgres `query` → `command`.
 */
export interface Tool {
  kind: ToolKind;
  [field: string]: Json | undefined;
}

export const TOOL_KINDS = [
  'http', 'postgres', 'duckdb', 'python', 'workbook', 'playbook', 'secret',
  // legacy task-guide kinds, executed by the worker's legacy tools
  'file', 'email', 'slack', 'webhook', 'transform', 'console',
] as const;
export type ToolKind = (typeof TOOL_KINDS)[number];

export interface Loop {
  /** Template expression (string) or a literal list. */
  in: Json;
  iterator: string;
  mode: 'sequential' | 'async';
  /** Async bound; default 16 (engine setting). */
  max_in_flight?: number;
  /** Legacy `loop.pagination`, kept as written (deprecated) for the engine. */
  pagination?: LegacyPagination;
}

/**
 * A count or a duration in a retry or pagination setting: a number, or a template the engine
 * renders to one when it applies the setting (playbook/schema.ts: numbers may be templates).
 */
export type NumberOrTemplate = number | string;

export interface LegacyPagination {
  type: 'response_based';
  continue_while: string;
  next_page?: { params?: JsonObject; body?: JsonObject; headers?: JsonObject };
  merge_strategy: 'append' | 'extend' | 'replace' | 'collect';
  merge_path?: string;
  max_iterations: NumberOrTemplate; // default 1000
  retry: {
    max_attempts: NumberOrTemplate; // default 1
    backoff: 'fixed' | 'exponential'; // default fixed
    initial_delay: NumberOrTemplate; // seconds, default 1
    max_delay: NumberOrTemplate; // seconds, default 60
  };
}

export interface CaseEntry {
  when: string;
  /** `then` as an object or a list both become an ordered list of actions. */
  then: Action[];
}

export interface NextTarget {
  step: string;
  /** A mapping of templates, or one whole-expression template rendering to a mapping. */
  args?: JsonObject | string;
}

export type Action =
  | { action: 'call'; overrides: JsonObject }
  | { action: 'retry'; max_attempts?: NumberOrTemplate; backoff_multiplier?: NumberOrTemplate; initial_delay?: NumberOrTemplate; jitter?: number | boolean; max_delay?: NumberOrTemplate }
  | { action: 'collect'; from: Json; into: string; mode: 'append' | 'extend' }
  | { action: 'sink'; tool: Tool }
  | { action: 'set'; ctx: JsonObject }
  | { action: 'result'; from: Json }
  | { action: 'next'; targets: NextTarget[] }
  | { action: 'fail'; message?: string }
  | { action: 'skip' };

export type ActionName = Action['action'];

export interface RetryPolicy {
  when: string;
  then: RetryThen;
}

export interface RetryThen {
  max_attempts?: NumberOrTemplate;
  backoff_multiplier?: NumberOrTemplate;
  initial_delay?: NumberOrTemplate;
  /** Fraction of the delay drawn at random either way (default 0.2); false or 0 for none. */
  jitter?: number | boolean;
  /** Reference convention (deprecated): cap in seconds of the error-side backoff delay. */
  max_delay?: NumberOrTemplate;
  /** Overrides for the next request (params, args, url/endpoint, json, headers…), templated. */
  next_call?: JsonObject;
  collect?: { strategy: 'append' | 'replace' | 'merge'; path?: string; into?: string };
  sink?: Tool;
}

export interface KeychainDef {
  name: string;
  kind: 'secret_manager' | 'oauth2' | 'http' | 'env' | 'file';
  provider?: 'gcp' | 'aws' | 'azure';
  scope: 'global' | 'local' | 'shared';
  auth?: string;
  map?: Record<string, string>;
  endpoint?: string;
  method?: string;
  headers?: JsonObject;
  data?: Json;
  auto_renew?: boolean;
  ttl_seconds?: number;
  [field: string]: Json | undefined;
}

export interface WorkbookTask {
  name: string;
  tool: Tool;
  desc?: string;
}

/** A problem found while parsing, normalising or validating. */
export interface PlaybookIssue {
  /** JSON path into the document as written, e.g. `workflow[3].case[0].then.next[0].step`. */
  path: string;
  message: string;
  severity: 'error' | 'warning';
}

export interface ParseResult {
  /** Present when there are no errors. */
  playbook?: Playbook;
  errors: PlaybookIssue[];
  /** Deprecations and other non-fatal notes. */
  warnings: PlaybookIssue[];
}
