/** Wire shapes the console reads (a subset of the API's, see /docs). */
export type ExecutionStatus = 'started' | 'running' | 'completed' | 'failed' | 'cancelled';
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export interface StepView {
  status: 'pending' | 'running' | 'completed' | 'failed' | 'skipped' | 'cancelled';
  runs?: number;
  result?: Json;
  error?: Json;
}

export interface Execution {
  execution_id: string;
  path: string;
  version?: number;
  catalog_id?: string;
  parent_execution_id?: string | null;
  root_execution_id?: string;
  status: ExecutionStatus;
  payload?: Record<string, Json>;
  result?: Json;
  error?: Json;
  vars?: Record<string, Json>;
  steps?: Record<string, StepView>;
  created_at: string;
  updated_at?: string;
  finished_at?: string | null;
}

export interface EventView {
  event_id?: string;
  execution_id?: string;
  seq: number;
  name: string;
  step: string | null;
  command_id?: number | null;
  payload: Record<string, any>;
  created_at: string;
}

export interface EventsPage {
  execution_id: string;
  events: EventView[];
  next_after: number | null;
  /** The execution's latest seq (its event count). */
  last_seq?: number;
}

export interface NextTarget { step: string; args?: Record<string, Json> }
export interface PlaybookStep {
  step: string;
  desc?: string;
  tool?: { kind: string; [k: string]: Json | undefined };
  loop?: { in: Json; iterator: string; mode: string };
  case?: Array<{ when: string; then: Array<{ action: string; targets?: NextTarget[]; [k: string]: unknown }> }>;
  next?: NextTarget[];
}
export interface Playbook {
  metadata: { name: string; path?: string; description?: string };
  workflow: PlaybookStep[];
  workload?: Record<string, Json>;
}

export interface CatalogEntry {
  catalog_id: string;
  path: string;
  version: number;
  content: string;
  playbook?: Playbook;
  created_at?: string;
}

export interface CatalogSummary { catalog_id: string; path: string; version: number; name: string; description?: string; created_at: string }

export const TERMINAL: ExecutionStatus[] = ['completed', 'failed', 'cancelled'];
