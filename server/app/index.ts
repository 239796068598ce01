/**
 * The HTTP app: `buildApp(deps, opts)` returns a ready fastify instance (not listening), used by
 * `playflow server start`, `playflow dev` and the tests (with `app.inject`).
 *
 * One plugin per resource, listed in `PLUGINS`. To add a resource (e.g. credentials, keychain,
 * vars):
 *   1. write server/app/<name>.ts exporting an `AppPlugin` (`{name, tag, routes(app, ctx)}`);
 *      declare a `schema` on every route with `routeSchema(tag, summary, {...})` so it is validated
 *      and appears in /docs (bodies are validated without type coercion, query strings and path
 *      parameters with it; wire shapes come from common/contract/, whose `$id` schemas routes
 *      refer to with `Ref(X)`); throw AppError
 *      (server/errors.ts) for 4xx answers;
 *   2. add its services to `ServerDeps` (server/services.ts) — optional fields if the core may
 *      run without them — and read them from `ctx.deps`;
 *   3. append it to `PLUGINS` below. Auth, error envelope, metrics and OpenAPI apply automatically.
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_PUBLIC_ENDPOINTS } from '../config.js';
import type { ServerDeps } from '../services.js';
import type { AppContext, AppOptions, AppPlugin, ResolvedAppOptions } from './context.js';
import { catalogRoutes } from './catalog.js';
import { credentialsAppPlugin } from './credentials.js';
import { keychainAppPlugin } from './keychain.js';
import { varsAppPlugin } from './vars.js';
import { hooksAppPlugin } from './hooks.js';
import { commandRoutes } from './commands.js';
import { databaseRoutes } from './database.js';
import { docsRoutes, registerOpenApi } from './docs.js';
import { eventRoutes } from './events.js';
import { executionRoutes } from './executions.js';
import { healthRoutes } from './health.js';
import { queueRoutes } from './queue.js';
import { LazyCompilers } from './lazy-compilers.js';
import { lazyRequestLogger } from './request-logger.js';
import { runtimeRoutes } from './runtime.js';
import { scheduleRoutes } from './schedules.js';
import { sharedSchemas } from './schemas.js';
import { uiRoutes } from './ui.js';
import {
  errorHandler, frameworkErrors, installAuth, installInputGuards, installJsonParser, installRequestMetrics, notFoundHandler, validatorCompiler,
} from './support.js';

export type { AppContext, AppOptions, AppPlugin } from './context.js';

export const PLUGINS: AppPlugin[] = [
  { name: 'health', tag: { name: 'health', description: 'Probes and Prometheus metrics' }, routes: healthRoutes },
  { name: 'catalog', tag: { name: 'catalog', description: 'Playbook catalog: register, read, list, remove' }, routes: catalogRoutes },
  { name: 'executions', tag: { name: 'executions', description: 'Start, inspect and cancel executions' }, routes: executionRoutes },
  { name: 'events', tag: { name: 'events', description: 'Execution event log; events reported by workers' }, routes: eventRoutes },
  { name: 'commands', tag: { name: 'commands', description: 'Worker command protocol: claim and lease heartbeats' }, routes: commandRoutes },
  { name: 'queue', tag: { name: 'queue', description: 'Queue statistics' }, routes: queueRoutes },
  { name: 'runtime', tag: { name: 'runtime', description: 'Server and worker pool registrations' }, routes: runtimeRoutes },
  { name: 'schedules', tag: { name: 'schedules', description: 'Schedules: cron triggers of playbooks' }, routes: scheduleRoutes },
  { name: 'database', tag: { name: 'database', description: "Direct SQL on the server's database" }, routes: databaseRoutes },
  credentialsAppPlugin,
  keychainAppPlugin,
  varsAppPlugin,
  hooksAppPlugin,
  { name: 'docs', tag: { name: 'docs', description: 'API documentation' }, routes: docsRoutes },
  { name: 'ui', tag: { name: 'ui', description: 'Web console (served at /ui)' }, routes: uiRoutes },
];

export interface RouteInfo {
  method: string;
  url: string;
  /** Not in the OpenAPI document (documentation pages and their assets). */
  hidden: boolean;
}

