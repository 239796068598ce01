/**
 * What a worker loads to start (`playflow worker start` imports worker/config.js, then
 * worker/main.js): the tools' heavy libraries wait for the first step that needs them (nodemailer
 * for email, pg for postgres, yaml for YAML files), and the configured id is checked without the
 * schema library (test/helpers/loaded-modules.ts records every module resolved).
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadedModules } from '../helpers/loaded-modules.js';

const ROOT = join(import.meta.dirname, '../..');

/** The modules resolved by importing what `playflow worker start` imports. */
function loaded(): Promise<string[]> {
  const dist = (p: string) => pathToFileURL(join(ROOT, 'dist', p)).href;
  return loadedModules(['--input-type=module', '-e', `await import(${JSON.stringify(dist('worker/config.js'))}); await import(${JSON.stringify(dist('worker/main.js'))});`]);
}

const DEFERRED = [/\/node_modules\/nodemailer\//, /\/node_modules\/pg\//, /\/node_modules\/yaml\//, /\/node_modules\/@sinclair\/typebox\//, /\/node_modules\/ajv\//];

describe('worker start', () => {
  it('loads its runtime and tools without the libraries only some steps need, or the schema library', async () => {
    const urls = await loaded();
    for (const need of ['/dist/worker/runtime.js', '/dist/worker/tools/email.js', '/dist/worker/tools/postgres.js', '/dist/worker/tools/file.js']) {
      expect(urls.some((u) => u.endsWith(need))).toBe(true);
    }
    for (const heavy of DEFERRED) expect(urls.filter((u) => heavy.test(u))).toEqual([]);
  });
});
