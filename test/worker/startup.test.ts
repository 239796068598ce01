/**
 * What a worker loads to start (`playflow worker start` imports worker/config.js, then
 * worker/main.js): the tools' heavy libraries wait for the first step that needs them (nodemailer
 * for email, pg for postgres, yaml for YAML files), and the configured id is checked without the
 * schema library. A resolve hook registered before the imports records every module resolved.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

const HOOK = `data:text/javascript,${encodeURIComponent(`
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  process.stderr.write('LOADED ' + r.url + '\\\\n');
  return r;
}\`));
`)}`;

function loaded(): Promise<string[]> {
  const dist = (p: string) => pathToFileURL(join(ROOT, 'dist', p)).href;
  const script = `await import(${JSON.stringify(dist('worker/config.js'))}); await import(${JSON.stringify(dist('worker/main.js'))});`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', HOOK, '--input-type=module', '-e', script], { timeout: 30_000 }, (err, _stdout, stderr) => {
      const urls = stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice(7));
      if (err || urls.length === 0) reject(err ?? new Error(`no module recorded: ${stderr}`));
      else resolve(urls);
    });
  });
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
