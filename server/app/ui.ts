/**
 * The web console: the single-page app built from ui/ into dist/ui (`npm run build`).
 *
 * - GET / and GET /ui → 302 to /ui/.
 * - GET /ui/<file> → that file of the build (hashed assets are cached for a year);
 *   GET /ui/<anything else> → index.html, so a page's address (e.g. /ui/executions/42) can be
 *   reloaded and shared; the app's own router reads it.
 *
 * The shell is public (no data in it; a browser cannot attach the bearer token to a page load):
 * the app asks for the token and sends it on its API calls (support.ts `installAuth` exempts
 * these routes only). Every answer carries a strict Content-Security-Policy: scripts, styles,
 * fonts, images and API calls from this origin only, no inline script, no framing; index.html
 * gets a fresh style nonce each time (consoleCsp).
 *
 * Without a build (tests of the API only, a checkout before `npm run build`) /ui/ answers 503
 * with a page saying how to build it.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from './context.js';

export const UI_PREFIX = '/ui';

/**
 * `style-src` also allows the page's nonce: the code editor (CodeMirror) writes its theme into a
 * <style> element and takes the nonce from the page's `csp-nonce` meta tag; nothing else inline.
 */
export const consoleCsp = (nonce?: string) => [
  "default-src 'none'",
  "script-src 'self'",
  nonce ? `style-src 'self' 'nonce-${nonce}'` : "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

const NONCE_PLACEHOLDER = '__CSP_NONCE__';

/** The package root: the nearest folder with a package.json above this file (source or dist/). */
export function packageRoot(from = path.dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) return from;
    dir = up;
  }
}

/** dist/ui of the package (PLAYFLOW_UI_DIR overrides, for a build elsewhere). */
export function uiDistDir(): string {
  return process.env.PLAYFLOW_UI_DIR?.trim() || path.join(packageRoot(), 'dist', 'ui');
}

/** Relative paths of every file of the build (read once: a build does not change under a server). */
function listFiles(root: string): Set<string> {
  const out = new Set<string>();
  const walk = (rel: string) => {
    for (const name of readdirSync(path.join(root, rel))) {
      const r = rel ? `${rel}/${name}` : name;
      if (statSync(path.join(root, r)).isDirectory()) walk(r);
      else out.add(r);
    }
  };
  walk('');
  return out;
}

const NOT_BUILT = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Playflow console</title></head>
<body><h1>Playflow console not built</h1><p>Run <code>npm run build</code> (it builds ui/ into dist/ui) and restart the server.
The API is up: see <a href="/docs">/docs</a>.</p></body></html>`;

export async function uiRoutes(app: FastifyInstance, _ctx: AppContext) {
  const root = uiDistDir();
  const built = existsSync(path.join(root, 'index.html'));
  const files = built ? listFiles(root) : new Set<string>();
  await app.register(fastifyStatic, { root: built ? root : path.resolve('.'), serve: false });

  // index.html with a fresh nonce per answer (see consoleCsp).
  const indexHtml = built ? readFileSync(path.join(root, 'index.html'), 'utf8') : '';
  app.addHook('onSend', async (_req, reply) => {
    if (!reply.hasHeader('content-security-policy')) reply.header('content-security-policy', consoleCsp());
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'no-referrer');
    reply.header('x-frame-options', 'DENY');
  });

  const hidden = { schema: { hide: true } };
  app.get('/', hidden, async (_req, reply) => reply.redirect(`${UI_PREFIX}/`));
  app.get(UI_PREFIX, hidden, async (_req, reply) => reply.redirect(`${UI_PREFIX}/`));
  app.get<{ Params: { '*': string } }>(`${UI_PREFIX}/*`, hidden, async (req, reply) => {
    if (!built) return reply.code(503).type('text/html; charset=utf-8').send(NOT_BUILT);
    const rel = req.params['*'];
    if (files.has(rel) && rel !== 'index.html') {
      const hashed = rel.startsWith('assets/');
      return reply.sendFile(rel, { maxAge: hashed ? 365 * 24 * 3600 * 1000 : 0, immutable: hashed });
    }
    if (rel.startsWith('assets/')) return reply.code(404).type('text/plain').send(`no file ${rel}`);
    const nonce = randomBytes(16).toString('base64');
    return reply
      .header('cache-control', 'no-store')
      .header('content-security-policy', consoleCsp(nonce))
      .type('text/html; charset=utf-8')
      .send(indexHtml.replaceAll(NONCE_PLACEHOLDER, nonce));
  });
}
