/** Secrets from the worker's own environment variables and mounted files (Kubernetes secrets). */
import { readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { isWorkerPrivatePath, isWorkerSetting } from '../private.js';
import { SecretProviderError, type SecretProvider } from './types.js';

export const envProvider: SecretProvider = {
  async fetch(path, _auth, opts) {
    if (isWorkerSetting(path)) throw new SecretProviderError('env', `environment variable ${path} is one of the worker's own settings, which a playbook cannot read`);
    const v = (opts.env ?? process.env)[path];
    if (v === undefined) throw new SecretProviderError('env', `environment variable ${path} is not set`);
    return v;
  },
};

/** Reads the file; one trailing newline (as `kubectl create secret --from-file` often leaves) is dropped. */
export const fileProvider: SecretProvider = {
  async fetch(path, _auth, opts) {
    const full = isAbsolute(path) ? path : resolve(opts.fileRoot ?? process.cwd(), path);
    if (isWorkerPrivatePath(full)) throw new SecretProviderError('file', `cannot read ${full}: the worker's process files and service-account token are not a playbook's to read`);
    try {
      return (await readFile(full, 'utf8')).replace(/\r?\n$/, '');
    } catch (err) {
      throw new SecretProviderError('file', `cannot read ${full}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  },
};