/** The app's schema compilers: what was compiled, what waits for a first use (lazy-compilers.ts). */
export function schemaCompilers(app: FastifyInstance): LazyCompilers {
  return (app as FastifyInstance & { playflowSchemas: LazyCompilers }).playflowSchemas;
}

/** Every route the app declared (for tests and diagnostics). */
export function listRoutes(app: FastifyInstance): RouteInfo[] {
  return (app as FastifyInstance & { playflowRoutes?: RouteInfo[] }).playflowRoutes ?? [];
}

/**
 * Longest path parameter the router accepts (fastify's default is 100, which refuses legitimate
 * names: vars, credentials and keychain entries are up to 255 characters, schedule names up to 253).
 * find-my-way measures the decoded parameter (a 255-character name is at most 510 UTF-16 units),
 * but the bound is the percent-encoded length of the longest name, 255 characters of 4-byte UTF-8
 * at 12 bytes each = 3060, so it holds however the router counts; 3072 rounds that up. Longer
 * parameters answer 400 from the router; names within it reach the route's own length check
 * (400 naming the field). Catalog paths (up to 512) are wildcard parameters, which it never limits.
 */
export const MAX_PARAM_LENGTH = 3072;

export function resolveOptions(opts: AppOptions): ResolvedAppOptions {
  return {
    apiToken: opts.apiToken || undefined,
    publicEndpoints: opts.publicEndpoints ?? DEFAULT_PUBLIC_ENDPOINTS,
    sqlApi: opts.sqlApi ?? false,
    sqlTimeoutMs: opts.sqlTimeoutMs ?? 60_000,
    bodyLimit: opts.bodyLimit ?? DEFAULT_MAX_BODY_BYTES,
    healthTimeoutMs: opts.healthTimeoutMs ?? 2_000,
  };
}

export async function buildApp(deps: ServerDeps, opts: AppOptions = {}): Promise<FastifyInstance> {
  const options = resolveOptions(opts);
  const plugins = [...PLUGINS, ...(opts.plugins ?? [])];
  const logger = opts.logger;
  const compilers = new LazyCompilers();
  const app = Fastify({
    ...(logger && typeof logger === 'object' ? { loggerInstance: logger as FastifyBaseLogger } : { logger: logger === true }),
    bodyLimit: options.bodyLimit,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Requests are logged once, at debug level, by installRequestMetrics.
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: 'x-request-id',
    childLoggerFactory: lazyRequestLogger,
    return503OnClosing: true,
    frameworkErrors,
    schemaController: { compilersFactory: { buildSerializer: compilers.serializerFactory() } },
  });

  app.setValidatorCompiler(compilers.validator(validatorCompiler));
  app.decorate('playflowSchemas', compilers);
  app.setErrorHandler(errorHandler(() => deps.stopping?.() ?? false));
  app.setNotFoundHandler(notFoundHandler);
  installJsonParser(app);
  installRequestMetrics(app);
  installAuth(app, options.apiToken, options.publicEndpoints);
  installInputGuards(app);
  app.addHook('onSend', (req, reply, payload, done) => {
    reply.header('x-request-id', req.id);
    done(null, payload);
  });
  for (const s of sharedSchemas) app.addSchema(s);
  const routes: RouteInfo[] = [];
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    const hidden = Boolean((r.schema as { hide?: boolean } | undefined)?.hide);
    for (const method of methods) routes.push({ method: String(method), url: r.url, hidden });
  });
  app.decorate('playflowRoutes', routes);

  await registerOpenApi(app, plugins.map((p) => p.tag));
  const ctx: AppContext = { deps, options };
  for (const p of plugins) {
    await app.register(async (instance) => {
      await p.routes(instance, ctx);
    }, {});
  }
  await app.ready();
  return app;
}
