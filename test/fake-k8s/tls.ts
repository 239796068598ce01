/**
 * A self-signed certificate for the fake API server's HTTPS listener, made once with the openssl
 * CLI into node_modules/.cache. HTTPS matters because kubectl (clientcmd) sends a kubeconfig's
 * bearer token only over TLS: without it, RBAC could not tell kubectl's callers apart.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function tlsMaterial(): { key: Buffer; cert: Buffer } {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  // From test/fake-k8s or dist/test/fake-k8s: the node_modules beside package.json.
  const base = existsSync(path.join(root, 'node_modules')) ? root : path.resolve(root, '..');
  const dir = path.join(base, 'node_modules', '.cache', 'playflow-fake-kube-tls');
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  if (!existsSync(key) || !existsSync(cert)) {
    mkdirSync(dir, { recursive: true });
    const tmp = `${process.pid}-${Date.now()}`;
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '3650',
      '-subj', '/CN=fake-kube-apiserver', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout', path.join(dir, `key-${tmp}.pem`), '-out', path.join(dir, `cert-${tmp}.pem`),
    ], { stdio: 'ignore' });
    // Renames are atomic: a concurrent test reads either nothing or a complete pair.
    renameSync(path.join(dir, `key-${tmp}.pem`), key);
    renameSync(path.join(dir, `cert-${tmp}.pem`), cert);
  }
  return { key: readFileSync(key), cert: readFileSync(cert) };
}
