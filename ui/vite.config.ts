/**
 * Builds the console into dist/ui (served at /ui by server/app/ui.ts). Everything is bundled: no
 * CDN, so the console works offline and behind a firewall. ReDoc's standalone bundle is copied
 * into dist/ui/redoc for /redoc (server/app/docs.ts) for the same reason.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.resolve(here, '../dist/ui');

function copyRedoc(): Plugin {
  return {
    name: 'playflow-copy-redoc',
    apply: 'build',
    closeBundle() {
      const src = createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js');
      mkdirSync(path.join(outDir, 'redoc'), { recursive: true });
      copyFileSync(src, path.join(outDir, 'redoc', 'redoc.standalone.js'));
    },
  };
}

export default defineConfig({
  root: here,
  base: '/ui/',
  plugins: [react(), copyRedoc()],
  build: {
    outDir,
    emptyOutDir: true,
    chunkSizeWarningLimit: 2000,
    // No inline scripts or data: module preload polyfill: the CSP allows scripts from 'self' only.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
  },
});
