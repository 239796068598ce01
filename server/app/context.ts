/** What every route plugin receives: the services and the app's resolved options. */
import type { FastifyInstance } from 'fastify';
import type { PublicEndpointGroup } from '../config.js';
import type { ServerDeps } from '../services.js';

export interface AppOptions {
  /** Bearer token required on every endpoint but the probes (PLAYFLOW_API_TOKEN). */
  apiToken?: string;
  /** Endpoint groups served without the token (PLAYFLOW_PUBLIC_ENDPOINTS); default `['metrics']`. */
  publicEndpoints?: PublicEndpointGroup[];
  /** POST /api/postgres/execute on or off (default; PLAYFLOW_SQL_API); on, it needs `apiToken` and `deps.sql`. */
  sqlApi?: boolean;
  /** `statement_timeout` of POST /api/postgres/execute, ms; default 60000. */
  sqlTimeoutMs?: number;
  /** Largest request body, bytes; default 10 MiB. */
  bodyLimit?: number;
  /** Per-probe timeout of /health, ms; default 2000. */
  healthTimeoutMs?: number;
  /**
   * A pino logger instance (common/logger.ts), `false` for none (the default in tests), or
   * `true` for fastify's default.
   */
  logger?: unknown;
  /** Extra plugins after the built-in ones (tests, other modules not yet in the list). */
  plugins?: AppPlugin[];
}

export interface ResolvedAppOptions {
  apiToken?: string;
  publicEndpoints: PublicEndpointGroup[];
  sqlApi: boolean;
  sqlTimeoutMs: number;
  bodyLimit: number;
  healthTimeoutMs: number;
}

export interface AppContext {
  deps: ServerDeps;
  options: ResolvedAppOptions;
}

/**
 * One resource of the API. `routes` declares its routes (with schemas) on the instance it is
 * given; `tag` groups them in the OpenAPI document.
 */
export interface AppPlugin {
  name: string;
  tag: { name: string; description: string };
  routes: (app: FastifyInstance, ctx: AppContext) => Promise<void> | void;
}
