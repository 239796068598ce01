/**
 * API documentation generated from the route schemas.
 *
 * - GET /docs: Swagger UI (@fastify/swagger-ui); GET /docs/json and /docs/yaml: the OpenAPI 3
 *   document listing every route.
 * - GET /redoc: a ReDoc page rendering /docs/json, with ReDoc's standalone bundle served locally
 *   at /redoc/redoc.standalone.js (no CDN: it works offline and behind a firewall). The bundle is
 *   copied from the `redoc` package (a build-time dependency) into dist/ui/redoc at `npm run
 *   build`; in a checkout with dev dependencies it is read from node_modules directly. Without
 *   either, the page says so and links to /docs, whose Swagger UI assets are served locally.
 *
 * Like every endpoint but the probes, these are behind the API token when one is set (a browser
 * cannot send it): set PLAYFLOW_PUBLIC_ENDPOINTS=docs to serve them openly.
 */
import type { FastifyInstance } from 'fastify';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createRequire } from 'node:module';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { AppContext } from './context.js';
import { uiDistDir } from './ui.js';

export const API_VERSION = '0.1.0';
/**
 * ReDoc renders with styled-components (inline <style>) and searches in a blob: worker; anything
 * else (its footer logo on a CDN included) is refused, so the page never reaches another host.
 */
const REDOC_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:",
  "font-src 'self' data:", "connect-src 'self'", "worker-src 'self' blob:", "base-uri 'none'",
  "frame-ancestors 'none'", "object-src 'none'",
].join('; ');

/** ReDoc's standalone bundle: the copy in the build, else the installed `redoc` package. */
function localRedocBundle(): string | undefined {
  const built = path.join(uiDistDir(), 'redoc', 'redoc.standalone.js');
  if (existsSync(built)) return built;
  try {
    return createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js');
  } catch {
    return undefined;
  }
}

const DESCRIPTION = `Playflow server API: catalog, executions, events, worker commands, credentials, keychain and
variables.

Errors are always \`{"error": {"code", "message", "details"?}}\`: 400 \`bad_request\` (a field failing
validation; \`details\` lists each with its location) or \`invalid_json\`, 401 \`unauthorized\`, 404
\`not_found\`, 409/410 on command leases, 422 \`playbook_invalid\` (\`details\` lists every problem with
its path), 500 \`internal_error\` only for faults.

IDs (execution_id, queue_id, catalog_id) are int64: responses carry them as decimal strings;
requests accept a string or an integer.

When the server has PLAYFLOW_API_TOKEN set, every endpoint but /health, /healthz and /readyz needs
\`Authorization: Bearer <token>\`.`;

/** Must run before any route is declared: @fastify/swagger collects routes as they are added. */
export async function registerOpenApi(app: FastifyInstance, tags: Array<{ name: string; description: string }>) {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Playflow API', version: API_VERSION, description: DESCRIPTION },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'PLAYFLOW_API_TOKEN' } } },
      security: [{ bearerAuth: [] }],
      tags,
    },
    // The catalog's wildcard routes (`/api/catalog/playbook/*`) are documented as `{path}`.
    transform: ({ schema, url }) => {
      if (!url.includes('*')) return { schema, url };
      const params = (schema as { params?: { properties?: Record<string, unknown> } } | undefined)?.params;
      const properties = { ...(params?.properties ?? {}) };
      if ('*' in properties) {
        properties.path = properties['*'];
        delete properties['*'];
      }
      return {
        schema: { ...schema, params: { ...params, type: 'object', required: ['path'], properties } } as typeof schema,
        url: url.replace('*', ':path'),
      };
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
}

export async function docsRoutes(app: FastifyInstance, _ctx: AppContext) {
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { docExpansion: 'list', deepLinking: true, persistAuthorization: true },
  });

  const local = localRedocBundle();
  if (local) {
    const bundle = await readFile(local);
    app.get('/redoc/redoc.standalone.js', { schema: { hide: true } }, async (_req, reply) =>
      reply.type('application/javascript; charset=utf-8').header('cache-control', 'public, max-age=86400').send(bundle));
  }
  const viewer = local
    ? `<redoc spec-url="docs/json"></redoc>
  <script src="redoc/redoc.standalone.js"></script>`
    : `<div class="fallback">
    <h1>Playflow API</h1>
    <p>The ReDoc viewer is not installed next to this server (run <code>npm run build</code>, which copies
       its bundle into dist/ui/redoc).</p>
    <p>Use <a href="docs">Swagger UI at /docs</a> (served locally) or the raw
       <a href="docs/json">OpenAPI document at /docs/json</a>.</p>
  </div>`;
  const page = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Playflow API — ReDoc</title>
  <style>body{margin:0;font-family:sans-serif} .fallback{padding:2em}</style>
</head>
<body>
  ${viewer}
</body>
</html>`;
  app.get('/redoc', { schema: { hide: true } }, async (_req, reply) =>
    reply.type('text/html; charset=utf-8').header('content-security-policy', REDOC_CSP).send(page));
}
